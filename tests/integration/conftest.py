from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from skyqa import scan
from skyqa.blob import S3BlobStore
from skyqa.bus import Bus
from skyqa.servers import NatsServer, SeaweedS3
from skyqa.settings import BusSettings, Settings
from skyqa.v1 import scan_pb2


@pytest.fixture
def bus_settings(nats_server: NatsServer) -> BusSettings:
    # short timings so retries and redeliveries happen within a test
    return BusSettings(
        nats_url=nats_server.url,
        ack_wait_s=3.0,
        max_deliver=3,
        retry_base_s=0.2,
        retry_max_s=1.0,
        fetch_timeout_s=0.5,
    )


@pytest.fixture
def settings(bus_settings: BusSettings) -> Settings:
    return Settings(bus=bus_settings, http={"port": 0})


@pytest.fixture
async def bus(bus_settings: BusSettings) -> AsyncIterator[Bus]:
    b = Bus(bus_settings, "test")
    await b.connect()
    await b.ensure_streams()
    yield b
    await b.stop()


@pytest.fixture
def s3_store(s3_server: SeaweedS3, unique: str) -> Iterator[S3BlobStore]:
    return S3BlobStore(
        s3_server.endpoint,
        s3_server.access_key,
        s3_server.secret_key,
        f"skyqa-{unique}",
        create_bucket=True,
    )


def small_scan(run_id: str, **changes: float) -> scan_pb2.ScanRequest:
    req = scan_pb2.ScanRequest(run_id=run_id, scene_id="tiny_town", poses_per_job=3)
    req.bound.xmin, req.bound.xmax, req.bound.ymin, req.bound.ymax, req.bound.zmin, req.bound.zmax = (
        -50, 50, -50, 50, 0, 80,
    )  # fmt: skip
    req.spacing_x_m = req.spacing_y_m = 25.0
    req.altitudes_m.append(45.0)
    req.camera.width, req.camera.height = 160, 120
    req.lidar.channels, req.lidar.horizontal_samples = 48, 1024
    req.landmark_count = 3
    req.video.width, req.video.height = 160, 120
    full = scan.apply_defaults(req)
    for k, v in changes.items():
        setattr(full.fusion, k, v)
    return full


class Probe:
    """A test-side bus connection that records messages on subjects and waits for them."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    async def collect(self, subject: str, message_type: type[Any]) -> list[Any]:
        out: list[Any] = []

        async def on_msg(msg: Any) -> None:
            out.append(message_type.FromString(msg.data))

        assert self.bus.nc is not None
        await self.bus.nc.subscribe(subject, cb=on_msg)
        return out

    @staticmethod
    async def first(items: list[Any], predicate: Callable[[Any], bool], timeout: float = 20.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for item in items:
                if predicate(item):
                    return item
            await asyncio.sleep(0.05)
        raise AssertionError("no matching message arrived")


@pytest.fixture
async def probe(bus_settings: BusSettings) -> AsyncIterator[Probe]:
    b = Bus(bus_settings, "probe")
    await b.connect()
    yield Probe(b)
    await b.stop()
