"""The evaluator against real local model servers: OpenAI-compatible HTTP (429s, failures,
budget stop and resume) and gRPC, on a small manifest written to a real store."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from PIL import Image
from skyqa.blob import LocalBlobStore
from skyqa.models import serve_grpc
from skyqa.servers import ServedApp
from skyqa.settings import ModelEndpoint
from skyqa.v1 import model_pb2

from services.evaluator.evaluate import evaluate
from services.qa_generator.pipeline import manifest_keys

RUN, SCENE = "evalrun", "tiny_town"
LABELS = ["Front", "Back", "Left", "Right"]


def write_manifest(store: LocalBlobStore, n: int = 6) -> list[dict[str, Any]]:
    buf = io.BytesIO()
    Image.fromarray(np.full((48, 64, 3), 120, np.uint8)).save(buf, "JPEG")
    store.put(f"runs/{RUN}/img.jpg", buf.getvalue())
    rows = []
    for i in range(n):
        gold = "ABCD"[i % 4]
        rows.append(
            {
                "sample_id": f"s{i}",
                "landmark_id": f"lm{i // 2}",
                "task_type": "self_where",
                "difficulty": "4way",
                "label_options": [
                    {"option_id": x, "label": lab} for x, lab in zip("ABCD", LABELS, strict=True)
                ],
                "answer_option_id": gold,
                "answer_label": LABELS["ABCD".index(gold)],
                "answer_bbox_xyxy_norm": [0.2, 0.2, 0.6, 0.6],
                "images": ["img.jpg", "img.jpg"],
                "system_prompt": "Return JSON.",
                "user_prompt": f"Question {i}? gold {gold}",
            }
        )
    keys = manifest_keys(RUN, SCENE)
    store.put(keys["image_qa"], b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    store.put(keys["video_qa"], b"")
    return rows


def scripted_server(calls: Counter[str]) -> FastAPI:
    """Answers the gold it finds in the prompt; the first call per question gets a 429, and
    question 5 always fails with a 500."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        text = next(
            p["text"]
            for m in body["messages"]
            if m["role"] == "user"
            for p in m["content"]
            if p["type"] == "text"
        )
        calls[text] += 1
        if "Question 5" in text:
            return JSONResponse({"error": "boom"}, status_code=500)
        if calls[text] == 1:
            return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "0"})
        gold = text.rsplit("gold ", 1)[1][0]
        answer = json.dumps({"answer_option_id": gold, "bbox_xyxy_norm": [0.2, 0.2, 0.6, 0.6]})
        return JSONResponse(
            {
                "choices": [{"message": {"content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 9},
            }
        )

    return app


async def test_http_model_with_429s_failures_budget_and_resume(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    write_manifest(store)
    calls: Counter[str] = Counter()
    with ServedApp(scripted_server(calls)) as served:
        ep = ModelEndpoint(kind="openai", url=served.url + "/v1", model="scripted", max_attempts=3)
        # a budget of 3 requests stops the run: the rest is NOT_RUN, never scored as wrong answers
        first = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache", concurrency=2, budget=3)
        stats = first.stats["scripted"]
        assert (stats.asked, stats.not_run) == (3, 3)
        model = next(e for e in first.leaderboard["models"] if e["model"] == "scripted")
        assert model["parse"].get("not_run") == 3
        asked_before = sum(calls.values())
        # resume: finished items come from the cache, the rest are asked, the failure is retried later too
        second = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache", concurrency=2)
        s2 = second.stats["scripted"]
        assert s2.cached == 3 - first.stats["scripted"].failed and s2.not_run == 0
        third = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache", concurrency=2)
    s3 = third.stats["scripted"]
    assert s3.cached == 5 and s3.failed == 1  # failures are never cached
    assert calls["Question 0? gold A"] == 2  # one 429, one answer, then only the cache
    assert sum(calls.values()) > asked_before
    model = next(e for e in third.leaderboard["models"] if e["model"] == "scripted")
    assert model["parse"] == {"choice": 5, "request_failed": 1}
    assert model["image"]["option_correct"] == pytest.approx(
        5 / 6, abs=1e-3
    )  # the failure stays in the denominator
    items = [json.loads(x) for x in store.get(third.outputs["eval_items"]).splitlines()]
    failed = next(i for i in items if i["model"] == "scripted" and i["sample_id"] == "s5")
    assert failed["parse_kind"] == "request_failed" and failed["error_class"] == "ERROR_CLASS_SERVER"
    csv_text = store.get(third.outputs["eval_image_metrics"]).decode()
    assert (
        csv_text.splitlines()[0]
        == "model,view_definition,task_type,difficulty,count,option_accuracy,bbox_acc@50iou,bbox_mean_iou"
    )


class Oracle:
    name = "oracle"

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse:
        gold = request.prompt.rsplit("gold ", 1)[1][0]
        assert len(request.images) == 2
        return model_pb2.GenerateResponse(text=f"The answer is {gold}.", latency_s=0.001)


async def test_grpc_model_and_baselines_rank_as_expected(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    write_manifest(store, 8)
    server, port = await serve_grpc(Oracle())
    try:
        ep = ModelEndpoint(kind="grpc", url=f"127.0.0.1:{port}", model="oracle")
        result = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache")
    finally:
        await server.stop(None)
    board = {e["model"]: e for e in result.leaderboard["models"]}
    assert set(board) == {"oracle", "random", "text_prior"}
    assert board["oracle"]["image"]["option_correct"] == 1.0
    assert board["oracle"]["image"]["option_correct_strict"] == 0.0  # prose, not the JSON contract
    assert board["oracle"]["parse_stages"] == {"answer_cue": 8}
    assert board["random"]["image"]["option_correct"] < 1.0
    assert b"<table>" in store.get(result.outputs["eval_report"])
