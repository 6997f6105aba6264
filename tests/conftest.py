"""Shared fixtures. Servers are real processes on loopback: nats-server and SeaweedFS S3."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from skyqa.servers import NatsServer, SeaweedS3

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The directory decides the marker, so a test can never run unmarked.
    for item in items:
        kind = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if kind in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, kind))


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    server = SeaweedS3(tmp_path_factory.mktemp("weed")).start()
    yield server
    server.stop()


@pytest.fixture
def unique() -> str:
    """A fresh token for subjects, durables, buckets and run ids, so tests never collide."""
    return uuid.uuid4().hex[:10]
