"""Renderer replicas as separate processes (``skyqa serve renderer``, the container command)
sharing one durable consumer on a real nats-server: throughput with 1 and 2 replicas, the
cores they keep busy, and each replica's peak resident memory (VmHWM)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from skyqa.bus import Bus, topology
from skyqa.contracts import RunState
from skyqa.servers import NatsServer
from skyqa.settings import BusSettings
from skyqa.v1 import common_pb2, render_pb2, scan_pb2

REQUESTER = "bench"


def _job(tag: str, i: int, width: int, height: int) -> render_pb2.RenderJob:
    job = render_pb2.RenderJob(
        run_id=f"bench-{tag}",
        job_id=f"j{i}",
        scene_id="demo_city",
        backend="builtin",
        width=width,
        height=height,
        fov_deg=90,
        jpeg_quality=90,
        output_prefix=f"runs/bench-{tag}/views/j{i}",
        requester=REQUESTER,
        correlation=f"j{i}",
    )
    job.modalities.extend(["rgb", "segmentation", "depth"])
    for v in range(2):
        yaw = (i * 37 + v * 90) % 360
        job.views.add(
            view_id=f"v{v}", pose=common_pb2.Pose(x=-60 + 8 * i, y=-40, z=45, yaw_deg=yaw, pitch_deg=-30)
        )
    return job


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _render(url: str, tag: str, jobs: int, width: int, height: int) -> float:
    """Publish ``jobs`` render jobs and wait for every done event; seconds taken."""
    bus = Bus(BusSettings(nats_url=url), "bench")
    await bus.connect()
    await bus.ensure_streams()  # the replicas may still be starting
    nc = await nats.connect(url)
    seen: set[str] = set()
    all_done = asyncio.Event()

    async def on_done(msg: nats.aio.msg.Msg) -> None:
        done = render_pb2.RenderDone.FromString(msg.data)
        if done.run_id == f"bench-{tag}":
            seen.add(done.job_id)
            if len(seen) == jobs:
                all_done.set()

    await nc.subscribe(topology.render_done_subject(REQUESTER), cb=on_done)
    start = time.perf_counter()
    for i in range(jobs):
        await bus.publish(
            topology.RENDER_JOB, _job(tag, i, width, height), msg_id=f"{tag}-{i}", run_id=f"bench-{tag}"
        )
    await asyncio.wait_for(all_done.wait(), 600)
    took = time.perf_counter() - start
    await nc.close()
    await bus.stop()
    return took


def renderer_scaling(jobs: int = 16, width: int = 1024, height: int = 768) -> dict[str, float]:
    out: dict[str, float] = {
        "jobs": jobs,
        "views_per_job": 2,
        "width": width,
        "height": height,
        "render_threads_per_replica": 1,
    }
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(Path(tmp) / "nats").start()
        try:
            for replicas in (1, 2):
                env = {
                    **os.environ,
                    "SKYQA_BUS__NATS_URL": server.url,
                    "SKYQA_STORE__BACKEND": "local",
                    "SKYQA_STORE__LOCAL_ROOT": str(Path(tmp) / "store"),
                    "SKYQA_HTTP__PORT": "0",
                    "SKYQA_CONCURRENCY": "1",
                    # one core per replica, as compose.yaml deploys them
                    "SKYQA_RENDER_THREADS": "1",
                    "SKYQA_LOG_LEVEL": "WARNING",
                }
                procs = [
                    subprocess.Popen(
                        [sys.executable, "-m", "services.cli", "serve", "renderer"],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                    for _ in range(replicas)
                ]
                try:
                    # warm-up: every replica builds the scene once before the clock starts
                    asyncio.run(_render(server.url, f"warm{replicas}", 3 * replicas, 64, 48))
                    cpu0 = sum(cpu_seconds(p.pid) for p in procs)
                    took = asyncio.run(_render(server.url, f"r{replicas}", jobs, width, height))
                    cpu = sum(cpu_seconds(p.pid) for p in procs) - cpu0
                    out[f"views_per_s_{replicas}_replicas"] = 2 * jobs / took
                    out[f"cores_busy_{replicas}_replicas"] = cpu / took
                    out[f"peak_rss_mb_{replicas}_replicas"] = max(peak_rss_mb(p.pid) for p in procs)
                finally:
                    for p in procs:
                        p.send_signal(signal.SIGTERM)
                    for p in procs:
                        p.wait(timeout=30)
        finally:
            server.stop()
    out["speedup_2_vs_1"] = out["views_per_s_2_replicas"] / out["views_per_s_1_replicas"]
    return out


@dataclass(frozen=True)
class FleetRun:
    state: RunState
    store: Path  # the local store's root (gone once the run's callback returns)
    peak_rss_mb: dict[str, int]
    cpu_s: dict[str, float]  # CPU seconds each service process used

    @property
    def wall_s(self) -> float:
        return max(st.finished_at for st in self.state.stages.values()) - self.state.created_at

    def stage_wall_s(self) -> dict[str, float]:
        return {
            name: round(st.finished_at - st.started_at, 1)
            for name, st in self.state.stages.items()
            if st.finished_at
        }

    def qc(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads((self.store / self.state.outputs["qc_report"]).read_text())
        return doc


def one_core_each(pids: list[int]) -> None:
    """Pin the i-th process (every thread of it, and the threads it starts later) to core i, as
    compose's ``cpus: 1.0`` gives each renderer replica one core's time."""
    cores = sorted(os.sched_getaffinity(0))
    for i, pid in enumerate(pids):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), {cores[i % len(cores)]})


def fleet_run(
    req: scan_pb2.ScanRequest,
    inspect: Callable[[FleetRun], dict[str, Any]],
    until: str = "",
    replicas: dict[str, int] | None = None,
    one_core: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Every service as its own ``skyqa serve`` process on one nats-server and one store, the
    scan run to the end (or to the end of stage ``until``); ``inspect`` reads the run (its
    store is then deleted). ``replicas`` scales services as ``docker compose --scale`` does;
    each replica of a service in ``one_core`` renders on one thread pinned to its own core."""
    from skyqa.runtime.progress import FINAL_STAGE

    from services.embedded import publish_scan, wait_for_run
    from services.fleet import Fleet

    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(Path(tmp) / "nats").start()
        env = {
            "SKYQA_BUS__NATS_URL": server.url,
            "SKYQA_STORE__BACKEND": "local",
            "SKYQA_STORE__LOCAL_ROOT": str(Path(tmp) / "store"),
            "SKYQA_HTTP__PORT": "0",
            "SKYQA_LOG_LEVEL": "WARNING",
            "SKYQA_EVALUATION__CACHE_DIR": str(Path(tmp) / "eval-cache"),
        }
        single = {"SKYQA_RENDER_THREADS": "1"}  # as compose deploys the renderer
        if until and until != FINAL_STAGE:  # nothing to evaluate: it would only take the cores
            replicas = {"evaluator": 0, **(replicas or {})}
        fleet = Fleet(env, Path(tmp) / "logs", per_service=dict.fromkeys(one_core, single), replicas=replicas)
        fleet.start()
        try:
            one_core_each([p.pid for name, p in fleet.procs.items() if name.partition("#")[0] in one_core])
            time.sleep(5)  # consumers are durable: a scan published early waits for them anyway
            asyncio.run(publish_scan(server.url, req))
            state = asyncio.run(wait_for_run(server.url, req.run_id, until or FINAL_STAGE, 7200))
            peaks = {name: round(peak_rss_mb(p.pid)) for name, p in fleet.procs.items()}
            cpu = {name: round(cpu_seconds(p.pid), 1) for name, p in fleet.procs.items()}
            return inspect(FleetRun(state, Path(tmp) / "store", peaks, cpu))
        finally:
            fleet.stop()
            server.stop()


def service_processes(scene: str = "tiny_town", landmarks: int = 3, video: str = "320x240") -> dict[str, Any]:
    """A preview scan through one process per service: wall time per stage and each service's
    peak resident memory."""
    from skyqa.scan_options import build_request

    def inspect(run: FleetRun) -> dict[str, Any]:
        released = int(run.qc()["funnel"]["released_landmarks"])
        return {
            "released_landmarks": released,
            "seconds_per_released_landmark": round(run.wall_s / max(1, released), 1),
            "scene": scene,
            "landmarks": landmarks,
            "video": video,
            "status": run.state.status,
            "wall_s": round(run.wall_s, 1),
            "stage_wall_s": run.stage_wall_s(),
            "peak_rss_mb": run.peak_rss_mb,
        }

    req = build_request(scene, "preview", None, None, None, None, 0, landmarks=landmarks, video=video)
    return fleet_run(req, inspect)
