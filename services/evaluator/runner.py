"""Run responders over manifest rows with a content-addressed cache, a budget cap and resume.

The cache key is sha256 over the responder id, its generation parameters, the system and user
prompt and the sha256 of every media input, so a changed asset is a cache miss, never a stale
hit. Only successful replies are cached; failures go to the item log and are retried on the
next run. Items beyond the request budget are recorded as ``not_run`` and never scored.

Media for models follow each family's source benchmark, clipped by what the endpoint states
(:mod:`services.evaluator.media`); a video's frames are each sent with their time ("video frame
at t s"), so temporal answers can be audited.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skyqa.answers import Parsed
from skyqa.blob import BlobStore
from skyqa.families import TaskFamily
from skyqa.media_policy import MediaPolicy, effective
from skyqa.models.base import VisionModel
from skyqa.steps import score_steps
from skyqa.v1 import model_pb2

from services.evaluator import media, rollout as rollout_steps
from services.evaluator.baselines import Responder
from services.evaluator.conditions import CONDITIONS, MEDIA, SEQUENTIAL, STEP_CONDITIONS, prompt_for
from services.evaluator.questions import Question


@dataclass(frozen=True)
class EndpointMedia:
    """What an endpoint states about the media it takes (``ModelEndpoint``; 0: no limit, or
    the family's own sampling), and whether its requests carry them as base64 text."""

    max_pixels: int = 0
    max_frames: int = 0
    max_request_bytes: int = 0
    video_frames: int = 0
    video_sample_fps: float = 0.0
    base64: bool = False


class ModelResponder:
    """A model-service endpoint (OpenAI-compatible HTTP or gRPC) behind the responder interface."""

    def __init__(
        self,
        name: str,
        model: VisionModel,
        store: BlobStore,
        run_root: str,
        params: dict[str, float],
        endpoint: EndpointMedia = EndpointMedia(),
    ) -> None:
        self.name = name
        self.conditions: frozenset[str] = frozenset(CONDITIONS)
        self.model = model
        self.store = store
        self.root = run_root
        self.params = params
        self.endpoint = endpoint

    def policy(self, family: TaskFamily[Any]) -> MediaPolicy:
        """The family's media policy as this endpoint receives it."""
        e = self.endpoint
        return effective(
            family.media_policy,
            max_pixels=e.max_pixels,
            max_frames=e.max_frames,
            max_request_bytes=e.max_request_bytes,
            video_frames=e.video_frames,
            video_sample_fps=e.video_sample_fps,
        )

    def request(self, q: Question, condition: str = "full") -> model_pb2.GenerateRequest:
        return self.build(q, condition)[0]

    def build(self, q: Question, condition: str = "full") -> tuple[model_pb2.GenerateRequest, dict[str, Any]]:
        """The request and what its media came to (for the item record)."""
        prompt = prompt_for(q, condition)
        req = model_pb2.GenerateRequest(system=q.system, prompt=prompt, request_id=q.sample_id)
        req.params.temperature = float(self.params.get("temperature", 0.0))
        req.params.max_tokens = int(self.params.get("max_tokens", 500))
        if "seed" in self.params:
            req.params.seed = int(self.params["seed"])
        policy = self.policy(q.family)
        kinds = MEDIA[condition]
        sources = self.sources(q) if kinds else []
        parts, used = media.within_bytes(sources, kinds, policy, self.endpoint.base64)
        for p in parts:
            req.images.add(data=p.data, mime_type=p.mime, label=p.label)
        sent: dict[str, Any] = {
            "images": len(parts),
            "bytes": media.wire_bytes(parts, self.endpoint.base64),
            "largest": max((list(p.size) for p in parts), key=lambda s: s[0] * s[1], default=[0, 0]),
        }
        if used != policy:
            sent["scaled_to_max_pixels"] = used.max_pixels  # over the endpoint's byte limit
        return req, sent

    def sources(self, q: Question) -> list[media.Source]:
        """The row's media in prompt order, each with the label the prompt uses for it."""
        return [
            media.Source(m.label, self.store.get(f"{self.root}/{m.path}"), m.fps)
            for m in q.family.media(q.row)
        ]

    async def answer(self, q: Question, condition: str = "full") -> tuple[str, dict[str, Any]]:
        # decoding and re-encoding images is CPU work: off the loop, so requests overlap
        req, sent = await asyncio.to_thread(self.build, q, condition)
        resp = await self.model.generate(req)
        meta = {
            "status": "ok" if resp.error_class == model_pb2.ERROR_CLASS_UNSPECIFIED else "failed",
            "error_class": model_pb2.ErrorClass.Name(resp.error_class),
            "error_message": resp.error_message,
            "latency_ms": round(resp.latency_s * 1000, 1),
            "prompt_tokens": resp.usage.prompt_tokens,
            "completion_tokens": resp.usage.completion_tokens,
            "media_sent": sent,
        }
        return resp.text, meta


def media_hashes(q: Question, store: BlobStore, root: str) -> list[str]:
    out = []
    for m in q.family.media(q.row):
        info = store.head(f"{root}/{m.path}")
        out.append(info.sha256 if info else "missing")
    return out


def cache_key(responder: Responder, q: Question, media: list[str], condition: str) -> str:
    body = {
        "responder": responder.name,
        "params": getattr(responder, "params", {}),
        # what the model is shown of the media: a changed policy is a new request
        **(
            {"media_policy": responder.policy(q.family).record()}
            if isinstance(responder, ModelResponder)
            else {}
        ),
        "condition": condition,
        "system": q.system,
        "prompt": q.user,
        "media": media,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class Cache:
    """Append-only JSONL of successful replies, keyed by content hash; ``path=None`` keeps them
    for this run only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, str] = {}
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    rec = json.loads(line)
                    self.entries[rec["key"]] = rec["text"]

    def get(self, key: str) -> str | None:
        return self.entries.get(key)

    def put(self, key: str, text: str) -> None:
        if key in self.entries:
            return
        self.entries[key] = text
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, "text": text}) + "\n")
            fh.flush()


def cache_for(responder: Responder, cache_dir: Path) -> Cache:
    """Only a model's replies outlive the run: a baseline's answer also depends on the release
    it was fitted on (the text prior's label counts), which the key does not cover, so a kept
    one goes stale when the release changes; recomputing it costs nothing."""
    if isinstance(responder, ModelResponder):
        return Cache(cache_dir / f"{responder.name.replace('/', '_')}.jsonl")
    return Cache(None)


@dataclass
class RunStats:
    """Requests sent, answered from the cache and failed; rows not run for the budget (a
    sequential protocol's row is several requests, and not run as a whole)."""

    asked: int = 0
    cached: int = 0
    failed: int = 0
    not_run: int = 0

    def __add__(self, other: RunStats) -> RunStats:
        return RunStats(
            self.asked + other.asked,
            self.cached + other.cached,
            self.failed + other.failed,
            self.not_run + other.not_run,
        )


async def run_items(
    responder: Responder,
    rows: list[Question],
    store: BlobStore,
    root: str,
    cache: Cache,
    concurrency: int = 4,
    budget: int | None = None,
    condition: str = "full",
) -> tuple[list[dict[str, Any]], RunStats]:
    """Item records in row order; ``budget`` caps the requests actually sent (cache hits are free).

    ``rows`` are already the condition's rows (``conditions.rows_for``); the condition decides
    what the responder is shown and is part of the cache key. Under the sequential protocols a
    row is several requests (one per step, then the final question), each cached and counted.
    """
    sem = asyncio.Semaphore(concurrency)
    stats = RunStats()
    lock = asyncio.Lock()
    steps = condition in STEP_CONDITIONS
    held = 0  # requests reserved by rollouts under way, not yet sent

    async def ask(q: Question, media: list[str], reserved: bool = False) -> tuple[str | None, dict[str, Any]]:
        """The reply text (None: not run or failed) and the request's metadata; ``reserved``:
        the request's budget was taken by its rollout beforehand."""
        nonlocal held
        key = cache_key(responder, q, media, condition)
        text = cache.get(key)
        if text is not None:
            stats.cached += 1
            return text, {"status": "ok", "cached": True, "request_hash": key}
        async with lock:
            allowed = reserved or budget is None or stats.asked + held < budget
            if allowed:
                stats.asked += 1
                held -= int(reserved)
        if not allowed:
            stats.not_run += 1
            return None, {"status": "not_run", "request_hash": key}
        async with sem:
            started = time.perf_counter()
            try:
                text, meta = await responder.answer(q, condition)
            except Exception as exc:  # a responder bug must not lose the other items
                text, meta = (
                    "",
                    {"status": "failed", "error_class": type(exc).__name__, "error_message": str(exc)},
                )
            meta.setdefault("latency_ms", round((time.perf_counter() - started) * 1000, 1))
        meta["request_hash"] = key
        if meta.get("status") != "ok":
            stats.failed += 1
            return None, meta
        cache.put(key, text)
        return text, meta

    async def rollout(q: Question, media: list[str]) -> tuple[str | None, dict[str, Any], list[Any] | None]:
        """A row's steps and final question; its budget is taken whole before the first request
        (each step waits for the one before, so rows taking it request by request would all stop
        half way), and what the cache then answers is given back."""
        nonlocal held
        gold = q.family.steps(q.row)
        need = len(gold) + 1
        async with lock:
            if budget is not None and stats.asked + held + need > budget:
                stats.not_run += 1
                return None, {"status": "not_run", "request_hash": ""}, None
            held += need
        sent = 0  # of the reservation, requests sent (``ask`` gives each back as it goes)
        try:
            user = q.user
            step_system = rollout_steps.step_system(q.system)
            preds: list[Any] = []
            shown: list[str] = []
            for i in range(len(gold)):
                prior = shown if condition == "pred_step" else [g.answer for g in gold[:i]]
                asked = replace(
                    q,
                    user_text=rollout_steps.step_prompt(user, gold, prior, i),
                    system_text=step_system,
                    step=i,
                )
                text, meta = await ask(asked, media, reserved=True)
                sent += not meta.get("cached")
                if text is None:
                    return None, meta, None
                preds.append(rollout_steps.step_answer(text))
                shown.append(rollout_steps.as_text(preds[-1]))
            # S5: the true steps, but never one that states the answer (there: the model's own)
            prefix = shown if condition == "pred_step" else rollout_steps.gt_prefix(gold, shown, q.item())
            final = replace(q, user_text=rollout_steps.final_prompt(user, gold, prefix), step=len(gold))
            text, meta = await ask(final, media, reserved=True)
            sent += not meta.get("cached")
            return text, meta, preds
        finally:
            async with lock:
                held -= need - sent

    async def one(q: Question) -> dict[str, Any]:
        media = media_hashes(q, store, root)
        item = q.item()
        base = {
            "model": responder.name,
            "condition": condition,
            "sample_id": q.sample_id,
            "base_sample_id": q.base_sample_id,
            "rotation": q.rotation,
            "landmark_id": item.unit,
            "task": item.task,
            "category": item.category,
            "difficulty": q.family.difficulty(q.row),
        }
        preds: list[Any] | None = None
        if condition in SEQUENTIAL:
            text, meta, preds = await rollout(q, media)
        else:
            text, meta = await ask(q, media)
        base["request_hash"] = meta.pop("request_hash")
        if meta.get("status") == "not_run":
            return {**base, "parse_kind": "not_run", "parse_stage": "", "raw_text": ""}
        if text is None:
            return {
                **base,
                **meta,
                "parse_kind": "request_failed",
                "parse_stage": "",
                "raw_text": "",
                **q.family.score(q.row, Parsed("request_failed"), steps),
            }
        parsed = q.family.parse(q.row, text)
        if steps and preds is None and parsed.steps is not None:
            preds = list(parsed.steps)
        labels = dict(item.options) if item.kind == "choice" else {}
        scores = q.family.score(q.row, parsed, steps and condition not in SEQUENTIAL)
        if condition in SEQUENTIAL:
            scores.update(score_steps(q.family.steps(q.row), preds))
        return {
            **base,
            **meta,
            "raw_text": text,
            "parse_kind": parsed.kind,
            "parse_stage": parsed.stage,
            "pred_option": parsed.option or ",".join(parsed.options),
            "pred_bbox": parsed.bbox,
            "pred_count": parsed.count,
            "pred_label": labels.get(parsed.option, ""),
            **({"pred_steps": [rollout_steps.as_text(p) for p in preds]} if preds is not None else {}),
            **scores,
        }

    items = await asyncio.gather(*(one(r) for r in rows))
    return list(items), stats
