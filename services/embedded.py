"""Embedded mode: a local nats-server, the local blob store and every service in one process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import nats.errors
from skyqa.blob import BlobStore, LocalBlobStore
from skyqa.bus import Bus, JsonKV, topology
from skyqa.contracts import RunState
from skyqa.runtime import Service, Settings
from skyqa.servers import NatsServer
from skyqa.settings import BusSettings
from skyqa.v1 import scan_pb2

from services.registry import SERVICES

log = logging.getLogger(__name__)


@dataclass
class Embedded:
    """Start with ``async with Embedded(data_dir) as env:``; ``env.nats_url`` is where to publish."""

    data_dir: Path
    settings: Settings = field(default_factory=Settings)
    nats_url: str | None = None  # use an existing server instead of starting one
    nats_port: int | None = None
    store: BlobStore | None = None
    services: list[str] = field(default_factory=lambda: list(SERVICES))
    http: bool = True
    running: list[Service] = field(default_factory=list)
    nats_server: NatsServer | None = None

    async def __aenter__(self) -> Embedded:
        self.data_dir = Path(self.data_dir)
        settings = self.settings.model_copy(deep=True)
        try:
            if self.nats_url is None:
                self.nats_server = NatsServer(self.data_dir / "nats", port=self.nats_port)
                # spawned on this thread so ``proc`` is set before the first await: a start-up
                # cancelled by a signal then always finds the server to stop
                self.nats_server.spawn()
                await asyncio.to_thread(self.nats_server.wait_ready)
                self.nats_url = self.nats_server.url
            if self.store is None:
                self.store = LocalBlobStore(self.data_dir / "store")
            settings.bus.nats_url = self.nats_url
            if "cache_dir" not in settings.evaluation.model_fields_set:
                # replies kept with the run's data, not in whatever directory the run started from
                settings.evaluation.cache_dir = self.data_dir / "eval-cache"
            settings.http.port = 0
            for name in self.services:
                svc = SERVICES[name](settings, self.store)
                # listed before it starts, so a start-up cut short still stops its connection
                self.running.append(svc)
                await svc.start(http=self.http)
        except BaseException:
            await self.close()
            raise
        landmark = self.service("landmark")
        if landmark is not None and landmark.port and not settings.gateway.review_url:
            # every service shares ``settings``: the gateway's dashboard links the review web
            settings.gateway.review_url = f"http://127.0.0.1:{landmark.port}/review"
        return self

    def service(self, name: str) -> Service | None:
        return next((s for s in self.running if s.name == name), None)

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop the services, newest first, then nats-server; safe to call more than once."""
        while self.running:
            with contextlib.suppress(Exception):
                await self.running.pop().stop()
        if self.nats_server is not None:
            await asyncio.to_thread(self.nats_server.stop)


@contextlib.asynccontextmanager
async def client_bus(nats_url: str) -> AsyncIterator[Bus]:
    """A short-lived bus connection for CLI commands."""
    bus = Bus(BusSettings(nats_url=nats_url, connect_timeout_s=5), "skyqa-cli")
    await bus.connect(retry_forever=False)
    try:
        yield bus
    finally:
        await bus.stop()


async def publish_scan(nats_url: str, req: scan_pb2.ScanRequest) -> None:
    async with client_bus(nats_url) as bus:
        await bus.ensure_streams()
        await bus.publish(topology.SCAN_REQUESTED, req, msg_id=f"scan:{req.run_id}", run_id=req.run_id)


async def _read(runs: JsonKV, run_id: str) -> RunState | None:
    doc, _ = await runs.get(run_id)
    return RunState.model_validate(doc) if doc else None


async def read_run(nats_url: str, run_id: str) -> RunState | None:
    async with client_bus(nats_url) as bus:
        return await _read(await bus.kv(topology.RUNS_BUCKET), run_id)


async def _poll(
    runs: JsonKV,
    run_id: str,
    final_stage: str,
    deadline: float,
    on_state: Callable[[RunState], None] | None,
) -> RunState | None:
    """The run's state once ``final_stage`` completed or the run failed; None at the deadline."""
    while time.monotonic() < deadline:
        state = await _read(runs, run_id)
        if state is not None:
            if on_state is not None:
                on_state(state)
            stage = state.stages.get(final_stage)
            if state.status == "failed" or (stage is not None and stage.status == "completed"):
                return state
        await asyncio.sleep(0.25)
    return None


async def wait_for_run(
    nats_url: str,
    run_id: str,
    final_stage: str,
    timeout_s: float,
    on_state: Callable[[RunState], None] | None = None,
) -> RunState:
    """Poll the run state in KV until ``final_stage`` completes or the run fails. A lost
    connection (a stale ping on a loaded machine, a restarted server) ends one client, not the
    wait: the run goes on in the services, so the follower connects again until the deadline
    (a 40-landmark demo stopped following after its QA stage on one dropped connection)."""
    deadline = time.monotonic() + timeout_s
    followed = False  # a server never reached is a wrong address: that fails at once
    while time.monotonic() < deadline:
        try:
            async with client_bus(nats_url) as bus:
                runs = await bus.kv(topology.RUNS_BUCKET)
                followed = True
                state = await _poll(runs, run_id, final_stage, deadline, on_state)
                if state is not None:
                    return state
        except (nats.errors.Error, ConnectionError) as exc:
            if not followed:
                raise
            log.warning("lost NATS while following run %s (%s); connecting again", run_id, exc)
            await asyncio.sleep(1.0)
    raise TimeoutError(f"run {run_id} did not finish within {timeout_s:.0f} s")
