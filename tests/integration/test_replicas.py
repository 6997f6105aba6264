"""Replicas as separate ``skyqa serve`` processes, as ``docker compose --scale`` runs them: they
bind one durable consumer, so every job is done once, by whichever replica is free."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import nats
import pytest
from nats.aio.msg import Msg
from skyqa.bus import Bus, topology
from skyqa.servers import NatsServer, free_port
from skyqa.settings import BusSettings
from skyqa.v1 import common_pb2, render_pb2

from services.fleet import Fleet

pytestmark = pytest.mark.integration

JOBS = 8
REQUESTER = "replica-test"


def job(i: int) -> render_pb2.RenderJob:
    out = render_pb2.RenderJob(
        run_id="replicas",
        job_id=f"j{i}",
        scene_id="tiny_town",
        backend="builtin",
        width=320,
        height=240,
        fov_deg=90,
        jpeg_quality=80,
        modalities=["rgb", "segmentation"],
        output_prefix=f"runs/replicas/views/j{i}",
        requester=REQUESTER,
        correlation=f"j{i}",
    )
    for v in range(2):
        out.views.add(
            view_id=f"v{v}", pose=common_pb2.Pose(x=-40 + 10 * i, y=-30, z=40, yaw_deg=90 * v, pitch_deg=-30)
        )
    return out


async def frames_rendered(http: httpx.AsyncClient, port: int) -> float:
    text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    found = re.search(r'^skyqa_frames_rendered_total\{service="renderer"\} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


async def test_two_renderer_processes_share_the_render_jobs(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    ports = [free_port(), free_port()]
    env = {
        "SKYQA_BUS__NATS_URL": server.url,
        "SKYQA_STORE__BACKEND": "local",
        "SKYQA_STORE__LOCAL_ROOT": str(tmp_path / "store"),
        "SKYQA_LOG_LEVEL": "WARNING",
        # as compose deploys the renderer: one core, one job at a time per replica
        "SKYQA_RENDER_THREADS": "1",
        "SKYQA_CONCURRENCY": "1",
    }
    fleet = Fleet(
        env,
        tmp_path / "logs",
        services=["renderer"],
        replicas={"renderer": 2},
        per_service={
            "renderer": {"SKYQA_HTTP__PORT": str(ports[0])},
            "renderer#2": {"SKYQA_HTTP__PORT": str(ports[1])},
        },
    )
    assert fleet.names == ["renderer", "renderer#2"]
    done: list[render_pb2.RenderDone] = []
    nc = await nats.connect(server.url)
    bus = Bus(BusSettings(nats_url=server.url), "test")
    try:
        fleet.start()
        async with httpx.AsyncClient(timeout=2) as http:
            for port in ports:
                for _ in range(240):
                    try:
                        if (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.25)
                else:
                    raise AssertionError(
                        f"replica on {port} never became ready: {fleet.log('renderer#2')[-800:]}"
                    )

            async def on_done(msg: Msg) -> None:
                done.append(render_pb2.RenderDone.FromString(msg.data))

            await nc.subscribe(topology.render_done_subject(REQUESTER), cb=on_done)
            await bus.connect()
            for i in range(JOBS):
                await bus.publish(topology.RENDER_JOB, job(i), msg_id=f"replicas-{i}", run_id="replicas")
            for _ in range(600):
                if len(done) >= JOBS:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # a duplicate would have arrived by now
            per_replica = [await frames_rendered(http, port) for port in ports]
        assert sorted(d.job_id for d in done) == sorted(f"j{i}" for i in range(JOBS)), [
            d.job_id for d in done
        ]
        assert sum(per_replica) == 2 * JOBS and min(per_replica) > 0, per_replica
        assert all(fleet.alive().values())
    finally:
        await bus.stop()
        await nc.close()
        fleet.stop()
        server.stop()
