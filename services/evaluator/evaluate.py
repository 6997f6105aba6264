"""Evaluate responders on a run's QA manifests and write the reports under ``runs/<run>/eval/``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyqa import integrity, keys
from skyqa.blob import BlobStore
from skyqa.families import FAMILIES, TaskFamily
from skyqa.models import open_model
from skyqa.models.grpc import MAX_MESSAGE
from skyqa.settings import ModelEndpoint

from services.evaluator.baselines import RandomBaseline, Responder, TextPrior
from services.evaluator.conditions import rows_for
from services.evaluator.cv_baseline import CVBaseline
from services.evaluator.html_report import html_page
from services.evaluator.judge import Judge, judge_item
from services.evaluator.leaderboard import leaderboard
from services.evaluator.metrics_csv import image_csv, video_csv
from services.evaluator.questions import Question, load_questions
from services.evaluator.runner import Cache, EndpointMedia, ModelResponder, RunStats, cache_for, run_items

GRPC_MEDIA_MAX = MAX_MESSAGE - (1 << 20)  # a MiB for the prompt and the message's framing


@dataclass
class EvalResult:
    outputs: dict[str, str]
    stats: dict[str, RunStats]
    leaderboard: dict[str, Any]


def responders_for(
    rows: list[Question],
    endpoints: list[ModelEndpoint],
    store: BlobStore,
    run_id: str,
    scene_id: str,
    seed: int = 0,
) -> list[Responder]:
    out: list[Responder] = [
        RandomBaseline(rows, seed),
        TextPrior(rows),
        CVBaseline(rows, store, run_id, scene_id),
    ]
    for ep in endpoints:
        name = ep.model or ep.url
        root = keys.run_prefix(run_id)
        out.append(
            ModelResponder(name, open_model(ep), store, root, {"temperature": 0.0}, endpoint_media(ep))
        )
    return out


def endpoint_media(ep: ModelEndpoint) -> EndpointMedia:
    """What the endpoint states about media; a gRPC endpoint also takes no more than its
    transport's message limit (less room for the prompt)."""
    limit = ep.max_request_bytes
    if ep.kind == "grpc":
        limit = min(limit or GRPC_MEDIA_MAX, GRPC_MEDIA_MAX)
    return EndpointMedia(
        max_pixels=ep.max_pixels,
        max_frames=ep.max_frames,
        max_request_bytes=limit,
        video_frames=ep.video_frames,
        video_sample_fps=ep.video_sample_fps,
        base64=ep.kind == "openai",
    )


def media_record(responders: list[Responder], families: Sequence[TaskFamily[Any]]) -> dict[str, Any]:
    """Per model and family, the media policy its requests were made under (evaluation metadata)."""
    return {
        r.name: {f.name: r.policy(f).record() for f in families}
        for r in responders
        if isinstance(r, ModelResponder)
    }


async def evaluate(
    store: BlobStore,
    run_id: str,
    scene_id: str,
    endpoints: list[ModelEndpoint],
    cache_dir: Path,
    concurrency: int = 4,
    budget: int | None = None,
    conditions: Sequence[str] = ("full",),
    families: Sequence[TaskFamily[Any]] = FAMILIES,
    judge: ModelEndpoint | None = None,
) -> EvalResult:
    """Every responder in every condition it supports; ``budget`` caps each model's requests
    over all its conditions together. ``families``: those the release was built with.
    ``judge``: an endpoint that re-marks free-form step answers the rules failed
    (:mod:`services.evaluator.judge`); none by default."""
    if "full" not in conditions:
        conditions = ("full", *conditions)  # every other number is read against it
    rows = load_questions(store, run_id, scene_id, families)
    root = keys.run_prefix(run_id)
    items: list[dict[str, Any]] = []
    stats: dict[str, RunStats] = {}
    grader = None
    if judge is not None:
        name = judge.model or judge.url
        grader = Judge(name, open_model(judge), Cache(cache_dir / f"judge_{name.replace('/', '_')}.jsonl"))
    responders = responders_for(rows, endpoints, store, run_id, scene_id)
    for responder in responders:
        cache = cache_for(responder, cache_dir)
        total = RunStats()
        for condition in conditions:
            if condition not in responder.conditions:
                continue
            left = None if budget is None else max(0, budget - total.asked)
            asked = rows_for(condition, rows)
            got, st = await run_items(responder, asked, store, root, cache, concurrency, left, condition)
            if grader is not None:
                by_id = {q.sample_id: q for q in asked}
                for it in got:
                    q = by_id[it["sample_id"]]
                    await judge_item(it, q.family.steps(q.row), grader)
            items += got
            total = total + st
        stats[responder.name] = total
    board = leaderboard(items, families)
    board["media_policy"] = media_record(responders, families)
    outputs = keys.eval_outputs(run_id, scene_id)
    lines = b"".join(json.dumps(i, sort_keys=True).encode() + b"\n" for i in items)
    store.put(outputs["eval_items"], lines, "application/x-ndjson")
    store.put(outputs["eval_image_metrics"], image_csv(items), "text/csv")
    store.put(outputs["eval_video_metrics"], video_csv(items), "text/csv")
    store.put(
        outputs["leaderboard"], json.dumps(board, indent=1, sort_keys=True).encode(), "application/json"
    )
    store.put(outputs["eval_report"], html_page(board, f"skyqa evaluation: {scene_id}"), "text/html")
    integrity.seal_eval(store, run_id)
    return EvalResult(outputs, stats, board)
