"""Stage-1 fusion handoff: instance table and ``<scene>.meta.json``."""

from __future__ import annotations

from skyqa.contracts.base import Contract


class ClassEntry(Contract):
    class_id: int  # compact id in the fused cloud (0 = unlabelled)
    semantic_raw: int  # id in the simulator's segmentation
    name: str
    category: str
    points: int


class InstanceEntry(Contract):
    instance_id: int
    class_id: int
    class_name: str
    category: str
    center: list[float]
    aabb_min: list[float]
    aabb_max: list[float]
    size: list[float]
    yaw_deg: float
    point_count: int


class InstanceTable(Contract):
    scene_id: str
    coordinate: str = "ENU"
    unit: str = "meter"
    instance_source: str
    classes: list[ClassEntry]
    instances: list[InstanceEntry]


class FusionMeta(Contract):
    scene_id: str
    engine: str
    run_id: str
    frames: int
    raw_points: int
    dedup_points: int
    dedup_ratio: float
    voxel_size: float
    dedup_enabled: bool
    fuse_strategy: str
    coverage_ratio: float
    hole_ratio: float
    coverage_grid_m: float
    instance_count: int
    semantic_points: int
    bounds_min: list[float]
    bounds_max: list[float]
    outputs: dict[str, str]
