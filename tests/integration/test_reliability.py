"""Reliability on real servers: crashed services, a restarted nats-server and an object-store
outage during a real run. Each disturbed run must complete with a release byte-identical to an
undisturbed run of the same request (so no row is lost or duplicated)."""

from __future__ import annotations

import asyncio
import difflib
import random
import secrets
import time
from pathlib import Path

import pytest
from skyqa.blob import BlobStore, LocalBlobStore, S3BlobStore
from skyqa.contracts import RunState
from skyqa.servers import NatsServer, SeaweedS3
from skyqa.settings import Settings

from services.cli import build_request
from services.embedded import Embedded, publish_scan, read_run, wait_for_run
from services.fleet import Fleet
from services.registry import SERVICES

ROOT = Path(__file__).resolve().parents[2]
REQ = build_request(
    "tiny_town", "preview", None, "-50,50,-50,50,0,80", 25.0, [45.0], 0, "auto", 2, "160x120",
    eval_conditions="full",
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


async def poll(url: str) -> RunState | None:
    try:
        return await read_run(url, REQ.run_id)
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
    env = {
        "SKYQA_BUS__ACK_WAIT_S": str(FAST["ack_wait_s"]),
        "SKYQA_BUS__RETRY_BASE_S": str(FAST["retry_base_s"]),
        "SKYQA_BUS__RETRY_MAX_S": str(FAST["retry_max_s"]),
        "SKYQA_STORE__BACKEND": "local",
        "SKYQA_STORE__LOCAL_ROOT": str(tmp_path / "store"),
        "SKYQA_HTTP__PORT": "0",
        "SKYQA_LOG_LEVEL": "WARNING",
        "SKYQA_EVALUATION__CACHE_DIR": str(tmp_path / "eval-cache"),
    }
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
