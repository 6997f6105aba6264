"""Gateway wiring: the API, the dashboard page and the dead-letter index on one service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import Gauge
from skyqa.blob import BlobStore
from skyqa.runtime import Service, Settings
from skyqa.runtime.pages import mount_page

from services.gateway.api import mount_api
from services.gateway.deadletters import DeadLetterLog
from services.gateway.readers import guard_reads
from services.gateway.sessions import BUCKET, SESSION_S, SessionBook
from services.gateway.workbench import mount_workbench

NAME = "gateway"
HERE = Path(__file__).parent


async def setup(svc: Service, dead: DeadLetterLog) -> None:
    await dead.follow(svc.bus.js)
    cfg = svc.settings.gateway
    book = SessionBook(await svc.bus.kv(BUCKET, ttl_s=SESSION_S))
    guard_reads(svc.app, cfg, book)
    serve_file = mount_api(svc, dead)

    # connect-src 'self' covers fetch and the EventSource of /v1/runs/<run>/events
    assets = [HERE / "dashboard.js", HERE / "dashboard.css", HERE / "signin.js"]
    mount_page(svc.app, "/", "/static", HERE / "dashboard.html", assets, img_src="'self'")
    mount_workbench(svc, book, serve_file)

    @svc.app.get("/v1/info", tags=["service"])
    async def info() -> dict[str, Any]:
        """What the dashboard needs to know: where the review web is, whether writes are enabled."""
        return {
            "service": NAME,
            "review_url": cfg.review_url,
            "writes_enabled": bool(cfg.token.get_secret_value()),
            "reads_need_token": bool(cfg.read_token.get_secret_value()),
            "store": svc.store.describe(),
        }


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    dead = DeadLetterLog()

    async def wire(svc: Service) -> None:
        await setup(svc, dead)

    svc = Service(NAME, settings, wire, store=store)
    Gauge(
        "skyqa_dead_letters_retained",
        "Dead-lettered messages the DLQ stream holds (as replayed by the gateway).",
        registry=svc.metrics.registry,
    ).set_function(lambda: dead.total)
    return svc
