"""Stage-1 capture handoff: rows of ``pcd_map/frames_manifest.jsonl`` (UAV-DualCog field names)."""

from __future__ import annotations

from typing import Literal

from skyqa.contracts.base import Contract


class PoseENU(Contract):
    x: float
    y: float
    z: float
    yaw: float
    pitch: float
    roll: float


class FrameRow(Contract):
    scene_id: str
    engine: str
    worker_id: int
    vehicle_or_actor: str
    frame_idx: int
    timestamp: float
    pose_enu: PoseENU
    rgb_path: str
    segmentation_path: str
    depth_path: str
    lidar_segmentation_path: str
    lidar_segmentation_count: int
    point_count: int
    point_source: Literal["lidar", "lidar_empty"]
    intrinsics: dict[str, float]


class SemanticClassRow(Contract):
    id: int
    name: str
    category: str
    stuff: bool


class SemanticClassTable(Contract):
    """``pcd_map/<scene>.classes.json``: the simulator's class table, so fusion needs no simulator."""

    scene_id: str
    backend: str
    classes: list[SemanticClassRow]
