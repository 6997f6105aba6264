"""The evaluator against real local model servers: OpenAI-compatible HTTP (429s, failures,
timeouts, budget stop, resume, a killed run resumed) and gRPC (conditions, CircularEval,
process-level steps), plus the classical-CV baseline on images with a known answer."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from PIL import Image
from rows import image_row, video_row
from skyqa.blob import LocalBlobStore
from skyqa.bus import Bus, topology
from skyqa.families import release_files
from skyqa.models import serve_grpc
from skyqa.servers import ServedApp
from skyqa.settings import ModelEndpoint, Settings
from skyqa.v1 import common_pb2, eval_pb2, model_pb2
from stage_helpers import Probe

from services.embedded import wait_for_run
from services.evaluator import app as evaluator_app
from services.evaluator.blind import blind_filter
from services.evaluator.evaluate import evaluate

pytestmark = pytest.mark.integration

RUN, SCENE = "evalrun", "tiny_town"
LABELS = ["Front", "Left", "Right", "Back"]
# where the landmark sits in each row's second image, and the env_where answer that implies
PLACES = {"Left": [0.05, 0.3, 0.25, 0.7], "Right": [0.75, 0.3, 0.95, 0.7], "Front": [0.4, 0.3, 0.6, 0.7]}
REF_BOX = [0.4, 0.3, 0.6, 0.7]


def _scene(box: list[float], w: int = 320, h: int = 240) -> bytes:
    """Grass and sky with an orange block (the landmark) and a grey block (a distractor)."""
    img = np.zeros((h, w, 3), np.uint8)
    img[: h // 3] = (170, 200, 230)
    img[h // 3 :] = (70, 120, 60)
    x0, y0, x1, y1 = (round(v * s) for v, s in zip(box, (w, h, w, h), strict=True))
    img[y0:y1, x0:x1] = (220, 120, 30)
    img[y0 + 10 : y1 - 10, x0 + 5 : x0 + 12] = (120, 60, 20)  # a door, some structure
    gx = (x0 + w // 2) % (w - 40)
    img[150:200, gx : gx + 30] = (128, 128, 128)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=92)
    return buf.getvalue()


def write_manifest(store: LocalBlobStore, n: int = 6, run: str = RUN) -> list[dict[str, Any]]:
    """n env_where rows over n // 2 landmarks, with images, the render sidecar and steps."""
    store.put(f"runs/{run}/ref.jpg", _scene(REF_BOX))
    rows, env = [], []
    for i in range(n):
        gold_label = list(PLACES)[i % 3]
        store.put(f"runs/{run}/env{i}.jpg", _scene(PLACES[gold_label]))
        opts = [{"option_id": x, "label": lab} for x, lab in zip("ABCD", LABELS, strict=True)]
        gold = next(o["option_id"] for o in opts if o["label"] == gold_label)
        head = f"Question {i}: where is the landmark? (target {gold_label})"
        row = image_row(
            sample_id=f"s{i}",
            landmark_id=f"lm{i // 2}",
            task_type="env_where",
            difficulty="4way",
            label_options=opts,
            answer_option_id=gold,
            answer_label=gold_label,
            answer_bbox_xyxy_norm=PLACES[gold_label],
            images=["ref.jpg", f"env{i}.jpg"],
            target_image=f"env{i}.jpg",
            reference_image="ref.jpg",
            reference_image_with_bbox="ref.jpg",
            reference_bbox_xyxy_norm=REF_BOX,
            metadata={"env_request_id": f"env{i}"},
            reasoning_steps=[
                {
                    "question": "Where is the landmark in image 2?",
                    "answer": str(PLACES[gold_label]),
                    "operation": "GND",
                },
                {"question": "Where is the landmark?", "answer": gold_label, "operation": "INF"},
            ],
            system_prompt="[TASK] Answer.\n[OUTPUT] Return JSON.",
            user_prompt=head + "\nOptions:\n" + "\n".join(f"{o['option_id']}. {o['label']}" for o in opts),
        )
        rows.append(row.model_dump(mode="json"))
        env.append({"request_id": f"env{i}", "fov_deg": 90.0})
    keys = release_files(run, SCENE)
    store.put(keys["image_qa"], b"".join(json.dumps(r).encode() + b"\n" for r in rows))
    store.put(keys["video_qa"], b"")
    store.put(
        f"runs/{run}/image_tasks/render_requests/{SCENE}.render_requests.json",
        json.dumps({"env_requests": env, "overlays": []}).encode(),
    )
    return rows


def _first_group(pattern: str, text: str, flags: int = 0) -> str:
    found = re.search(pattern, text, flags)
    assert found is not None, (pattern, text)
    return found.group(1)


def _gold_letter(prompt: str) -> str:
    """The letter the options block gives the label named in the question (any rotation)."""
    label = _first_group(r"\(target (\w+)\)", prompt)
    return _first_group(rf"^([A-D])\. {label}$", prompt, re.M)


def _answer(prompt: str) -> str:
    label = _first_group(r"\(target (\w+)\)", prompt)
    return json.dumps({"answer_option_id": _gold_letter(prompt), "bbox_xyxy_norm": PLACES[label]})


def _text(body: dict[str, Any]) -> str:
    text: str = next(
        p["text"]
        for m in body["messages"]
        if m["role"] == "user"
        for p in m["content"]
        if p["type"] == "text"
    )
    return text


def _completion(content: str) -> JSONResponse:
    return JSONResponse(
        {
            "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9},
        }
    )


def scripted_server(calls: Counter[str], delay_s: float = 0.0) -> FastAPI:
    """Answers right; the first call per question gets a 429, question 5 always fails with a
    500, and question 4 is slower than the client's timeout when ``delay_s`` is set."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        text = _text(await request.json())
        calls[text.split(":")[0]] += 1
        if text.startswith("Question 5"):
            return JSONResponse({"error": "boom"}, status_code=500)
        if text.startswith("Question 4") and delay_s:
            await asyncio.sleep(delay_s)
        if calls[text.split(":")[0]] == 1:
            return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "0"})
        return _completion(_answer(text))

    return app


async def test_http_model_with_429s_failures_timeouts_budget_and_resume(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    write_manifest(store)
    calls: Counter[str] = Counter()
    with ServedApp(scripted_server(calls, delay_s=2.0)) as served:
        ep = ModelEndpoint(
            kind="openai", url=served.url + "/v1", model="scripted", max_attempts=3, timeout_s=0.5
        )
        # a budget of 3 requests stops the run: the rest is NOT_RUN, never scored as wrong answers
        first = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache", concurrency=2, budget=3)
        stats = first.stats["scripted"]
        assert (stats.asked, stats.not_run) == (3, 3)
        model = next(e for e in first.leaderboard["models"] if e["model"] == "scripted")
        assert model["parse"].get("not_run") == 3
        asked_before = sum(calls.values())
        # resume: finished items come from the cache, the rest are asked, failures are retried later too
        second = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache", concurrency=2)
        assert second.stats["scripted"].cached == 3 - first.stats["scripted"].failed
        third = await evaluate(store, RUN, SCENE, [ep], tmp_path / "cache", concurrency=2)
    s3 = third.stats["scripted"]
    assert s3.cached == 4 and s3.failed == 2  # failures (the 500 and the timeout) are never cached
    assert calls["Question 0"] == 2  # one 429, one answer, then only the cache
    assert calls["Question 4"] == 2 * 3  # runs 2 and 3 (run 1's budget ended first): 3 timeouts each
    assert sum(calls.values()) > asked_before
    model = next(e for e in third.leaderboard["models"] if e["model"] == "scripted")
    assert model["parse"] == {"choice": 4, "request_failed": 2}
    assert model["image"]["option_correct"] == pytest.approx(
        4 / 6, abs=1e-3
    )  # failures stay in the denominator
    items = [json.loads(x) for x in store.get(third.outputs["eval_items"]).splitlines()]
    by_id = {i["sample_id"]: i for i in items if i["model"] == "scripted"}
    assert by_id["s5"]["error_class"] == "ERROR_CLASS_SERVER"
    assert by_id["s4"]["error_class"] == "ERROR_CLASS_TIMEOUT"
    csv_text = store.get(third.outputs["eval_image_metrics"]).decode()
    assert csv_text.splitlines()[0] == (
        "model,view_definition,task_type,difficulty,count,option_accuracy,bbox_acc@50iou,bbox_mean_iou"
    )


def slow_server(calls: Counter[str]) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        text = _text(await request.json())
        calls[text.split(":")[0]] += 1
        await asyncio.sleep(0.4)
        return _completion(_answer(text))

    return app


async def test_a_killed_eval_resumes_without_asking_finished_items_again(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    write_manifest(store, 12)
    calls: Counter[str] = Counter()
    cache = tmp_path / "cache"
    env = {**os.environ, "SKYQA_EVALUATION__CACHE_DIR": str(cache), "SKYQA_EVALUATION__CONCURRENCY": "1"}
    with ServedApp(slow_server(calls)) as served:
        cmd = [
            sys.executable,
            "-m",
            "services.cli",
            "eval",
            RUN,
            "--scene",
            SCENE,
            "--data-dir",
            str(tmp_path),
        ]
        cmd += ["--model", f"{served.url}/v1#slow", "--conditions", "full"]
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        cache_file = cache / "slow.jsonl"
        deadline = time.monotonic() + 60
        while not (cache_file.exists() and len(cache_file.read_text().splitlines()) >= 3):
            assert time.monotonic() < deadline and proc.returncode is None, "the eval ended before the kill"
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 10)
        answered = {json.loads(line)["key"] for line in cache_file.read_text().splitlines()}
        assert 3 <= len(answered) < 12  # killed mid-run
        before = Counter(calls)
        again = await asyncio.create_subprocess_exec(
            *cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        _, stderr = await asyncio.wait_for(again.communicate(), 120)
    assert again.returncode == 0, stderr.decode()
    asked_again = calls - before
    # the resumed run asks exactly what the cache lacks (the one in flight at the kill included)
    assert sum(asked_again.values()) == 12 - len(answered)
    assert sum(calls.values()) <= 13
    board = json.loads(store.get(f"runs/{RUN}/eval/leaderboard.json"))
    slow = next(e for e in board["models"] if e["model"] == "slow")
    assert slow["parse"] == {"choice": 12} and slow["image"]["option_correct"] == 1.0


class Oracle:
    """Knows the answer key; records what each condition sent. ``wrong_box`` breaks its GND step."""

    name = "oracle"

    def __init__(self, rows: list[dict[str, Any]], wrong_box: bool = False) -> None:
        self.steps = {r["sample_id"]: [s["answer"] for s in r["reasoning_steps"]] for r in rows}
        self.wrong_box = wrong_box
        self.seen: list[tuple[str, list[tuple[str, tuple[int, int]]]]] = []

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse:
        sizes = [(im.label, Image.open(io.BytesIO(im.data)).size) for im in request.images]
        self.seen.append((request.request_id, sizes))
        base = request.request_id.split("#")[0]
        asked = re.search(r"Now answer only step S(\d+):", request.prompt)
        if asked:  # one step of a sequential rollout (S4, S5)
            i = int(asked.group(1)) - 1
            answer = "[0.0, 0.0, 0.01, 0.01]" if self.wrong_box and i == 0 else self.steps[base][i]
            return model_pb2.GenerateResponse(text=json.dumps({"answer": answer}))
        # after S3's solved examples, the question asked is the last one
        body = json.loads(_answer(request.prompt.split("Now the question.")[-1]))
        if "steps" in request.system:
            steps = list(self.steps[base])
            if self.wrong_box:
                steps[0] = "[0.0, 0.0, 0.01, 0.01]"
            body["steps"] = steps
        return model_pb2.GenerateResponse(
            text=f"The answer is {body['answer_option_id']}. {json.dumps(body)}"
        )


async def test_conditions_circular_eval_and_process_steps_over_grpc(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    rows = write_manifest(store, 6)
    oracle, sloppy = Oracle(rows), Oracle(rows, wrong_box=True)
    servers = [await serve_grpc(m) for m in (oracle, sloppy)]
    conditions = ["full", "text_only", "thumbnail", "crop", "full_crop", "circular", "schema_cot"]
    conditions += ["fewshot_cot", "pred_step", "gt_prefix"]
    try:
        eps = [
            ModelEndpoint(kind="grpc", url=f"127.0.0.1:{port}", model=name)
            for (_, port), name in zip(servers, ("oracle", "sloppy"), strict=True)
        ]
        result = await evaluate(store, RUN, SCENE, eps, tmp_path / "cache", conditions=conditions)
    finally:
        for server, _ in servers:
            await server.stop(None)
    sent: dict[int, list[tuple[str, tuple[int, int]]]] = {}
    for _, sizes in oracle.seen:
        sent.setdefault(len(sizes), sizes)
    # text_only: nothing; full / thumbnail: 2 images; crop: 2 x 4 quadrants; full_crop: 2 + 8
    assert set(sent) == {0, 2, 8, 10}
    assert max(w for _, (w, h) in [s for s in sent[2] if "thumbnail" in s[0]] or [("", (0, 0))]) <= 160
    assert all("quadrant" in label and size == (160, 120) for label, size in sent[8])
    board = {e["model"]: e for e in result.leaderboard["models"]}
    assert set(board) == {"oracle", "sloppy", "random", "text_prior", "cv_grounding"}
    o = board["oracle"]
    assert o["image"]["option_correct"] == 1.0 and o["image"]["option_correct_strict"] == 0.0
    assert o["parse_stages"] == {"embedded_json": 6}
    # each family's tasks by its own metrics: only the image family has rows here
    assert list(o["per_family"]) == ["dualcog_image"]
    assert o["per_family"]["dualcog_image"]["env_where"]["option_correct"] == 1.0
    assert set(o["evidence_access"]) == {"text_only", "thumbnail", "full", "crop", "full_crop"}
    assert o["access_gaps"]["visual"] == 0.0  # the oracle reads the answer from the text
    # CircularEval: an oracle that tracks content is right in every rotation; chance is not
    assert o["circular"]["circular"] == 1.0 and o["circular"]["consistent"] == 1.0
    assert o["circular"]["groups"] == 6
    assert set(o["circular"]["letter_share"]) == set("ABCD")  # rotations move the gold letter
    r = board["random"]
    assert r["circular"]["circular"] <= r["circular"]["vanilla"]
    # process level: all steps right for the oracle; the sloppy one fails grounding first
    assert o["process"]["operation_accuracy"] == {"GND": 1.0, "INF": 1.0}
    assert o["process"]["first_error"] == {"none": 1.0}
    s = board["sloppy"]["process"]
    assert s["operation_accuracy"] == {"GND": 0.0, "INF": 1.0} and s["first_error"] == {"GND": 1.0}
    # S3-S5 over gRPC: per step and per operation, the sloppy model's grounding fails in each
    for name in ("S3 few-shot GT-CoT", "S4 pred-step", "S5 GT-prefix"):
        good, bad = o["step_protocols"][name], board["sloppy"]["step_protocols"][name]
        assert good["items"] == 6 and good["operation_error"] == {"GND": 0.0, "INF": 0.0}
        assert bad["operation_error"] == {"GND": 1.0, "INF": 0.0} and bad["first_error"] == {"GND": 1.0}
        assert good["final"]["option_correct"] == 1.0
    assert b"Per-operation errors" in store.get(result.outputs["eval_report"])
    # classical CV finds the orange block and turns its position into the direction
    cv = board["cv_grounding"]
    assert cv["image"]["bbox_acc@50iou"] >= 5 / 6 and cv["image"]["option_correct"] >= 5 / 6
    assert cv["image"]["option_correct"] > board["text_prior"]["image"]["option_correct"]
    page = store.get(result.outputs["eval_report"])
    assert b"<svg" in page and b"CircularEval" in page and b"task correlation" in page


def leaky_server() -> FastAPI:
    """A text-only 'model' that sees the label in questions 0-2 and otherwise guesses A."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        assert all(p["type"] == "text" for m in body["messages"] if m["role"] == "user" for p in m["content"])
        text = _text(body)
        n = int(text.split(":")[0].split()[1])
        letter = _gold_letter(text) if n < 3 else "A"
        return _completion(json.dumps({"answer_option_id": letter}))

    return app


async def test_blind_filter_flags_rows_text_only_models_solve(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "store")
    rows = write_manifest(store, 6)
    original = store.get(release_files(RUN, SCENE)["image_qa"])
    with ServedApp(leaky_server()) as a, ServedApp(leaky_server()) as b:
        eps = [
            ModelEndpoint(kind="openai", url=s.url + "/v1", model=name)
            for s, name in ((a, "leaky1"), (b, "leaky2"))
        ]
        result = await blind_filter(
            store, RUN, SCENE, eps, tmp_path / "cache", samples=2, quorum=0.6, apply=True
        )
    # questions 0-2 are solved by both text-only models (2 of 3 responders >= 0.6); question 3+
    # only where "A" happens to be the gold
    lucky = {r["sample_id"] for r in rows[3:] if r["answer_option_id"] == "A"}
    assert set(result.flagged) == {"s0", "s1", "s2"} | lucky
    report = json.loads(store.get(result.report_key))
    assert report["responders"] == ["text_prior", "leaky1", "leaky2"] and report["samples_per_model"] == 2
    assert store.get(release_files(RUN, SCENE)["image_qa"]) == original  # nothing stored is changed
    kept = [json.loads(x)["sample_id"] for x in store.get(result.filtered_key or "").splitlines()]
    assert kept == [r["sample_id"] for r in rows if r["sample_id"] not in set(result.flagged)]


async def test_a_baseline_answers_from_the_release_it_sees_not_from_an_earlier_runs_cache(
    tmp_path: Path,
) -> None:
    """The text prior's answer to a row depends on the other rows' golds, which its cache key
    (prompt, media, params) does not cover: a cached answer from an earlier release is stale."""
    store = LocalBlobStore(tmp_path / "store")
    rows = write_manifest(store, 6)
    await evaluate(store, RUN, SCENE, [], tmp_path / "cache")
    # every other landmark's rows now answer "Right": s0's prompt and images are unchanged, its
    # prior is not
    for r in rows[2:]:
        r["answer_label"], r["answer_option_id"] = "Right", "C"
    manifest = release_files(RUN, SCENE)["image_qa"]
    store.put(manifest, b"".join(json.dumps(r).encode() + b"\n" for r in rows))

    async def answers(cache: str) -> dict[str, str]:
        result = await evaluate(store, RUN, SCENE, [], tmp_path / cache)
        items = [json.loads(x) for x in store.get(result.outputs["eval_items"]).splitlines()]
        return {i["sample_id"]: i["pred_option"] for i in items if i["model"] == "text_prior"}

    again = await answers("cache")
    assert again["s0"] == "C" and again == await answers("fresh-cache")
    assert not list((tmp_path / "cache").glob("*.jsonl"))  # nothing of a baseline's is kept


async def test_evaluation_requests_on_the_bus_and_bad_ones_as_error_events(
    settings: Settings, bus: Bus, tmp_path: Path, unique: str
) -> None:
    store = LocalBlobStore(tmp_path / "store")
    run = f"evalreq-{unique}"
    write_manifest(store, 4, run)
    settings.evaluation.cache_dir = tmp_path / "cache"
    svc = evaluator_app.create(settings, store)
    await svc.start(http=False)
    try:
        errors = await Probe(bus).collect(topology.error_subject("eval"), common_pb2.ErrorEvent)
        good = eval_pb2.EvaluationRequest(run_id=run, scene_id=SCENE)
        good.spec.conditions.extend(["full", "circular"])
        await bus.publish(topology.EVAL_REQUESTED, good, msg_id=f"ok-{unique}", run_id=run)
        state = await wait_for_run(settings.bus.nats_url, run, "eval", 120)
        assert state.stages["eval"].status == "completed", state.errors
        board = json.loads(store.get(state.outputs["leaderboard"]))
        assert all("circular" in e for e in board["models"])
        bad = eval_pb2.EvaluationRequest(run_id=f"bad-{unique}", scene_id=SCENE)
        bad.spec.conditions.append("x-ray")
        await bus.publish(topology.EVAL_REQUESTED, bad, msg_id=f"bad-{unique}", run_id=f"bad-{unique}")
        err = await Probe.first(errors, lambda e: "x-ray" in e.message)
        assert "unknown evaluation conditions" in err.message
        missing = eval_pb2.EvaluationRequest(run_id=f"none-{unique}", scene_id=SCENE)
        await bus.publish(topology.EVAL_REQUESTED, missing, msg_id=f"none-{unique}", run_id=f"none-{unique}")
        err = await Probe.first(errors, lambda e: e.run_id == f"none-{unique}")
        assert "no QA manifests" in err.message
        # the good run's outputs are untouched by the bad requests
        assert json.loads(store.get(state.outputs["leaderboard"])) == board
    finally:
        await svc.stop()


def recording_server(auth_seen: list[str]) -> FastAPI:
    """Answers every question right and records the Authorization header it was sent."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        auth_seen.append(request.headers.get("authorization", ""))
        return _completion(_answer(_text(await request.json())))

    return app


async def test_evaluation_requests_reach_only_allowed_endpoints_with_the_operators_key(
    settings: Settings, bus: Bus, tmp_path: Path, unique: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15.1, at the evaluator: a request naming an endpoint off the allow-list is
    refused before any byte is sent; an allowed one gets the key variable of its entry."""
    monkeypatch.setenv("SKYQA_TEST_SECRET", "do-not-send-me")
    monkeypatch.setenv("OPERATOR_KEY", "operator-key")
    store = LocalBlobStore(tmp_path / "store")
    run = f"allow-{unique}"
    write_manifest(store, 3, run)
    settings.evaluation.cache_dir = tmp_path / "cache"
    seen: list[str] = []
    with ServedApp(recording_server(seen)) as served:
        svc = evaluator_app.create(settings, store)
        await svc.start(http=False)
        try:
            errors = await Probe(bus).collect(topology.error_subject("eval"), common_pb2.ErrorEvent)
            denied = eval_pb2.EvaluationRequest(run_id=run, scene_id=SCENE)
            denied.spec.models.add(kind="openai", url=f"{served.url}/v1", model="m")
            denied.spec.conditions.append("full")
            await bus.publish(topology.EVAL_REQUESTED, denied, msg_id=f"denied-{unique}", run_id=run)
            err = await Probe.first(errors, lambda e: e.run_id == run)
            assert "not on the operator's allow-list" in err.message and seen == []
            svc.settings.evaluation.allowed_endpoints = [
                ModelEndpoint(kind="openai", url=f"{served.url}/v1", api_key_env="OPERATOR_KEY")
            ]
            ok = eval_pb2.EvaluationRequest(run_id=run, scene_id=SCENE)
            ok.spec.CopyFrom(denied.spec)
            await bus.publish(topology.EVAL_REQUESTED, ok, msg_id=f"ok-{unique}", run_id=run)
            for _ in range(600):
                if len(seen) >= 3:
                    break
                await asyncio.sleep(0.1)
            assert seen and set(seen) == {"Bearer operator-key"}, seen
        finally:
            await svc.stop()


def judge_server(prompts: list[str]) -> FastAPI:
    """An LLM judge: "higher" means "above"; a candidate saying "garbled" gets a reply that is
    not the verdict's JSON."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        text = _text(await request.json())
        prompts.append(text)
        candidate = text.split("Candidate answer: ")[1]
        if "garbled" in candidate:
            return _completion("I think so")
        same = "above" in text.split("Reference answer: ")[1] and "higher" in candidate
        return _completion(json.dumps({"equivalent": same}))

    return app


async def test_the_llm_judge_re_marks_only_free_form_steps(tmp_path: Path) -> None:
    from skyqa.contracts.qa import ReasoningStep
    from skyqa.models import OpenAICompatModel

    from services.evaluator.judge import Judge, judge_item
    from services.evaluator.runner import Cache

    gold = [
        ReasoningStep(question="Boxes of the cars?", answer="[[0.1, 0.1, 0.2, 0.2]]", operation="GND"),
        ReasoningStep(question="How many?", answer="1", operation="QUA"),
        ReasoningStep(question="How do they relate?", answer="It is above it", operation="INT"),
        ReasoningStep(question="Which option?", answer="It is above it", operation="INF"),
    ]
    prompts: list[str] = []
    with ServedApp(judge_server(prompts)) as served:
        judge = Judge(
            "judge", OpenAICompatModel(served.url + "/v1", "judge"), Cache(tmp_path / "judge.jsonl")
        )
        item = {
            "pred_steps": ["[]", "2", "it is higher than the other one", "garbled"],
            "step_ops": ["GND", "QUA", "INT", "INF"],
            "step_correct": [0, 0, 0, 0],
        }
        await judge_item(item, gold, judge)
        # the box list and the count are the rules' to decide; the judge sees the two free-form ones
        assert len(prompts) == 2 and all("Reference answer: It is above it" in p for p in prompts)
        assert item["step_correct"] == [0, 0, 1, 0] and item["step_judged"] == [0, 0, 1, 0]
        assert item["step_accuracy"] == 0.25 and item["first_error"] == "GND"
        # judgements are cached: a second pass asks nothing
        again = {**item, "step_correct": [0, 0, 0, 0]}
        await judge_item(again, gold, Judge("judge", judge.model, Cache(tmp_path / "judge.jsonl")))
        # (an unreadable reply is kept too, like a model's: asking again at temperature 0 repeats it)
        assert len(prompts) == 2 and again["step_correct"] == [0, 0, 1, 0]


class EvalOutage(LocalBlobStore):
    """A store whose writes under ``eval/`` always fail: an evaluation that can never finish."""

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> Any:
        if "/eval/" in key:
            raise OSError(f"store unavailable writing {key}")
        return super().put(key, data, content_type)


async def _stage_settles(bus: Bus, run: str, stage: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """The run state once ``stage`` has completed or failed."""
    runs = await bus.kv(topology.RUNS_BUCKET)
    deadline = time.monotonic() + timeout_s
    doc: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        doc, _ = await runs.get(run)
        if doc and doc.get("stages", {}).get(stage, {}).get("status") in ("completed", "failed"):
            return doc
        await asyncio.sleep(0.1)
    raise AssertionError(f"stage {stage} of {run} never ended: {doc}")


async def test_a_dead_lettered_evaluation_request_fails_its_own_stage_with_the_reason(
    settings: Settings, bus: Bus, tmp_path: Path, unique: str
) -> None:
    """Issue 41.4b: the gateway tells the client to watch ``eval-<request>``; a request that is
    dead-lettered, after its retries or at once, must end that stage failed with the reason."""
    store = EvalOutage(tmp_path / "store")
    run, empty = f"deadeval-{unique}", f"noqa-{unique}"
    write_manifest(store, 2, run)
    settings.evaluation.cache_dir = tmp_path / "cache"
    svc = evaluator_app.create(settings, store)
    await svc.start(http=False)
    try:
        progress, _ = svc.require()
        # a released run whose evaluation completed: what an evaluation request is usually for
        await progress.open(run, SCENE)
        await progress.report(run, "eval", 1, 1, common_pb2.RUN_STATUS_COMPLETED, "evaluated")
        await progress.open(empty, SCENE)
        again = eval_pb2.EvaluationRequest(run_id=run, scene_id=SCENE, request_id="again")
        again.spec.conditions.append("full")
        await bus.publish(topology.EVAL_REQUESTED, again, msg_id=f"again-{unique}", run_id=run)
        # no QA to evaluate: refused before the handler reports any progress
        refused = eval_pb2.EvaluationRequest(run_id=empty, scene_id=SCENE, request_id="early")
        await bus.publish(topology.EVAL_REQUESTED, refused, msg_id=f"early-{unique}", run_id=empty)

        state = await _stage_settles(bus, run, "eval-again")
        stage = state["stages"]["eval-again"]
        assert stage["status"] == "failed"
        assert stage["message"].startswith("max_deliver_exceeded: OSError: store unavailable")
        # the release and its first evaluation stay valid
        assert state["status"] == "completed" and state["stages"]["eval"]["status"] == "completed"
        assert state["errors"] == []  # the request's failure is its stage's, not the run's

        state = await _stage_settles(bus, empty, "eval-early")
        # a request's stage fails on its own: the run it was asked about goes on as it was
        assert state["stages"]["eval-early"]["status"] == "failed" and state["status"] != "failed"
        assert "no QA manifests" in state["stages"]["eval-early"]["message"]
        assert "eval" not in state["stages"]  # the run's own evaluation was not this request's
    finally:
        await svc.stop()


async def test_a_budget_of_one_circular_request_completes_over_the_bus(
    settings: Settings, bus: Bus, tmp_path: Path, unique: str
) -> None:
    """Issue 41.4a: budget 1 cut every group but one rotation short; it used to raise KeyError
    in the circular summary on every delivery until the request was dead-lettered."""
    store = LocalBlobStore(tmp_path / "store")
    run = f"budget-{unique}"
    write_manifest(store, 2, run)
    settings.evaluation.cache_dir = tmp_path / "cache"
    seen: list[str] = []
    with ServedApp(recording_server(seen)) as served:
        settings.evaluation.allowed_endpoints = [ModelEndpoint(kind="openai", url=f"{served.url}/v1")]
        svc = evaluator_app.create(settings, store)
        await svc.start(http=False)
        try:
            await svc.require()[0].open(run, SCENE)
            asked = eval_pb2.EvaluationRequest(run_id=run, scene_id=SCENE, request_id="one")
            asked.spec.models.add(kind="openai", url=f"{served.url}/v1", model="m")
            asked.spec.conditions.append("circular")
            asked.spec.budget = 1
            await bus.publish(topology.EVAL_REQUESTED, asked, msg_id=f"one-{unique}", run_id=run)
            state = await _stage_settles(bus, run, "eval-one")
        finally:
            await svc.stop()
    assert state["stages"]["eval-one"]["status"] == "completed", state["errors"]
    assert len(seen) == 1  # the budget held
    board = json.loads(store.get(state["outputs"]["leaderboard"]))
    m = next(e for e in board["models"] if e["model"] == "m")
    # the one request answered a full-condition row; no rotation group is complete
    assert m["circular"]["groups"] == 0 and m["circular"]["incomplete_groups"] == 2
    assert "vanilla" not in m["circular"] and m["image"]["not_run"] == 1
    assert "rows not run (budget 1)" in state["stages"]["eval-one"]["message"]


@pytest.mark.parametrize("budget", [1, 5, 10, 16])
async def test_a_budget_cut_evaluation_summarizes_only_what_ran_and_says_so(
    tmp_path: Path, budget: int
) -> None:
    """Issue 41.4a: default conditions (full, text_only, circular, schema_cot) under a budget
    that stops each responder part way (1: one full row; 5: five of six; 10: all six, then four
    text-only rows; 16: all full and text-only rows, then one rotation group) write every
    report, and no summary scores a row that was not run or compares different rows."""
    store = LocalBlobStore(tmp_path / "store")
    rows = write_manifest(store, 6)
    server, port = await serve_grpc(Oracle(rows))
    try:
        ep = ModelEndpoint(kind="grpc", url=f"127.0.0.1:{port}", model="oracle")
        result = await evaluate(
            store,
            RUN,
            SCENE,
            [ep],
            tmp_path / "cache",
            budget=budget,
            conditions=Settings().evaluation.conditions,
        )
    finally:
        await server.stop(None)
    board = {e["model"]: e for e in result.leaderboard["models"]}
    oracle = board["oracle"]
    full_run = min(budget, 6)
    assert oracle["parse"] == {"choice": full_run, **({"not_run": 6 - full_run} if full_run < 6 else {})}
    # the oracle is right on every row it was asked: a cut row is not a wrong answer
    assert oracle["image"]["option_correct"] == 1.0 and oracle["image"].get("not_run", 0) == 6 - full_run
    for e in board.values():
        c = e["circular"]
        assert c["groups"] + c["incomplete_groups"] == 6
        assert ("note" in c) == (c["incomplete_groups"] > 0)
        assert ("vanilla" in c) == (c["groups"] > 0)
        assert sum(c["letter_share"].values()) == pytest.approx(1.0, abs=1e-3) or not c["letter_share"]
    assert oracle["circular"]["groups"] == (1 if budget == 16 else 0)
    if budget == 16:
        assert oracle["circular"]["circular"] == 1.0 and set(oracle["circular"]["letter_share"]) == set(
            "ABCD"
        )
    # text_only got what full left over: the gap is over the rows both scored, or not at all
    assert oracle["access_gap_rows"] == min(6, max(0, budget - 6))
    assert oracle["access_gaps"] == ({"visual": 0.0} if budget > 6 else {})
    prior = board["text_prior"]["image"]
    assert ("visual_gap_over_text_prior" in oracle) == ("option_correct" in prior)
    paired = {(p["a"], p["b"]): p for p in result.leaderboard["paired"]}
    assert paired[("oracle", "random")]["rows"] == full_run
    page = store.get(result.outputs["eval_report"]).decode()
    assert "incomplete groups (left out)" in page
    assert store.get(result.outputs["eval_image_metrics"]).startswith(b"model,")


def sizes_server(seen: list[tuple[str, str, list[tuple[int, int]], list[str]]]) -> FastAPI:
    """Answers right and records, per request, the model asked, the prompt and the size and
    type of every image it was sent."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        text = _text(body)
        uris = [
            p["image_url"]["url"]
            for m in body["messages"]
            if m["role"] == "user"
            for p in m["content"]
            if p["type"] == "image_url"
        ]
        sizes = [Image.open(io.BytesIO(base64.b64decode(u.split(",", 1)[1]))).size for u in uris]
        seen.append((body["model"], text, sizes, [u[5:].split(";")[0] for u in uris]))
        if "(target" in text:
            return _completion(_answer(text))
        return _completion(json.dumps({"visible_count": 1, "visible_intervals_sec": [[0.0, 2.0]]}))

    return app


def _video(frames: int) -> bytes:
    """A 160x120 MP4 at 10 FPS whose frames brighten one step each."""
    from skyqa.video import Mp4Writer, discard

    with Mp4Writer(160, 120, 10.0, 200_000) as writer:
        for i in range(frames):
            writer.write(np.full((120, 160, 3), i * 6, dtype=np.uint8))
    data = Path(writer.path).read_bytes()
    discard(writer.path)
    return data


async def test_media_reach_each_endpoint_as_the_source_sends_them_clipped_by_its_stated_limits(
    tmp_path: Path,
) -> None:
    """Issue 43.3: 4096x3072 stills go native to an endpoint that states no limit and scaled to
    its max_pixels to one that does; a DualCog video row gets the family's sampling (every frame
    of the 10 FPS video) or the endpoint's max_frames; one stating max_request_bytes gets its
    images scaled down to fit; the leaderboard records each policy."""
    store = LocalBlobStore(tmp_path / "store")
    write_manifest(store, 2)
    for key, box in [("ref.jpg", REF_BOX), *((f"env{i}.jpg", list(PLACES.values())[i]) for i in range(2))]:
        store.put(f"runs/{RUN}/{key}", _scene(box, 4096, 3072))
    store.put(f"runs/{RUN}/m1.mp4", _video(41))  # 4 s at 10 FPS
    video = video_row(
        video_path="m1.mp4", reference_image_with_bbox="ref.jpg", frame_count=41, duration_sec=4.0
    )
    store.put(release_files(RUN, SCENE)["video_qa"], (video.model_dump_json() + "\n").encode())
    stored = [store.get(f"runs/{RUN}/{k}") for k in ("ref.jpg", "env0.jpg")]
    tight = sum(4 * -(-len(b) // 3) for b in stored) // 3  # a third of an image row's base64
    seen: list[tuple[str, str, list[tuple[int, int]], list[str]]] = []
    with ServedApp(sizes_server(seen)) as served:
        eps = [
            ModelEndpoint(kind="openai", url=served.url + "/v1", model="native"),
            ModelEndpoint(
                kind="openai", url=served.url + "/v1", model="limited", max_pixels=640 * 480, max_frames=8
            ),
            ModelEndpoint(kind="openai", url=served.url + "/v1", model="tight", max_request_bytes=tight),
        ]
        result = await evaluate(store, RUN, SCENE, eps, tmp_path / "cache")
    got = {(model, "(target" in text): (sizes, mimes) for model, text, sizes, mimes in seen}
    assert len(seen) == 3 * 3  # three endpoints, two image rows and one video row each
    assert got[("native", True)] == ([(4096, 3072)] * 2, ["image/jpeg"] * 2)
    assert got[("limited", True)][0] == [(640, 480)] * 2
    native_video, limited_video = got[("native", False)][0], got[("limited", False)][0]
    assert native_video == [(4096, 3072)] + [(160, 120)] * 41  # the reference image, every frame
    assert limited_video == [(640, 480)] + [(160, 120)] * 8
    policy = result.leaderboard["media_policy"]
    assert set(policy) == {"native", "limited", "tight"}  # only models: baselines see no media
    assert policy["native"]["dualcog_image"]["max_pixels"] == 0
    assert policy["limited"]["dualcog_image"]["max_pixels"] == 640 * 480
    assert policy["native"]["dualcog_video"]["frames"] == {"count": 0, "fps": 10.0, "cap": 256}
    assert policy["limited"]["dualcog_video"]["frames"] == {"count": 0, "fps": 10.0, "cap": 8}
    assert policy["native"]["urbanvideo_nav"]["frames"]["count"] == 32
    assert policy["native"]["ultravr"]["source"].startswith("UltraVR")
    items = [json.loads(x) for x in store.get(result.outputs["eval_items"]).splitlines()]
    sent = {(i["model"], i["sample_id"]): i["media_sent"] for i in items if "media_sent" in i}
    assert sent[("limited", "v1")] == {
        "images": 9,
        "bytes": sent[("limited", "v1")]["bytes"],
        "largest": [640, 480],
    }
    assert sent[("native", "s0")]["largest"] == [4096, 3072]
    for sid in ("s0", "s1"):  # each request scaled on its own until its base64 fits
        small = sent[("tight", sid)]
        assert small["bytes"] <= tight and 0 < small["scaled_to_max_pixels"] < 4096 * 3072
        w, h = small["largest"]
        assert w * h <= small["scaled_to_max_pixels"] and abs(w / h - 4 / 3) < 0.01
    assert policy["tight"]["dualcog_image"]["max_request_bytes"] == tight
    board = json.loads(store.get(result.outputs["leaderboard"]))
    assert board["media_policy"] == policy  # the written metadata, not only the returned one
    page = store.get(result.outputs["eval_report"]).decode()
    assert "<h2>Media sent</h2>" in page and "307,200 pixels" in page and "10 per second, at most 8" in page
