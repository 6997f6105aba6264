from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from skyqa.blob import S3BlobStore
from skyqa.bus import Bus
from skyqa.servers import NatsServer, SeaweedS3
from skyqa.settings import BusSettings, Settings
from stage_helpers import Probe


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
def s3_store(s3_server: SeaweedS3, unique: str) -> S3BlobStore:
    return S3BlobStore(
        s3_server.endpoint,
        s3_server.access_key,
        s3_server.secret_key,
        f"skyqa-{unique}",
        create_bucket=True,
    )


@pytest.fixture
async def probe(bus_settings: BusSettings) -> AsyncIterator[Probe]:
    b = Bus(bus_settings, "probe")
    await b.connect()
    yield Probe(b)
    await b.stop()
