"""The CLI as the end-to-end tests run it, and what a demo run leaves (tests/conftest.py runs
the demo the end-to-end tests share)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ARGS = [
    "--scene",
    "tiny_town",
    "--bound",
    "-50,50,-50,50,0,80",
    "--spacing",
    "25",
    "--altitude",
    "45",
    "--landmarks",
    "3",
    "--video",
    "160x120",
    "--navigation",
    # two questions per type and mission: one route mission asks Progress Evaluation only with
    # two rows of one stratum (its steps balanced per route and clip length)
    "2,1,2",
    "--reasoning",
    "1,1",
    "--surveys",
    "1,2048x1536",
]


@dataclass(frozen=True)
class DemoRun:
    data: Path  # the --data-dir: nats/ and store/
    stdout: str
    stderr: str


def skyqa(*args: str, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYQA_")}
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )


def outputs(stdout: str) -> dict[str, Path]:
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("/"):
            found[parts[0]] = Path(parts[1])
    return found
