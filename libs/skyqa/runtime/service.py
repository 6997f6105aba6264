"""The service runtime: bus + store + handlers + FastAPI health and metrics endpoints."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from skyqa.blob import BlobStore, open_store
from skyqa.bus import Bus, FanInTracker, JsonKV, topology
from skyqa.keys import is_valid_id
from skyqa.runtime.metrics import ServiceMetrics
from skyqa.runtime.progress import ProgressReporter
from skyqa.settings import Settings
from skyqa.v1 import common_pb2

log = logging.getLogger("skyqa.service")

Setup = Callable[["Service"], Awaitable[None]]


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers.

    ``Server.serve`` replaces the SIGINT/SIGTERM handlers with its own while it runs and
    re-raises the signal when it stops. With several services in one process (``skyqa up``),
    each nested over the launcher's handler, a signal reached one server instead of the launcher
    and shutdown depended on the order the servers stopped in. The owner of the process
    (``Service.run`` or the launcher) handles signals and stops the servers itself.
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Service:
    """One skyqa service: wire handlers in ``setup`` and call :meth:`run` or :meth:`start`.

    Liveness (``/healthz``) only says the event loop and fetch loops tick; readiness
    (``/readyz``) checks the bus connection and the blob store, so an outage of a dependency
    takes the service out of rotation instead of restarting it.
    """

    def __init__(
        self,
        name: str,
        settings: Settings,
        setup: Setup,
        *,
        store: BlobStore | None = None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.metrics = ServiceMetrics(name)
        self.bus = Bus(settings.bus, name, self.metrics)
        self.store = store if store is not None else open_store(settings.store)
        self._setup = setup
        self.runs: JsonKV | None = None
        self.fanin: FanInTracker | None = None
        self.progress: ProgressReporter | None = None
        self.app = self._build_app()
        self._server: uvicorn.Server | None = None
        self._server_task: asyncio.Task[Any] | None = None
        self.port: int | None = None
        self._draining = False
        self.started_at = time.time()
        # service-specific objects set up in ``setup`` (e.g. for extra HTTP routes)
        self.state: dict[str, Any] = {}

    # -- HTTP -------------------------------------------------------------------------

    def _build_app(self) -> FastAPI:
        app = FastAPI(title=f"skyqa {self.name}", version="0.1.0")

        @app.exception_handler(RecursionError)
        async def too_deep(request: Request, exc: RecursionError) -> Response:
            # the JSON decoder recurses once per level: a deeply nested body is the client's fault
            return JSONResponse({"detail": "request nested too deeply"}, status_code=400)

        @app.get("/healthz")
        async def healthz() -> dict[str, Any]:
            return {"status": "ok", "service": self.name, "uptime_s": time.time() - self.started_at}

        @app.get("/readyz")
        async def readyz() -> Response:
            store_ok = await asyncio.to_thread(self.store.ping)
            checks = {
                "bus": self.bus.connected,
                "store": store_ok,
                "draining": self._draining,
            }
            ok = checks["bus"] and checks["store"] and not self._draining
            return JSONResponse({"ready": ok, "checks": checks}, status_code=200 if ok else 503)

        @app.get("/metrics")
        async def metrics() -> Response:
            return Response(generate_latest(self.metrics.registry), media_type=CONTENT_TYPE_LATEST)

        return app

    async def _serve_http(self) -> None:
        # uvicorn believes X-Forwarded-For from 127.0.0.1 unless told otherwise: then any local
        # client (or a proxy passing the header through) names its own address. Only the
        # proxies the operator names are believed; none by default.
        trusted = self.settings.gateway.forwarded_allow_ips.strip()
        config = uvicorn.Config(
            self.app,
            host=self.settings.http.host,
            port=self.settings.http.port,
            log_level="warning",
            lifespan="off",
            proxy_headers=bool(trusted),
            forwarded_allow_ips=trusted,
        )
        self._server = _QuietServer(config)
        self._server_task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._server_task.done():
                # uvicorn exits the process on a bind failure; turn that into an error
                with contextlib.suppress(SystemExit):
                    self._server_task.result()
                raise OSError(
                    f"{self.name}: cannot serve HTTP on {config.host}:{config.port} (address in use?)"
                )
            await asyncio.sleep(0.02)
        sock = self._server.servers[0].sockets[0]
        self.port = int(sock.getsockname()[1])

    # -- lifecycle --------------------------------------------------------------------

    async def start(self, http: bool = True) -> None:
        await self.bus.connect()
        await self.bus.ensure_streams()
        self.runs = await self.bus.kv(topology.RUNS_BUCKET)
        self.fanin = FanInTracker(await self.bus.kv(topology.FANIN_BUCKET))
        self.progress = ProgressReporter(self.bus, self.runs, self.name)
        self.bus.failure_hook = self._on_failure
        await self._setup(self)
        await self.bus.start()
        if http:
            await self._serve_http()
        log.info("%s started (store %s, http port %s)", self.name, self.store.describe(), self.port)

    async def _on_failure(self, event: common_pb2.ErrorEvent) -> None:
        # The run id comes from the decoded payload (never a header); a payload that did not
        # decode, or names no existing run, leaves every run as it is.
        if not (event.run_id and is_valid_id(event.run_id) and self.progress is not None):
            return
        message = f"{event.reason}: {event.message}"
        if not await self.progress.fail(event.run_id, event.stage, message):
            log.warning("dead letter on %s names run %r, which is not open", event.subject, event.run_id)

    async def stop(self) -> None:
        self._draining = True
        await self.bus.stop()
        if self._server is not None:
            self._server.should_exit = True
            if self._server_task is not None:
                with contextlib.suppress(Exception):
                    await self._server_task

    async def run(self) -> None:
        """Run until SIGINT/SIGTERM."""
        import signal

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        await stop.wait()
        await self.stop()

    def require(self) -> tuple[ProgressReporter, FanInTracker]:
        if self.progress is None or self.fanin is None:
            raise RuntimeError(f"{self.name} is not started")
        return self.progress, self.fanin
