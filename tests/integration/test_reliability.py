"""Reliability on real servers: crashed services, a restarted nats-server and an object-store
outage during a real run. Each disturbed run must complete with a release byte-identical to an
undisturbed run of the same request (so no row is lost or duplicated)."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import io
import json
import random
import secrets
import time
from pathlib import Path

import av
import httpx
import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from skyqa.blob import BlobStore, LocalBlobStore, S3BlobStore
from skyqa.bus import topology
from skyqa.contracts import RunState
from skyqa.contracts.missions import MissionIndex
from skyqa.scan_options import build_request
from skyqa.servers import NatsServer, SeaweedS3, free_port
from skyqa.settings import Settings
from skyqa.v1 import landmark_pb2

from services.embedded import Embedded, publish_scan, read_run, wait_for_run
from services.fleet import Fleet
from services.registry import SERVICES

ROOT = Path(__file__).resolve().parents[2]
REQ = build_request(
    "tiny_town", "preview", None, "-50,50,-50,50,0,80", 25.0, [45.0], 0, "auto", 2, "160x120",
    eval_conditions="full", reasoning="0", surveys="0",
)  # fmt: skip
COMPARED = (
    "frames_manifest",
    "instances",
    "meta",
    "landmarks_raw",
    "valid_instances",
    "missions_index",
    "image_qa",
    "video_qa",
    "render_requests",
    "qc_report",
    "leaderboard",
)
# who works while a stage runs: the victims a crash is drawn from
WORKERS = {
    "capture": ["capture"],
    "fusion": ["fusion"],
    "landmark": ["landmark", "renderer"],
    "review": ["labeller", "landmark"],
    "mission": ["mission_planner", "renderer"],
    "qa": ["qa_generator", "renderer"],
    "eval": ["evaluator"],
}
FAST = {"ack_wait_s": 5.0, "retry_base_s": 0.5, "retry_max_s": 5.0}


def first_difference(a: dict[str, bytes], b: dict[str, bytes], name: str) -> str:
    diff = difflib.unified_diff(
        b[name].decode(errors="replace").splitlines(),
        a[name].decode(errors="replace").splitlines(),
        lineterm="",
        n=2,
    )
    return "\n".join(list(diff)[:200])


def release(store: BlobStore, state: RunState) -> dict[str, bytes]:
    assert state.status == "completed", state.errors
    return {name: store.get(state.outputs[name]) for name in COMPARED}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    tmp = tmp_path_factory.mktemp("undisturbed")

    async def run() -> dict[str, bytes]:
        settings = Settings(bus=FAST, evaluation={"cache_dir": tmp / "eval-cache"})
        async with Embedded(tmp, settings) as env:
            assert env.nats_url is not None and env.store is not None
            await publish_scan(env.nats_url, REQ)
            state = await wait_for_run(env.nats_url, REQ.run_id, "eval", 600)
            return release(env.store, state)

    return asyncio.run(run())


def fleet_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Every process's settings: fast retries, a local store under ``tmp_path``."""
    return {
        "SKYQA_BUS__ACK_WAIT_S": str(FAST["ack_wait_s"]),
        "SKYQA_BUS__RETRY_BASE_S": str(FAST["retry_base_s"]),
        "SKYQA_BUS__RETRY_MAX_S": str(FAST["retry_max_s"]),
        "SKYQA_STORE__BACKEND": "local",
        "SKYQA_STORE__LOCAL_ROOT": str(tmp_path / "store"),
        "SKYQA_HTTP__PORT": "0",
        "SKYQA_LOG_LEVEL": "WARNING",
        **extra,
    }


async def poll(url: str, run_id: str = REQ.run_id) -> RunState | None:
    try:
        return await read_run(url, run_id)
    except (TimeoutError, ConnectionError, OSError):
        return None  # nats-server is restarting


async def test_crashed_services_and_a_restarted_nats_server_with_per_service_users(
    reference: dict[str, bytes], tmp_path: Path
) -> None:
    # the compose nats-server configuration: each service as its own user with its own
    # publish permissions, so this run also proves the permissions are sufficient
    passwords = {name: secrets.token_hex(8) for name in [*SERVICES, "client"]}
    server = NatsServer(
        tmp_path / "nats",
        config=ROOT / "deploy/nats/nats.conf",
        env={f"NATS_{n.upper()}_PASSWORD": pw for n, pw in passwords.items()},
    ).start()
    host = server.url.removeprefix("nats://")
    url = {n: f"nats://{n}:{pw}@{host}" for n, pw in passwords.items()}
    env = fleet_env(tmp_path, SKYQA_EVALUATION__CACHE_DIR=str(tmp_path / "eval-cache"))
    fleet = Fleet(
        env, tmp_path / "logs", per_service={n: {"SKYQA_BUS__NATS_URL": url[n]} for n in SERVICES}
    ).start()
    rng = random.Random(11)
    kills: list[tuple[str, str]] = []
    nats_restarted = False
    try:
        await publish_scan(url["client"], REQ)
        seen: set[str] = set()
        deadline = time.monotonic() + 900
        state = None
        while time.monotonic() < deadline:
            state = await poll(url["client"])
            if state is not None:
                if state.status == "failed" or (
                    state.stages.get("eval", None) and state.stages["eval"].status == "completed"
                ):
                    break
                for stage, victims in WORKERS.items():
                    st = state.stages.get(stage)
                    if st is None or st.status != "running" or stage in seen:
                        continue
                    seen.add(stage)
                    if stage == "mission" and not nats_restarted:
                        server.stop()
                        await asyncio.sleep(2)
                        server.start()
                        nats_restarted = True
                    victim = rng.choice(victims)
                    fleet.kill(victim)  # mid-handler: nothing acked, nothing drained
                    kills.append((stage, victim))
                    await asyncio.sleep(0.5)
                    fleet.start(victim)  # the restart policy of compose / Kubernetes
            await asyncio.sleep(0.2)
        assert state is not None and state.status == "completed", (
            state.errors if state else "no state",
            kills,
            {n: fleet.log(n)[-1500:] for n in fleet.names},
        )
        assert len(kills) >= 4 and nats_restarted, kills
        disturbed = release(LocalBlobStore(tmp_path / "store"), state)
        for name in COMPARED:
            if disturbed[name] != reference[name]:
                (tmp_path / f"{name}.diff").write_text(first_difference(disturbed, reference, name))
            assert disturbed[name] == reference[name], (
                name,
                kills,
                first_difference(disturbed, reference, name),
            )
    finally:
        fleet.stop()
        server.stop()


async def test_object_store_outage_heals(reference: dict[str, bytes], tmp_path: Path) -> None:
    s3 = SeaweedS3(tmp_path / "s3").start()
    try:
        store = S3BlobStore(s3.endpoint, s3.access_key, s3.secret_key, "outage", create_bucket=True)
        # default retry schedule (about 90 s before a message is dead-lettered)
        settings = Settings(evaluation={"cache_dir": tmp_path / "eval-cache"})
        async with Embedded(tmp_path, settings, store=store) as env:
            assert env.nats_url is not None
            await publish_scan(env.nats_url, REQ)
            for _ in range(1200):
                state = await read_run(env.nats_url, REQ.run_id)
                if state and state.stages.get("capture") and state.stages["capture"].done >= 1:
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(s3.stop)
            down_at = time.monotonic()
            await asyncio.sleep(30)
            during = await read_run(env.nats_url, REQ.run_id)
            await asyncio.to_thread(s3.start)
            assert during is not None and during.status == "running", during
            assert store.ping() is not False  # back
            state = await wait_for_run(env.nats_url, REQ.run_id, "eval", 900)
            assert time.monotonic() - down_at >= 30
            assert release(store, state) == reference
    finally:
        s3.stop()


async def test_review_host_killed_during_human_review_keeps_the_scan_settings(tmp_path: Path) -> None:
    """SIGKILL the landmark/review process while a human review waits, restart it, finish the
    review through its API: the mission stage must get the run's own settings (seed, video
    size), and five simultaneous finalize calls must publish one ``LandmarksReviewed``."""
    req = build_request(
        "tiny_town",
        "preview",
        None,
        "-50,50,-50,50,0,80",
        25.0,
        [45.0],
        7,
        "human",
        2,
        "160x120",
        reasoning="0",
        surveys="0",
    )
    token = secrets.token_hex(8)
    server = NatsServer(tmp_path / "nats").start()
    review_port = free_port()
    env = fleet_env(tmp_path, SKYQA_BUS__NATS_URL=server.url, SKYQA_REVIEW_TOKEN=token)
    wanted = ["capture", "fusion", "renderer", "landmark", "labeller", "mission_planner"]
    fleet = Fleet(
        env,
        tmp_path / "logs",
        services=wanted,
        per_service={"landmark": {"SKYQA_HTTP__PORT": str(review_port)}},
    )
    reviewed: list[landmark_pb2.LandmarksReviewed] = []

    async def on_reviewed(msg: Msg) -> None:
        reviewed.append(landmark_pb2.LandmarksReviewed.FromString(msg.data))

    watcher: NATS | None = None
    try:
        watcher = await nats.connect(server.url)
        await watcher.subscribe(topology.LANDMARKS_REVIEWED, cb=on_reviewed)
        fleet.start()
        await publish_scan(server.url, req)
        for _ in range(1200):
            state = await poll(server.url, req.run_id)
            assert state is None or state.status != "failed", state.errors
            review = state.stages.get("review") if state else None
            if review is not None and "waiting for human review" in review.message:
                break
            await asyncio.sleep(0.25)
        else:
            raise AssertionError("the human review never started")
        fleet.kill("landmark")
        fleet.start("landmark")
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{review_port}", headers=auth) as http:
            for _ in range(240):
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/readyz")).status_code == 200:
                        break
                await asyncio.sleep(0.25)
            run = (await http.get(f"/review/api/runs/{req.run_id}")).json()
            inst = next(
                i
                for i in run["instances"]
                if sum(v["mode"] == "orbit" and v["measured_valid"] for v in i["views"]) >= 4
            )
            base = f"/review/api/runs/{req.run_id}/instances/{inst['instance_id']}"
            main = next(v["view_id"] for v in inst["views"] if v["mode"] == "orbit" and v["measured_valid"])
            for path, body in (
                ("direction", {"view_id": main, "direction": "front", "main": True}),
                ("decide", {"action": "keep"}),
                ("labels", {"category": "building", "subcategory": "block", "description": "a grey block"}),
            ):
                r = await http.post(f"{base}/{path}", json=body)
                assert r.status_code == 200, r.text
            finals = await asyncio.gather(
                *(http.post(f"/review/api/runs/{req.run_id}/finalize") for _ in range(5))
            )
        assert sorted(r.status_code for r in finals) == [200, 409, 409, 409, 409], [r.text for r in finals]
        state = await wait_for_run(server.url, req.run_id, "mission", 600)
        assert state.status != "failed", state.errors
        await asyncio.sleep(1.0)  # a duplicate would have arrived by now
        assert len(reviewed) == 1, reviewed
        store = LocalBlobStore(tmp_path / "store")
        plan = json.loads(store.get(f"runs/{req.run_id}/video_tasks/mission_plan.json"))
        assert int(plan["scan"]["seed"]) == 7, plan["scan"]  # protobuf JSON writes uint64 as text
        assert (plan["scan"]["video"]["width"], plan["scan"]["video"]["height"]) == (160, 120)
        index = MissionIndex.model_validate_json(store.get(state.outputs["missions_index"]))
        assert index.missions, index.rejected
        with av.open(io.BytesIO(store.get(index.missions[0].video))) as video:
            stream = video.streams.video[0]
            assert (stream.width, stream.height) == (160, 120)
    finally:
        if watcher is not None:
            await watcher.close()
        fleet.stop()
        server.stop()
