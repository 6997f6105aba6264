"""Shared fixtures. Servers are real processes on loopback: nats-server and SeaweedFS S3."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from demo_runs import ARGS, DemoRun, skyqa
from skyqa.servers import NatsServer, SeaweedS3

ROOT = Path(__file__).resolve().parent.parent
DEMO_RUNS_TIMEOUT = 2000  # seconds: two demo runs (900 s hang guard each) and the test itself


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The directory decides the marker, so a test can never run unmarked.
    for item in items:
        kind = Path(str(item.fspath)).relative_to(ROOT / "tests").parts[0]
        if kind in ("unit", "integration", "e2e"):
            item.add_marker(getattr(pytest.mark, kind))
        # Whichever test first asks for the shared demo runs pays for both in its setup, and
        # pytest-timeout counts setup: two demos of flyable (retimed) missions need more than
        # the 300 s default on a 2-core machine. A hang guard, not a speed assertion.
        if "demo_runs" in getattr(item, "fixturenames", ()) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEMO_RUNS_TIMEOUT))


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


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> list[DemoRun]:
    """Two `skyqa demo` runs of one scene, config and seed in fresh data folders (the second
    proves determinism), shared by the end-to-end tests. A test that changes a run's files
    works on a copy."""
    runs = []
    for i in range(2):
        data = tmp_path_factory.mktemp(f"demo{i}")
        result = skyqa("demo", "--data-dir", str(data), *ARGS)
        assert result.returncode == 0, result.stderr[-2000:]
        assert re.search(r"dashboard +http://127\.0\.0\.1:\d+/#run=\S+", result.stderr), result.stderr[:2000]
        assert re.search(r"workbench +http://127\.0\.0\.1:\d+/workbench#run=\S+", result.stderr)
        runs.append(DemoRun(data, result.stdout, result.stderr))
    return runs
