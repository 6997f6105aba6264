"""The gateway against a real nats-server: submit, read, follow live, dead letters, releases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fuzz_strategies import requests
from hypothesis import given, settings as hsettings, strategies as st
from pydantic import SecretStr
from skyqa import keys, scan
from skyqa.blob import LocalBlobStore, S3BlobStore
from skyqa.bus import Bus, Delivery, topology
from skyqa.runtime import ProgressReporter, Service, Settings
from skyqa.servers import NatsServer
from skyqa.settings import ModelEndpoint
from skyqa.v1 import common_pb2, scan_pb2
from stage_helpers import Probe

from services.gateway import app as gateway_app

TOKEN = "gw-t0ken"


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """This module's own nats-server: the scans it accepts would otherwise wait in the shared
    stream and be captured by the services of later tests."""
    server = NatsServer(tmp_path_factory.mktemp("gw-nats")).start()
    yield server
    server.stop()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scan_body(unique: str, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": f"gw-{unique}",
        "scene_id": "tiny_town",
        "bound": {"xmin": -50, "xmax": 50, "ymin": -50, "ymax": 50, "zmin": 0, "zmax": 80},
        "spacing_x_m": 25,
        "altitudes_m": [45],
        **extra,
    }


@pytest.fixture
async def gateway(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    settings.gateway.token = SecretStr(TOKEN)
    settings.gateway.review_url = "http://review.example/review"
    svc = gateway_app.create(settings, LocalBlobStore(tmp_path / "store"))
    await svc.start()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{svc.port}", timeout=20) as http:
        yield svc, http
    await svc.stop()


async def test_submit_validates_and_publishes_once(gateway: Any, probe: Probe, unique: str) -> None:
    _, http = gateway
    body = scan_body(unique)
    assert (await http.post("/v1/scans", json=body)).status_code == 401
    wrong = await http.post("/v1/scans", json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "bearer token" in wrong.json()["detail"]

    cases = {
        b"{not json": (400, "not JSON"),
        b"[1, 2]": (422, "JSON object"),
        json.dumps({**body, "warp_drive": 9}).encode(): (422, "warp_drive"),
        json.dumps({**body, "scene_id": "../etc"}).encode(): (422, "scene id"),
        json.dumps({**body, "altitudes_m": [500]}).encode(): (422, "outside MapBound"),
        json.dumps({**body, "camera": {"width": "wide"}}).encode(): (422, "width"),
        json.dumps({**body, "evaluation": {"conditions": ["blindfold"]}}).encode(): (422, "blindfold"),
        json.dumps({k: v for k, v in body.items() if k != "scene_id"}).encode(): (422, "scene_id"),
    }
    for raw, (code, text) in cases.items():
        r = await http.post("/v1/scans", content=raw, headers=AUTH)
        assert r.status_code == code, (raw, r.text)
        assert text in r.json()["detail"], (raw, r.text)
    huge = json.dumps({**body, "yaw_deg": [0.0] * 20000}).encode()
    r = await http.post("/v1/scans", content=huge, headers=AUTH)
    assert r.status_code == 413 and "exceeds" in r.json()["detail"]
    # nothing of the refused requests reached the bus or the run table
    assert (await http.get(f"/v1/runs/gw-{unique}")).status_code == 404

    received = await probe.collect(topology.SCAN_REQUESTED, scan_pb2.ScanRequest)
    first = await http.post("/v1/scans", json=body, headers=AUTH)
    assert first.status_code == 202, first.text
    out = first.json()
    assert out["run_id"] == f"gw-{unique}" and out["created"] is True
    again = await http.post("/v1/scans", json=body, headers=AUTH)
    assert again.status_code == 200 and again.json()["created"] is False
    await asyncio.sleep(0.5)
    assert len(received) == 1
    req = received[0]
    assert req.run_id == f"gw-{unique}" and req.profile == "preview" and req.camera.width == 640

    run = (await http.get(out["links"]["run"])).json()
    assert run["status"] == "pending" and run["scene_id"] == "tiny_town"
    assert [s["stage"] for s in run["stages"]][:2] == ["capture", "fusion"]
    listed = (await http.get("/v1/runs", params={"limit": 1000})).json()
    assert f"gw-{unique}" in [r["run_id"] for r in listed]
    assert (await http.get("/v1/runs/bad..id")).status_code == 400

    # a request without a run id gets a derived one: the same request names the same run
    derived = {k: v for k, v in scan_body(unique, seed=int(unique[:6], 16)).items() if k != "run_id"}
    a = (await http.post("/v1/scans", json=derived, headers=AUTH)).json()
    b = (await http.post("/v1/scans", json=derived, headers=AUTH)).json()
    assert a["run_id"] == b["run_id"] and a["run_id"].startswith("tiny_town-") and not b["created"]
    spec = (await http.get("/openapi.json")).json()
    assert {"/v1/scans", "/v1/runs/{run_id}/events", "/v1/releases/{run_id}"} <= set(spec["paths"])


async def read_events(http: httpx.AsyncClient, url: str, into: list[tuple[str, Any]]) -> None:
    async with http.stream("GET", url) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        event = ""
        async for line in r.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                into.append((event, json.loads(line[6:])))
                if event == "end":
                    return


async def test_events_relay_progress_until_the_run_ends(gateway: Any, bus: Bus, unique: str) -> None:
    _, http = gateway
    run_id = f"sse-{unique}"
    reporter = ProgressReporter(bus, await bus.kv(topology.RUNS_BUCKET), "test")
    await reporter.report(run_id, "capture", 0, 4, scene_id="tiny_town")
    events: list[tuple[str, Any]] = []
    reader = asyncio.create_task(read_events(http, f"/v1/runs/{run_id}/events", events))
    await _until(lambda: any(e == "state" for e, _ in events))
    for done in range(1, 5):
        await reporter.report(run_id, "capture", done, 4)
        await asyncio.sleep(0.05)
    await reporter.report(run_id, "capture", 4, 4, common_pb2.RUN_STATUS_COMPLETED)
    await reporter.report(run_id, "eval", 1, 1, common_pb2.RUN_STATUS_COMPLETED, "scored")
    await asyncio.wait_for(reader, 20)

    kinds = [e for e, _ in events]
    assert kinds[0] == "state" and kinds[-1] == "end" and "progress" in kinds
    assert events[-1][1]["status"] == "completed"
    progress = [d for e, d in events if e == "progress"]
    assert progress[-1]["stage"] == "eval"
    states = [d for e, d in events if e == "state"]
    capture = [next(s for s in st["stages"] if s["stage"] == "capture") for st in states]
    assert [c["done"] for c in capture] == sorted(c["done"] for c in capture)
    assert capture[-1]["status"] == "completed" and capture[-1]["fraction"] == 1.0
    assert capture[-1]["items_per_s"] > 0
    # a finished run answers with its final state and ends at once
    late: list[tuple[str, Any]] = []
    await asyncio.wait_for(read_events(http, f"/v1/runs/{run_id}/events", late), 10)
    assert [e for e, _ in late] == ["state", "end"]
    assert (await http.get(f"/v1/runs/nope-{unique}/events")).status_code == 404


async def _until(predicate: Any, timeout: float = 15.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_poison_message_is_dead_lettered_and_listed(
    gateway: Any, bus_settings: Any, unique: str
) -> None:
    _, http = gateway
    worker = Bus(bus_settings, "poisoned")
    await worker.connect()
    handled: list[str] = []

    async def handler(msg: common_pb2.Progress, d: Delivery) -> None:
        handled.append(msg.message)

    spec = topology.ConsumerSpec(f"poison-{unique}", topology.EVENTS_STREAM, f"skyqa.v1.eval.poison{unique}")
    worker.handle(spec, common_pb2.Progress, handler, stage="test")
    await worker.start()
    try:
        assert worker.nc is not None
        js = worker.js
        # a run that completed, and a poison message whose header claims it and an unknown run
        reporter = ProgressReporter(worker, await worker.kv(topology.RUNS_BUCKET), "test")
        done = f"p-{unique}"
        await reporter.report(done, "eval", 1, 1, common_pb2.RUN_STATUS_COMPLETED)
        for claimed in (done, f"ghost-{unique}"):
            await js.publish(spec.filter_subject, b"\xff\x00 not protobuf", headers={"Skyqa-Run-Id": claimed})
        await js.publish(spec.filter_subject, common_pb2.Progress(message="fine").SerializeToString())
        await _until(lambda: handled == ["fine"])

        async def listed() -> list[dict[str, Any]]:
            items = (await http.get("/v1/dead-letters")).json()["items"]
            return [d for d in items if d["subject"] == spec.filter_subject]

        for _ in range(200):
            items = await listed()
            if len(items) == 2:
                break
            await asyncio.sleep(0.05)
        assert sorted(d["claimed_run_id"] for d in items) == sorted([done, f"ghost-{unique}"])
        for item in items:
            assert item["reason"] == "invalid_input" and item["run_id"] == ""
            assert item["consumer"] == spec.durable and "not a valid skyqa.v1.Progress" in item["error"]
        # the header named the runs, the payload did not: neither run changed, none was created
        run = (await http.get(f"/v1/runs/{done}")).json()
        assert run["status"] == "completed" and run["dead_letters"] == [], run
        assert (await http.get(f"/v1/runs/ghost-{unique}")).status_code == 404
        assert f"ghost-{unique}" not in [r["run_id"] for r in (await http.get("/v1/runs")).json()]
    finally:
        await worker.stop()


async def test_release_listing_files_and_traversal(gateway: Any, unique: str) -> None:
    svc, http = gateway
    run_id = f"rel-{unique}"
    svc.store.put(f"runs/{run_id}/image_tasks/a.json", b'{"a": 1}', "application/json")
    svc.store.put(f"runs/{run_id}/scene_data/x/preview.png", b"\x89PNG fake", "image/png")
    listing = (await http.get(f"/v1/releases/{run_id}")).json()
    assert listing["count"] == 2 and not listing["truncated"]
    paths = {f["path"]: f for f in listing["files"]}
    assert set(paths) == {"image_tasks/a.json", "scene_data/x/preview.png"}
    assert paths["image_tasks/a.json"]["size"] == 8 and paths["image_tasks/a.json"]["presigned_url"] is None
    got = await http.get(paths["image_tasks/a.json"]["url"])
    assert got.status_code == 200 and got.json() == {"a": 1}
    # stored files (a release's report.html, an .svg) never run script on the gateway's origin
    assert got.headers["content-security-policy"].startswith("sandbox")
    assert got.headers["x-content-type-options"] == "nosniff"
    sub = (await http.get(f"/v1/releases/{run_id}", params={"prefix": "image_tasks"})).json()
    assert [f["path"] for f in sub["files"]] == ["image_tasks/a.json"]
    for bad in ("%2e%2e/%2e%2e/etc/passwd", "image_tasks/%2e%2e/%2e%2e/x", "a//b"):
        r = await http.get(f"/v1/releases/{run_id}/files/{bad}")
        assert r.status_code in (400, 404), (bad, r.status_code)
        assert r.status_code == 400 or "no file" in r.json()["detail"]
    assert (await http.get(f"/v1/releases/{run_id}", params={"prefix": "../x"})).status_code == 400
    assert (await http.get(f"/v1/releases/{run_id}/files/nothing.json")).status_code == 404
    assert (await http.get(f"/v1/releases/none-{unique}")).status_code == 404
    info = (await http.get("/v1/info")).json()
    assert info["review_url"] == "http://review.example/review" and info["writes_enabled"]
    page = await http.get("/")
    assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    assert "EventSource" in (await http.get("/static/dashboard.js")).text


def test_s3_presigned_urls_read_without_credentials(s3_store: S3BlobStore) -> None:
    s3_store.put("runs/r1/x.json", b"[1]", "application/json")
    url = s3_store.presigned_url("runs/r1/x.json", 300)
    assert url is not None and "X-Amz-Signature" in url
    assert httpx.get(url).content == b"[1]"
    tampered = url.replace("runs/r1/x.json", "runs/r1/y.json")
    assert httpx.get(tampered).status_code == 403


async def test_fuzzed_requests_get_only_clean_answers(nats_server: NatsServer, tmp_path: Path) -> None:
    """Random bodies, ids and paths against a gateway: never a 5xx."""
    settings = Settings(
        bus={"nats_url": nats_server.url}, http={"port": 0}, gateway={"token": SecretStr(TOKEN)}
    )
    svc = gateway_app.create(settings, LocalBlobStore(tmp_path / "store"))
    svc.store.put("runs/fz/a.bin", bytes(range(100)))
    await svc.start()
    base = f"http://127.0.0.1:{svc.port}"
    # names up to and past what a file name may hold, and numbers past what int() reads (#41.8)
    text = st.one_of(
        st.text(st.characters(codec="utf-8"), max_size=40),
        st.builds(
            lambda c, n, tail: c * n + tail,
            st.sampled_from("a/._-"),
            st.integers(200, 600),
            st.text(max_size=5),
        ),
    )
    number = st.one_of(
        st.text(st.sampled_from("0123456789"), max_size=25),
        st.builds(lambda d, n: d * n, st.sampled_from("0129"), st.integers(4000, 6000)),
        st.text(st.characters(codec="utf-8", categories=["Nd", "No"]), max_size=8),
    )

    @hsettings(max_examples=150, deadline=None)
    @given(body=st.one_of(st.binary(max_size=300), st.builds(lambda d: json.dumps(d).encode(), requests)))
    def scans(body: bytes) -> None:
        r = httpx.post(f"{base}/v1/scans", content=body, headers=AUTH, timeout=10)
        assert r.status_code in (200, 202, 400, 413, 422), (body, r.status_code, r.text)

    @hsettings(max_examples=150, deadline=None)
    @given(run=text, path=text)
    def reads(run: str, path: str) -> None:
        q_run, q_path = quote(run, safe=""), quote(path, safe="/")
        for url in (f"/v1/runs/{q_run}", f"/v1/releases/{q_run}/files/{q_path}", f"/v1/releases/{q_run}"):
            r = httpx.get(base + url, params={"prefix": path}, timeout=10)
            assert r.status_code < 500, (url, r.status_code, r.text)
        r = httpx.get(f"{base}/v1/dead-letters", params={"run_id": run}, timeout=10)
        assert r.status_code in (200, 400, 422), (run, r.text)

    @hsettings(max_examples=80, deadline=None)
    @given(
        first=number,
        last=number,
        # what a client can put in a header: no control characters
        cookie=st.one_of(
            number, st.text(st.characters(codec="utf-8", exclude_categories=["Cc"]), max_size=40)
        ),
    )
    def headers(first: str, last: str, cookie: str) -> None:
        span = f"bytes={first}-{last}".encode()
        r = httpx.get(f"{base}/v1/releases/fz/files/a.bin", headers={b"Range": span}, timeout=10)
        assert r.status_code in (200, 206, 416), (span[:40], r.status_code, r.text)
        jar = f"skyqa_read={cookie}.{cookie}".encode()
        r = httpx.delete(f"{base}/v1/session", headers={b"Cookie": jar}, timeout=10)
        assert r.status_code == 204, (jar[:40], r.text)

    try:
        await asyncio.to_thread(scans)
        await asyncio.to_thread(reads)
        await asyncio.to_thread(headers)
    finally:
        await svc.stop()


async def test_scan_requests_cannot_name_endpoints_or_key_variables(
    gateway: Any, probe: Probe, unique: str
) -> None:
    """Issue 15.1: a request may only name an allow-listed endpoint, never a key variable."""
    svc, http = gateway
    published = await probe.collect(topology.SCAN_REQUESTED, scan_pb2.ScanRequest)
    stolen = {"kind": "openai", "url": "http://127.0.0.1:18999/v1", "api_key_env": "SKYQA_REVIEW_TOKEN"}
    r = await http.post("/v1/scans", json=scan_body(unique, evaluation={"models": [stolen]}), headers=AUTH)
    assert r.status_code == 422 and "api_key_env" in r.json()["detail"], r.text
    elsewhere = {"kind": "openai", "url": "http://127.0.0.1:18999/v1", "model": "m"}
    r = await http.post("/v1/scans", json=scan_body(unique, evaluation={"models": [elsewhere]}), headers=AUTH)
    assert r.status_code == 422 and "not on the operator's allow-list" in r.json()["detail"], r.text
    svc.settings.evaluation.allowed_endpoints = [
        ModelEndpoint(kind="openai", url="http://127.0.0.1:18999/v1/", api_key_env="OPERATOR_KEY")
    ]
    try:
        r = await http.post(
            "/v1/scans", json=scan_body(unique, evaluation={"models": [elsewhere]}), headers=AUTH
        )
        assert r.status_code == 202, r.text
    finally:
        svc.settings.evaluation.allowed_endpoints = []
    await asyncio.sleep(0.5)
    assert [p.run_id for p in published] == [f"gw-{unique}"]


async def test_scan_input_errors_are_4xx_at_submission(gateway: Any, unique: str) -> None:
    """Issue 15.7/15.8: unknown scenes, explicit zeros, deep JSON and bearer parsing."""
    _, http = gateway
    for scene in ("nowhere_city", "procedural_1_13"):
        r = await http.post("/v1/scans", json=scan_body(unique, scene_id=scene), headers=AUTH)
        assert r.status_code == 422 and "unknown scene" in r.json()["detail"], (scene, r.text)
    r = await http.post("/v1/scans", json=scan_body(unique, spacing_x_m=0), headers=AUTH)
    assert r.status_code == 422 and "spacing_x_m" in r.json()["detail"], r.text
    r = await http.post("/v1/scans", json=scan_body(unique, camera={"width": 0}), headers=AUTH)
    assert r.status_code == 422 and "camera.width" in r.json()["detail"], r.text
    deep = b"[" * 50_000 + b"]" * 50_000
    r = await http.post("/v1/scans", content=deep, headers=AUTH)
    assert r.status_code in (400, 413), r.text
    nested = b"[" * 20_000 + b"]" * 20_000  # under the 64 KiB body limit
    r = await http.post("/v1/scans", content=nested, headers=AUTH)
    assert r.status_code == 400 and "nested too deeply" in r.json()["detail"], r.text
    bare = await http.post("/v1/scans", json=scan_body(unique), headers={"Authorization": TOKEN})
    assert bare.status_code == 401, bare.text
    lower = await http.post("/v1/scans", json=scan_body(unique), headers={"authorization": f"bearer {TOKEN}"})
    assert lower.status_code == 202, lower.text


def test_long_scene_ids_keep_the_whole_digest_in_run_ids() -> None:
    scene = "s" * 96
    a = scan.apply_defaults(scan_pb2.ScanRequest(scene_id=scene, seed=1))
    b = scan.apply_defaults(scan_pb2.ScanRequest(scene_id=scene, seed=2))
    ids = scan.run_id_for(a), scan.run_id_for(b)
    assert ids[0] != ids[1] and all(len(i) <= 96 and keys.is_valid_id(i) for i in ids)


@pytest.mark.parametrize("backend", ["local", "s3"])
async def test_release_listing_is_a_folder_and_survives_bad_files(
    backend: str, settings: Settings, tmp_path: Path, unique: str, request: pytest.FixtureRequest
) -> None:
    """Issue 15.6/15.7: a run's listing holds only that run's folder; folders, symlinks and
    unlisted files give 4xx, never 500."""
    store: Any = (
        LocalBlobStore(tmp_path / "store") if backend == "local" else request.getfixturevalue("s3_store")
    )
    run = f"abc{unique}"
    for key in (
        f"runs/{run}/image_tasks/a.json",
        f"runs/{run}/image_tasks_old/stale.json",
        f"runs/{run}def/secret.json",
        f"runs/{run}-2/secret.json",
    ):
        store.put(key, b"{}", "application/json")
    if backend == "local":
        outside = tmp_path / "outside.txt"
        outside.write_text("host file")
        (tmp_path / "store" / "runs" / run / "image_tasks" / "link.json").symlink_to(outside)
        (tmp_path / "store" / "runs" / run / "escape").symlink_to(tmp_path)
    svc = gateway_app.create(settings, store)
    await svc.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{svc.port}", timeout=20) as http:
            listing = (await http.get(f"/v1/releases/{run}")).json()
            assert sorted(f["path"] for f in listing["files"]) == [
                "image_tasks/a.json",
                "image_tasks_old/stale.json",
            ]
            sub = (await http.get(f"/v1/releases/{run}", params={"prefix": "image_tasks"})).json()
            assert [f["path"] for f in sub["files"]] == ["image_tasks/a.json"]
            folder = await http.get(f"/v1/releases/{run}/files/image_tasks")
            assert folder.status_code == 404, folder.text
            if backend == "local":
                for prefix in ("escape", "escape/store"):  # a linked parent leads nowhere
                    r = await http.get(f"/v1/releases/{run}", params={"prefix": prefix})
                    assert r.status_code in (200, 404) and "host file" not in r.text, (prefix, r.text)
                    assert r.status_code == 404 or r.json()["files"] == [], r.text
                for path in ("image_tasks/link.json", "escape/outside.txt"):
                    r = await http.get(f"/v1/releases/{run}/files/{path}")
                    assert r.status_code == 404 and "host file" not in r.text, (path, r.text)
    finally:
        await svc.stop()


@pytest.mark.parametrize("backend", ["local", "s3"])
async def test_overlong_names_numbers_and_cookies_get_4xx(
    backend: str, settings: Settings, tmp_path: Path, unique: str, request: pytest.FixtureRequest
) -> None:
    """Issue #41.8: names longer than a file name may be (ENAMETOOLONG in the local store),
    numbers longer than int() reads (4300 digits) or that no float holds, and digits outside
    ASCII were 500s. Each is a 4xx with a message now, with the read token set and not."""
    store: Any = (
        LocalBlobStore(tmp_path / "store") if backend == "local" else request.getfixturevalue("s3_store")
    )
    run = f"long{unique}"
    store.put(f"runs/{run}/a.json", b'{"a": 1}', "application/json")
    settings.gateway.read_token = SecretStr("r3ad")
    svc = gateway_app.create(settings, store)
    await svc.start()
    reader = {"Authorization": "Bearer r3ad"}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{svc.port}", timeout=20) as http:
            file = f"/v1/releases/{run}/files/a.json"
            refused = [
                (f"/v1/releases/{run}", {"prefix": "p" * 256}, {}),
                (f"/v1/releases/{run}", {"prefix": f"image_tasks/{'p' * 300}/x"}, {}),
                (f"/v1/releases/{run}/files/{'f' * 300}", {}, {}),
                (f"/v1/releases/{run}/files/video_tasks/{'d' * 256}/v.mp4", {}, {}),
                (file, {}, {"Range": "bytes=" + "9" * 5000 + "-"}),
                (f"/v1/workbench/runs/{run}/rows/{'s' * 300}", {}, {}),
                (f"/v1/workbench/runs/{run}/missions/{'m' * 300}", {}, {}),
                ("/v1/runs", {"limit": "9" * 5000}, {}),
                ("/v1/dead-letters", {"limit": "9" * 5000, "run_id": "r" * 300}, {}),
            ]
            for url, params, headers in refused:
                r = await http.get(url, params=params, headers={**reader, **headers})
                assert 400 <= r.status_code < 500, (url, headers, r.status_code, r.text[:200])
                assert r.json()["detail"], (url, r.text)
            # past every end is the end; leading zeros still spell their number
            for span, part in (
                ("-" + "9" * 5000, b'{"a": 1}'),
                ("3-" + "9" * 5000, b'": 1}'),
                ("0" * 5000 + "2-3", b'a"'),
            ):
                r = await http.get(file, headers={**reader, "Range": f"bytes={span}"})
                assert r.status_code == 206 and r.content == part, (span[:20], r.text)
            for cookie in (
                "\u00b2.x".encode("latin-1"),
                "\u00b2.x".encode(),
                b"9" * 400 + b".x",
                b"9" * 5000 + b".x",
                b"a" * 32 + b"." + b"9" * 400 + b"." + b"0" * 64,
                b"\xd9\xa3" * 10 + b".x",
            ):
                r = await http.get(file, headers={b"Cookie": b"skyqa_read=" + cookie})
                assert r.status_code == 401 and "read token" in r.json()["detail"], (cookie[:20], r.text)
                out = await http.delete("/v1/session", headers={b"Cookie": b"skyqa_read=" + cookie})
                assert out.status_code == 204, (cookie[:20], out.text)
    finally:
        await svc.stop()
