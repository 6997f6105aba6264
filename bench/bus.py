"""Bus overhead against a real local nats-server: publish rate, consume rate and per-message
latency (publish -> handler entry) with a no-op handler, through the same ``Bus`` the services
use (JetStream publish with dedupe ids, durable pull consumer, explicit ack)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np
from skyqa.bus import Bus, Delivery, topology
from skyqa.servers import NatsServer
from skyqa.settings import BusSettings
from skyqa.v1 import common_pb2


async def _run(url: str, messages: int, concurrency: int) -> dict[str, float]:
    settings = BusSettings(nats_url=url, fetch_timeout_s=0.2)
    bus = Bus(settings, "bench")
    await bus.connect()
    await bus.ensure_streams()
    spec = topology.ConsumerSpec("bench-noop", topology.EVENTS_STREAM, "skyqa.v1.eval.bench")
    latencies: list[float] = []
    done = asyncio.Event()

    async def noop(msg: common_pb2.Progress, d: Delivery) -> None:
        latencies.append(time.perf_counter() - float(msg.message))
        if len(latencies) == messages:
            done.set()

    bus.handle(spec, common_pb2.Progress, noop, stage="bench", concurrency=concurrency)
    await bus.start()
    start = time.perf_counter()
    for i in range(messages):
        await bus.publish(
            spec.filter_subject,
            common_pb2.Progress(message=repr(time.perf_counter())),
            msg_id=f"bench-{i}",
            run_id="bench",
        )
    published = time.perf_counter() - start
    await asyncio.wait_for(done.wait(), 120)
    consumed = time.perf_counter() - start
    await bus.stop()
    lat = np.array(latencies) * 1000
    return {
        "messages": messages,
        "handler_concurrency": concurrency,
        "publish_per_s": messages / published,
        "consume_per_s": messages / consumed,
        "latency_ms_p50": float(np.percentile(lat, 50)),
        "latency_ms_p99": float(np.percentile(lat, 99)),
    }


def bus_overhead(messages: int = 2000, concurrency: int = 8) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(Path(tmp) / "nats").start()
        try:
            return asyncio.run(_run(server.url, messages, concurrency))
        finally:
            server.stop()
