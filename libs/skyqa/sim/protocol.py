"""The simulator interface every capture or render path depends on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from skyqa.sim.camera import Intrinsics, Pose
from skyqa.sim.classes import SemanticClass


@dataclass(frozen=True)
class CameraSpec:
    width: int
    height: int
    fov_deg: float

    @property
    def intrinsics(self) -> Intrinsics:
        return Intrinsics.from_fov(self.width, self.height, self.fov_deg)


@dataclass(frozen=True)
class LidarSpec:
    channels: int = 32
    vfov_upper_deg: float = 15.0
    vfov_lower_deg: float = -45.0
    horizontal_samples: int = 1024
    range_m: float = 120.0
    mount_pitch_deg: tuple[float, ...] = (0.0,)

    def validate(self) -> None:
        if not 1 <= self.channels <= 256:
            raise ValueError(f"lidar channels must be 1..256, got {self.channels}")
        if not 8 <= self.horizontal_samples <= 8192:
            raise ValueError(f"lidar horizontal samples must be 8..8192, got {self.horizontal_samples}")
        if not -90.0 <= self.vfov_lower_deg < self.vfov_upper_deg <= 90.0:
            raise ValueError("lidar vertical FOV needs -90 <= lower < upper <= 90 degrees")
        if not 0.0 < self.range_m <= 2000.0:
            raise ValueError(f"lidar range must be within (0, 2000] m, got {self.range_m}")
        if not self.mount_pitch_deg:
            raise ValueError("lidar needs at least one mount")


@dataclass
class Frame:
    """One camera capture. ``depth`` is planar depth in metres (inf where nothing was hit)."""

    rgb: NDArray[np.uint8]  # (H, W, 3)
    semantic: NDArray[np.uint16]  # (H, W) simulator class id, 0 = sky / unlabelled
    instance: NDArray[np.uint32]  # (H, W) instance id, 0 = none
    depth: NDArray[np.float32]  # (H, W)
    pose: Pose
    intrinsics: Intrinsics


@dataclass
class LidarScan:
    """Labelled LiDAR returns in the ENU world frame."""

    points: NDArray[np.float32]  # (N, 3)
    semantic: NDArray[np.uint16]  # (N,)
    instance: NDArray[np.uint32]  # (N,)
    pose: Pose


class Simulator(Protocol):
    scene_id: str
    backend: str

    def classes(self) -> dict[int, SemanticClass]: ...

    def extent(self) -> tuple[float, float, float, float]: ...

    def render(self, pose: Pose, camera: CameraSpec) -> Frame: ...

    def lidar(self, pose: Pose, spec: LidarSpec) -> LidarScan: ...

    def close(self) -> None: ...


@runtime_checkable
class RowRenderer(Protocol):
    """A simulator that renders a band of rows of a frame (the built-in one): what lets an
    ultra-resolution still render without holding its whole depth and label buffers."""

    def render_rows(self, pose: Pose, camera: CameraSpec, first: int, stop: int) -> Frame: ...
