"""Helpers for the integration tests that drive stages over the bus: a small scan request and
a probe that records what arrives on subjects. A module of its own (not conftest.py) so that test
modules import them by a name that pytest and mypy resolve alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from skyqa import scan
from skyqa.bus import Bus
from skyqa.v1 import scan_pb2


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
    req.navigation.goals, req.navigation.routes = 1, 1
    # its one route mission asks Progress Evaluation only with two rows of one stratum (the
    # steps are balanced per route and clip length)
    req.navigation.per_type = 2
    req.reasoning.per_split, req.reasoning.random_walks = 1, 1
    req.reasoning.width, req.reasoning.height = 96, 64
    # one survey of tiny_town at a size that renders in a second, its cars still ~40 px long
    req.surveys.count = 1
    req.surveys.width, req.surveys.height, req.surveys.gsd_m = 1024, 768, 0.1
    # landmark views checked at a quarter of the pixels they ship at, as a release checks 4K
    # ones at 1024x768: the QA stage renders the reviewed landmarks' views again at 640x480
    req.stills.width, req.stills.height, req.stills.working_width, req.stills.working_height = (
        640,
        480,
        320,
        240,
    )
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
