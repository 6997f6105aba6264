"""The workbench API of a real gateway (real nats-server, local store): a synthetic release of
ten thousand rows paged and filtered on the server, rows in full through their family, byte
ranges of release files, evaluations started from the page's endpoint, bad input, and the
human answerability audit (who may answer, no gold before an answer, hostile answers refused,
answers stored once per person and row, the QC report, card and checksums rewritten)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from rows import image_row, release_info
from skyqa import audit, integrity, keys
from skyqa.blob import BlobStore, LocalBlobStore
from skyqa.bus import topology
from skyqa.contracts.base import dump_json
from skyqa.contracts.qa import AuditAnswer, BlindGate, Funnel, QCReport, SolverScore, TaskGate
from skyqa.families import DUALCOG_IMAGE, Checked, release_files
from skyqa.runtime import Service, Settings
from skyqa.servers import NatsServer
from skyqa.settings import ModelEndpoint
from skyqa.v1 import eval_pb2
from stage_helpers import Probe

from services.gateway import app as gateway_app, sessions
from services.qa_generator.gate import GateResult
from services.qa_generator.release import REPEATED_FACT, UNIT_INCOMPLETE, WITHHELD, qc_rows

pytestmark = pytest.mark.integration

TOKEN = "wb-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ROWS = 10_000
SCENE = "tiny_town"
TASKS = ("self_where", "env_where", "env_how")
REASONS = (UNIT_INCOMPLETE, REPEATED_FACT, "answer box too small")
SOLVERS = ("letter_prior", "text_model")


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("wb-nats")).start()
    yield server
    server.stop()


def synthetic_release(store: BlobStore, run_id: str, n: int = ROWS, leaks: bool = False) -> dict[str, str]:
    """A release of ``n`` image rows over n/20 landmarks, one in ten dropped for a reason, the
    ledger written by the release's own code (:func:`qc_rows`). ``leaks``: the blind gate
    withheld every task, so no manifest is written and the clean rows are withheld."""
    rows = [
        image_row(
            sample_id=f"syn_{i:05d}",
            landmark_id=f"lm{i // 20:04d}",
            task_type=TASKS[i % 3],
            difficulty="8way" if i % 2 else "4way",
            images=["ref.jpg", f"env_{i // 2:05d}.jpg"],  # rows i, i+1 share a view
            target_image=f"env_{i // 2:05d}.jpg",
        )
        for i in range(n)
    ]
    dropped = {r.sample_id: REASONS[(i // 100) % 3] for i, r in enumerate(rows) if i % 10 == 9}
    items = {r.sample_id: DUALCOG_IMAGE.item(r) for r in rows}
    solvers = {s: list(SOLVERS) if why == REPEATED_FACT else [] for s, why in dropped.items()}
    solvers |= {
        r.sample_id: ["letter_prior"] for i, r in enumerate(rows) if i % 7 == 0 and r.sample_id not in dropped
    }
    score = SolverScore(score=0.25, ci=[0.2, 0.3], chance=0.25, p_value=1.0)
    tasks = {
        t: TaskGate(
            kind="choice", rows=n // 3, best_solver="text_model", solvers=dict.fromkeys(SOLVERS, score)
        )
        for t in TASKS
    }
    withheld = {t: ["text_model scores 0.9"] for t in TASKS} if leaks else {}
    blind = GateResult(tasks, {}, withheld, {}, len(TASKS), solvers)
    shipped = set() if leaks else {r.sample_id for r in rows} - set(dropped)
    why = dropped | {
        r.sample_id: f"{WITHHELD}: task {r.task_type} leaks"
        for r in rows
        if leaks and r.sample_id not in dropped
    }
    ledger = qc_rows([DUALCOG_IMAGE], {DUALCOG_IMAGE.name: Checked(rows)}, items, why, shipped, blind)
    root = keys.run_prefix(run_id)
    out = release_files(run_id, SCENE, [DUALCOG_IMAGE])
    kept = [r for r in rows if r.sample_id in shipped]
    jsonl = b"".join(json.dumps(r.model_dump(mode="json")).encode() + b"\n" for r in kept)
    if not leaks:
        store.put(out[DUALCOG_IMAGE.manifest], jsonl)
    store.put(out["qc_rows"], b"".join(r.model_dump_json().encode() + b"\n" for r in ledger))
    plan = {"rows": {DUALCOG_IMAGE.name: [r.model_dump(mode="json") for r in rows]}}
    store.put(keys.qa_plan(run_id), json.dumps(plan).encode())
    report = QCReport(
        scene_id=SCENE,
        run_id=run_id,
        funnel=Funnel(
            candidates=900,
            collected=600,
            reviewed=n // 20,
            released_landmarks=n // 20,
            image_rows=len(kept),
            video_rows=0,
        ),
        blind_gate=BlindGate(
            mode="enforce",
            passed=not leaks,
            alpha=0.05,
            box_prior_max=0.15,
            failures=[],
            withheld=withheld,
            withheld_rows=n - len(dropped) if leaks else 0,
            tasks=tasks,
        ),
        category_mix={"building": n // 20},
        checked_rows=n,
        dropped_rows=len(dropped),
        drop_reasons=dict(Counter(dropped.values())),
        dropped_landmarks={},
        answer_letter_balance={},
        max_option_similarity=0.1,
        duplicate_questions=0,
    )
    store.put(f"{root}/qc_report.json", dump_json(report))
    return dropped


@pytest.fixture
async def gateway(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings.gateway.token = SecretStr(TOKEN)
    settings.evaluation.allowed_endpoints = [
        ModelEndpoint(kind="openai", url="http://127.0.0.1:9/v1", model="m")
    ]
    svc = gateway_app.create(settings, LocalBlobStore(tmp_path / "store"))
    await svc.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{svc.port}", timeout=20) as http:
        yield svc, http
    await svc.stop()


async def test_a_10k_row_release_pages_and_filters_on_the_server(gateway: Any, unique: str) -> None:
    svc, http = gateway
    run_id = f"wb-{unique}"
    dropped = synthetic_release(svc.store, run_id)
    base = f"/v1/workbench/runs/{run_id}"

    # one page of a 10k-row release (how fast is a benchmark's question, not a timed test's)
    first = await http.get(f"{base}/rows", params={"limit": 50})
    assert first.status_code == 200, first.text
    page = first.json()
    assert page["total"] == ROWS and len(page["rows"]) == 50
    assert [r["sample_id"] for r in page["rows"]] == [f"syn_{i:05d}" for i in range(50)]
    assert page["facets"]["status"] == {"dropped": len(dropped), "released": ROWS - len(dropped)}
    assert len(first.content) < 200_000  # one page travels, not the release

    last = (await http.get(f"{base}/rows", params={"offset": ROWS - 20, "limit": 50})).json()
    assert [r["sample_id"] for r in last["rows"]] == [f"syn_{i:05d}" for i in range(ROWS - 20, ROWS)]

    blind = (
        await http.get(f"{base}/rows", params={"status": "dropped", "blind": "all", "task": "env_how"})
    ).json()
    want = [f"syn_{i:05d}" for i in range(ROWS) if i % 10 == 9 and (i // 100) % 3 == 1 and i % 3 == 2]
    assert want and blind["total"] == len(want) and [r["sample_id"] for r in blind["rows"]] == want[:50]
    some = (await http.get(f"{base}/rows", params={"blind": "some", "limit": 5})).json()
    assert some["total"] == sum(1 for i in range(ROWS) if i % 7 == 0 and i % 10 != 9)
    search = (await http.get(f"{base}/rows", params={"q": "syn_0999"})).json()
    assert [r["sample_id"] for r in search["rows"]] == [f"syn_0999{d}" for d in range(10)]

    # a released row in full: gold, boxes on the right image, the row that shares its view
    row = (await http.get(f"{base}/rows/syn_09998")).json()
    assert row["entry"]["status"] == "released" and row["gold"] == ["C"]
    assert [o["label"] for o in row["options"] if o["gold"]] == ["Right"]
    env = next(m for m in row["media"] if m["path"] == "env_04999.jpg")
    assert env["marks"] == [{"box": [0.7, 0.3, 0.9, 0.7], "role": "answer"}]
    ref = next(m for m in row["media"] if m["path"] == "ref.jpg")
    assert ref["marks"] == [{"box": [0.4, 0.3, 0.6, 0.7], "role": "reference"}]
    assert {r["sample_id"] for r in row["related"]} >= {"syn_09999"}
    assert row["steps"][0]["operation"] == "INF"
    # a dropped row comes from the plan, with its reason
    gone = (await http.get(f"{base}/rows/syn_00009")).json()
    assert gone["entry"]["status"] == "dropped" and gone["entry"]["reason"] == dropped["syn_00009"]
    assert gone["row"]["sample_id"] == "syn_00009"

    fun = (await http.get(f"{base}/funnel")).json()
    reasons = {d["reason"]: d for d in fun["drops"]}
    assert set(reasons) == set(REASONS)
    for reason, d in reasons.items():
        assert d["rows"] == sum(1 for w in dropped.values() if w == reason)
        assert d["examples"] and all(dropped[s] == reason for s in d["examples"])


async def test_bad_requests_get_clear_errors(gateway: Any, unique: str) -> None:
    svc, http = gateway
    run_id = f"wb-{unique}"
    base = f"/v1/workbench/runs/{run_id}"
    r = await http.get(f"{base}/rows")
    assert r.status_code == 404 and "no QC ledger" in r.json()["detail"]
    bad = await http.get("/v1/workbench/runs/bad.id/rows")
    assert bad.status_code in (400, 422) and "run id" in bad.json()["detail"]
    assert (await http.get(f"{base}/missions")).status_code == 404
    assert (await http.get(f"{base}/eval")).status_code == 404
    synthetic_release(svc.store, run_id, n=40)
    for params in ({"limit": 0}, {"limit": 5000}, {"offset": -1}, {"q": "x" * 500}):
        assert (await http.get(f"{base}/rows", params=params)).status_code == 422, params
    r = await http.get(f"{base}/rows/not-a-row")
    assert r.status_code == 404 and "no row" in r.json()["detail"]
    r = await http.get(f"{base}/eval/replies", params={"outcome": "maybe"})
    assert r.status_code == 422
    # a corrupted ledger line is named, and the rest of the release is untouched
    ledger = f"{keys.run_prefix(run_id)}/qc_rows.jsonl"
    good = svc.store.get(ledger)
    svc.store.put(ledger, good + b'{"sample_id": 5}\n')
    r = await http.get(f"{base}/rows")
    assert r.status_code == 422 and "qc_rows.jsonl line 41" in r.json()["detail"]
    svc.store.put(ledger, good.replace(b'["A","Front"]', b'["A"]', 1))  # an option without its label
    r = await http.get(f"{base}/rows")
    assert r.status_code == 422 and "options" in r.json()["detail"]
    svc.store.put(ledger, good)
    assert (await http.get(f"{base}/rows")).status_code == 200
    # a malformed QC report or scored reply is a 422 naming the file, never a 500
    report = f"{keys.run_prefix(run_id)}/qc_report.json"
    kept = svc.store.get(report)
    svc.store.put(report, b'{"scene_id": 5}')
    for url in (f"{base}/funnel", f"{base}/rows/syn_00001"):
        r = await http.get(url)
        assert r.status_code == 422 and "qc_report.json is invalid" in r.json()["detail"], url
    svc.store.put(report, kept)
    items = keys.eval_outputs(run_id, SCENE)
    reply = {"model": "m", "condition": "full", "sample_id": "syn_00001", "task": "self_where"}
    svc.store.put(items["eval_items"], json.dumps(reply | {"option_correct": 10**400}).encode() + b"\n[1]\n")
    svc.store.put(items["leaderboard"], json.dumps({"models": []}).encode())
    summary = (await http.get(f"{base}/eval")).json()
    assert summary["skipped_lines"] == 1 and summary["by_condition"] == []  # no score is not a 0
    assert (await http.get(f"{base}/eval/replies")).json()["rows"][0]["score"] is None
    svc.store.put(items["leaderboard"], b"[]")
    r = await http.get(f"{base}/eval")
    assert r.status_code == 422 and "leaderboard" in r.json()["detail"]


async def test_a_release_the_blind_gate_stopped_shows_its_withheld_rows(gateway: Any, unique: str) -> None:
    svc, http = gateway
    run_id = f"wb-{unique}"
    dropped = synthetic_release(svc.store, run_id, n=40, leaks=True)
    base = f"/v1/workbench/runs/{run_id}"
    page = (await http.get(f"{base}/rows", params={"status": "withheld"})).json()
    assert page["total"] == 40 - len(dropped)
    row = (await http.get(f"{base}/rows/syn_00001")).json()  # read from the plan: no manifest
    assert row["entry"]["status"] == "withheld" and row["row"]["sample_id"] == "syn_00001"
    fun = (await http.get(f"{base}/funnel")).json()
    assert fun["rows"] == [
        {"stage": "rows checked", "count": 40},
        {"stage": "rows released", "count": 0},
        {"stage": "rows withheld by the blind gate", "count": 40 - len(dropped)},
    ]
    assert fun["blind_gate"]["passed"] is False


async def test_release_files_answer_byte_ranges(gateway: Any, unique: str) -> None:
    svc, http = gateway
    run_id = f"wb-{unique}"
    data = bytes(range(256)) * 40
    svc.store.put(f"{keys.run_prefix(run_id)}/video_tasks/v.mp4", data, "video/mp4")
    url = f"/v1/releases/{run_id}/files/video_tasks/v.mp4"
    whole = await http.get(url)
    assert whole.status_code == 200 and whole.content == data and whole.headers["accept-ranges"] == "bytes"
    part = await http.get(url, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == data[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{len(data)}"
    tail = await http.get(url, headers={"Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == data[-10:]
    open_end = await http.get(url, headers={"Range": f"bytes={len(data) - 5}-"})
    assert open_end.content == data[-5:]
    past = await http.get(url, headers={"Range": f"bytes={len(data)}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(data)}"
    multi = await http.get(url, headers={"Range": "bytes=0-1,5-6"})
    assert multi.status_code == 200 and multi.content == data  # several ranges: the whole file


async def test_an_evaluation_started_from_the_workbench_reaches_the_bus(
    gateway: Any, probe: Probe, unique: str
) -> None:
    svc, http = gateway
    run_id = f"wb-{unique}"
    seen = await probe.collect(topology.EVAL_REQUESTED, eval_pb2.EvaluationRequest)
    url = f"/v1/runs/{run_id}/evaluations"
    spec = {
        "models": [{"kind": "openai", "url": "http://127.0.0.1:9/v1", "model": "m"}],
        "conditions": ["full"],
    }
    assert (await http.post(url, json=spec)).status_code == 401
    r = await http.post(url, json=spec, headers=AUTH)
    assert r.status_code == 404 and "no release" in r.json()["detail"]
    synthetic_release(svc.store, run_id, n=20)
    elsewhere = {"models": [{"kind": "openai", "url": "http://169.254.169.254/v1", "model": "m"}]}
    r = await http.post(url, json=elsewhere, headers=AUTH)
    assert r.status_code == 422 and "allow-list" in r.json()["detail"]
    r = await http.post(url, json={"conditions": ["peeking"]}, headers=AUTH)
    assert r.status_code == 422 and "unknown evaluation conditions" in r.json()["detail"]
    assert (await http.post(url, content=b"[1]", headers=AUTH)).status_code == 422
    headers = AUTH | {"Idempotency-Key": f"k-{unique}"}
    first = await http.post(url, json=spec, headers=headers)
    assert first.status_code == 202, first.text
    assert first.json()["created"] is True
    again = await http.post(url, json=spec, headers=headers)
    # a retry names the same request, which the stream keeps once (JetStream deduplication)
    assert again.status_code == 200 and again.json()["request"] == first.json()["request"]
    assert again.json()["created"] is False
    got = await Probe.first(seen, lambda e: e.run_id == run_id)
    assert got.scene_id == SCENE and [m.url for m in got.spec.models] == ["http://127.0.0.1:9/v1"]
    assert list(got.spec.conditions) == ["full"] and got.request_id == f"k-{unique}"
    assert first.json()["stage"] == f"eval-k-{unique}"


async def test_a_read_token_guards_every_read_and_a_session_cookie_carries_it(
    settings: Settings, tmp_path: Path, unique: str
) -> None:
    settings.gateway.token = SecretStr(TOKEN)
    settings.gateway.read_token = SecretStr("r3ad")
    svc = gateway_app.create(settings, LocalBlobStore(tmp_path / "store"))
    await svc.start()
    try:
        run_id = f"wb-{unique}"
        synthetic_release(svc.store, run_id, n=20)
        svc.store.put(f"{keys.run_prefix(run_id)}/video_tasks/v.mp4", b"0123456789", "video/mp4")
        reads = [
            f"/v1/workbench/runs/{run_id}/rows",
            "/v1/runs",
            f"/v1/releases/{run_id}/files/video_tasks/v.mp4",
        ]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{svc.port}", timeout=20) as http:
            info = (await http.get("/v1/info")).json()  # open: the page learns it must sign in
            assert info["reads_need_token"] is True
            assert (await http.get("/workbench")).status_code == 200  # the page itself holds no data
            for url in reads:
                r = await http.get(url)
                assert r.status_code == 401 and "read token" in r.json()["detail"], url
                wrong = await http.get(url, headers={"Authorization": "Bearer nope"})
                assert wrong.status_code == 401
                for token in ("r3ad", TOKEN):  # the write token reads too
                    assert (
                        await http.get(url, headers={"Authorization": f"Bearer {token}"})
                    ).status_code == 200
            assert (
                await http.post("/v1/session", headers={"Authorization": "Bearer nope"})
            ).status_code == 401
            http.cookies.set("skyqa_read", "forged")
            assert (await http.get(reads[0])).status_code == 401
            http.cookies.clear()
            signed = await http.post("/v1/session", headers={"Authorization": "Bearer r3ad"})
            assert signed.status_code == 204
            cookie = signed.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "r3ad" not in cookie
            for url in reads:
                assert (await http.get(url)).status_code == 200, url  # the cookie carries it
            assert "Max-Age=43200" in cookie  # and expires
            assert (await http.delete("/v1/session")).status_code == 204
            assert (await http.get(reads[0])).status_code == 401  # signed out
            _, stale = sessions.new_session("r3ad", time.time() - sessions.SESSION_S - 60)
            http.cookies.set("skyqa_read", stale)
            assert (await http.get(reads[0])).status_code == 401
        # behind a proxy that mounts the gateway under a prefix, the guard still applies
        proxied = httpx.ASGITransport(app=svc.app, root_path="/api")
        async with httpx.AsyncClient(transport=proxied, base_url="http://gw") as http:
            assert (await http.get("/api/v1/runs")).status_code == 401
    finally:
        await svc.stop()


# -- the human answerability audit ------------------------------------------------------------

READ = "r3ad-t0ken"
K = 2
# what no answer-free response may hold: the gold, where it is, how it was reached
GOLD_FIELDS = {"gold", "answer_option_id", "answer_label", "answer_bbox_xyxy_norm", "box", "marks", "steps"}


def keys_of(doc: Any) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in keys_of(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in keys_of(v)}
    return set()


@pytest.fixture
async def audit_gateway(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[Service, str, Path]]:
    settings.gateway.token = SecretStr(TOKEN)
    settings.gateway.read_token = SecretStr(READ)
    settings.gateway.audit_per_stratum = K
    svc = gateway_app.create(settings, LocalBlobStore(tmp_path / "store"))
    await svc.start()
    yield svc, f"http://127.0.0.1:{svc.port}", tmp_path / "store"
    await svc.stop()


def sealed_release(svc: Service, run_id: str) -> None:
    """The synthetic release with its media, a dataset card and its seal, as the QA stage leaves it."""
    synthetic_release(svc.store, run_id, n=60)
    root = keys.run_prefix(run_id)
    for i in range(30):
        svc.store.put(f"{root}/env_{i:05d}.jpg", f"env image {i}".encode(), "image/jpeg")
    svc.store.put(f"{root}/ref.jpg", b"reference image", "image/jpeg")
    card = "# card\n\n" + audit.card_section(None) + "\n## Files\n"
    svc.store.put(keys.release_common(run_id, SCENE)["dataset_card"], card.encode(), "text/markdown")
    info = release_info(run_id, SCENE)
    integrity.seal(svc.store, run_id, info)


async def sign_in(http: httpx.AsyncClient, token: str, user: str | None) -> httpx.Response:
    body = None if user is None else json.dumps({"user": user})
    return await http.post("/v1/session", headers={"Authorization": f"Bearer {token}"}, content=body)


async def test_an_audit_answered_end_to_end_over_the_api(
    audit_gateway: tuple[Service, str, Path], unique: str
) -> None:
    svc, url, store_root = audit_gateway
    run_id = f"au-{unique}"
    sealed_release(svc, run_id)
    base = f"/v1/workbench/runs/{run_id}/audit"
    async with httpx.AsyncClient(base_url=url, timeout=20) as http:
        # who may answer: a session signed in with a name and the write token
        r = await http.get(base)
        assert r.status_code == 401
        assert (await sign_in(http, READ, "ann")).status_code == 204
        r = await http.get(base)
        assert r.status_code == 403 and "write token" in r.json()["detail"]  # a reader cannot write
        assert (await sign_in(http, TOKEN, None)).status_code == 204
        assert (await http.get(base)).status_code == 403  # nameless: nobody to record
        for bad in ('{"user": "../etc"}', '{"user": 5}', '{"user": "a", "admin": true}', "[", '"x"'):
            r = await http.post("/v1/session", headers={"Authorization": f"Bearer {TOKEN}"}, content=bad)
            assert r.status_code in (400, 422) and "user" in r.json()["detail"], bad
        r = await http.post("/v1/session", headers={"Authorization": f"Bearer {TOKEN}"}, content=b"x" * 5000)
        assert r.status_code == 413
        assert (await sign_in(http, TOKEN, "ann")).status_code == 204

        # the sample: K rows of each task (one family here), deterministic, no gold
        q = (await http.get(base)).json()
        assert q["user"] == "ann" and q["answered"] == 0 and q["per_stratum"] == K
        sample = [r["sample_id"] for r in q["rows"]]
        assert len(sample) == 3 * K and q["next"] == sample[0]
        assert (await http.get(base)).json()["rows"] == q["rows"]
        assert not GOLD_FIELDS & keys_of(q)
        items = {}
        for sid in sample:
            r = await http.get(f"{base}/rows/{sid}")
            assert r.status_code == 200, r.text
            item = r.json()
            assert not GOLD_FIELDS & keys_of(item), sid
            assert ".jpg" not in r.text  # no file name either
            detail = (await http.get(f"/v1/workbench/runs/{run_id}/rows/{sid}")).json()
            assert item["user_prompt"] == detail["user_prompt"]  # the prompt a model gets
            assert item["system_prompt"] == detail["system_prompt"]
            assert [o["id"] for o in item["options"]] == [o["id"] for o in detail["options"]]
            assert [m["label"] for m in item["media"]] == [m["label"] for m in detail["media"]]
            for m, shown in zip(item["media"], detail["media"], strict=True):
                got = await http.get(m["url"])
                assert got.status_code == 200 and got.headers["content-type"] == "image/jpeg"
                assert got.content == svc.store.get(f"{keys.run_prefix(run_id)}/{shown['path']}")
            items[sid] = detail
        outside = next(f"syn_{i:05d}" for i in range(60) if f"syn_{i:05d}" not in sample and i % 10 != 9)
        assert (await http.get(f"{base}/rows/{outside}")).status_code == 404
        assert (await http.get(f"{base}/rows/{sample[0]}/media/9")).status_code == 404

        # hostile answers: 4xx with a message, nothing stored
        post = f"{base}/answers"
        hostile: list[tuple[bytes, int, str]] = [
            (b"not json", 422, "JSON"),
            (b"[1]", 422, "exactly"),
            (json.dumps({"sample_id": sample[0]}).encode(), 422, "exactly"),
            (json.dumps({"sample_id": sample[0], "reply": "C", "user": "eve"}).encode(), 422, "exactly"),
            (json.dumps({"sample_id": outside, "reply": "C"}).encode(), 404, "not in the audit sample"),
            (json.dumps({"sample_id": "../../x", "reply": "C"}).encode(), 404, "not in the audit sample"),
            (json.dumps({"sample_id": sample[0], "reply": "Z"}).encode(), 422, "one of the options"),
            (json.dumps({"sample_id": sample[0], "reply": ["C"]}).encode(), 422, "one of the options"),
            (json.dumps({"sample_id": sample[0], "reply": "C" * 9000}).encode(), 413, "exceeds"),
            (b"[" * 3000 + b"]" * 3000, 413, "exceeds"),
        ]
        for body, status, says in hostile:
            r = await http.post(post, content=body)
            assert r.status_code == status and says in r.json()["detail"], (body[:60], r.text)
        assert not svc.store.list(f"{keys.run_prefix(run_id)}/{audit.ANSWERS}/")

        # ann answers the gold on the first row of each task and another option on the rest
        wrong = {}
        for n, sid in enumerate(sample):
            gold = items[sid]["gold"][0]
            reply = gold if n % K == 0 else next(o["id"] for o in items[sid]["options"] if o["id"] != gold)
            if reply != gold:
                wrong[sid] = (reply, gold)
            r = await http.post(post, json={"sample_id": sid, "reply": reply})
            assert r.status_code == 201 and r.json()["created"] is True, r.text
            assert not GOLD_FIELDS & keys_of(r.json())
        r = await http.post(post, json={"sample_id": sample[0], "reply": items[sample[0]]["gold"][0]})
        assert r.status_code == 200 and r.json()["created"] is False  # the same answer again
        other = next(o["id"] for o in items[sample[0]]["options"] if o["id"] != items[sample[0]]["gold"][0])
        r = await http.post(post, json={"sample_id": sample[0], "reply": other})
        assert r.status_code == 409 and "not changed" in r.json()["detail"]
        q = (await http.get(base)).json()
        assert q["answered"] == len(sample) and q["next"] is None

    # stored with the release's QC: who, when, the reply
    stored = audit.load_answers(svc.store, run_id)
    assert {a.sample_id for a in stored} == set(sample) and {a.user for a in stored} == {"ann"}
    assert all(isinstance(a, AuditAnswer) and a.answered_at > 1.7e9 for a in stored)

    # qc_report.json, the card, the workbench's QC view; the release still verifies
    folder = store_root / "runs" / run_id
    report = json.loads((folder / "qc_report.json").read_text())["audit"]
    tasks = {items[s]["entry"]["task"] for s in sample}
    assert set(report["tasks"]) == tasks
    for task, t in report["tasks"].items():
        assert (t["sampled"], t["answered"], t["agreed"]) == (K, K, 1), task
        assert t["agreement"] == 0.5 and t["ci"] == list(audit.wilson(1, K))
    assert {d["sample_id"]: (d["reply"][0], d["gold"][0]) for d in report["disagreements"]} == wrong
    assert report["per_stratum"] == K and report["seed"] == run_id and report["users"] == ["ann"]
    card = (folder / "README.md").read_text()
    assert "Nobody has answered" not in card and card.endswith("\n## Files\n")
    for task in tasks:
        assert f"| {task} | dualcog_image | {K} | {K} | 1 | 0.50 [" in card
    for sid, (reply, gold) in wrong.items():
        assert f"- `{sid}` (" in card and f"ann answered {reply}, gold {gold}" in card
    checked, problems = integrity.verify(folder)
    assert problems == [] and checked > len(sample)
    async with httpx.AsyncClient(base_url=url, timeout=20) as http:
        assert (await sign_in(http, READ, None)).status_code == 204
        shown = (await http.get(f"/v1/workbench/runs/{run_id}/funnel")).json()["audit"]
        assert shown == report

        # a second person's answers count beside the first's
        assert (await sign_in(http, TOKEN, "bo")).status_code == 204
        gold = items[sample[1]]["gold"][0]
        assert (
            await http.post(f"{base}/answers", json={"sample_id": sample[1], "reply": gold})
        ).status_code == 201
        assert (await http.get(base)).json()["answered"] == 1
    again = json.loads((folder / "qc_report.json").read_text())["audit"]
    task = items[sample[1]]["entry"]["task"]
    assert (again["tasks"][task]["answered"], again["tasks"][task]["agreed"]) == (K + 1, 2)
    assert again["users"] == ["ann", "bo"] and integrity.verify(folder)[1] == []
