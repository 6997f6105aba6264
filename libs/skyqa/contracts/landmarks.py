"""Stage-2 handoff: ``landmarks_raw/<scene>.instances.json`` with UAV-DualCog's field names.

Fields UAV-DualCog does not have are additions, never renames: per-view camera poses,
visible pixel counts and ratios, and the rendered instance id each box was measured on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from skyqa.contracts.base import Contract

RING = ("front", "front_right", "right", "back_right", "back", "back_left", "left", "front_left")
# yaw offset of the camera's viewing direction relative to the landmark's PCA yaw
RING_OFFSETS = {
    "front": 0.0,
    "front_right": -45.0,
    "right": -90.0,
    "back_right": -135.0,
    "back": 180.0,
    "back_left": 135.0,
    "left": 90.0,
    "front_left": 45.0,
}
CARDINALS = ("front", "back", "left", "right")
DIAGONALS = ("front_left", "front_right", "back_left", "back_right")


class Bbox3D(Contract):
    min: list[float]
    max: list[float]
    size: list[float]
    yaw_deg: float
    # skyqa's own: length and width along and across yaw, and height above the scan's ground
    # (the axis-aligned size of a car parked at 45 degrees is a square)
    extent: list[float] = Field(default_factory=list)


class CameraPose(Contract):
    x: float
    y: float
    z: float
    yaw_deg: float
    pitch_deg: float
    roll_deg: float = 0.0


class RgbView(Contract):
    view_id: str
    path: str
    segmentation_path: str
    mode: Literal["orbit", "topdown"]
    label: str
    view_direction: str
    yaw_deg: float
    pitch_deg: float
    pitch_offset_deg: float
    camera: CameraPose
    bbox_2d_xyxy: list[int]
    bbox_2d_xywh: list[int]
    bbox_2d_image_size: list[int]
    bbox_2d_valid: bool
    visible_pixels: int
    visible_ratio: float
    rendered_instance_id: int
    is_valid: bool
    invalid_reason: str = ""
    is_query_view: bool = False  # the reviewer's main view (UAV-DualCog's query view)


class LandmarkInstance(Contract):
    instance_id: str  # "<class_id>_<instance_numeric_id>"
    class_id: int
    instance_numeric_id: int
    class_name: str  # weak hint from segmentation; reviewers may override
    center_3d: list[float]
    bbox_3d: Bbox3D
    point_count: int
    preview_image: str = ""
    pcd_views: list[dict[str, object]] = Field(default_factory=list)
    rgb_views: list[RgbView]


class CollectSummary(Contract):
    input_points: int
    valid_points: int
    candidate_pairs: int
    dropped_small_instances: int
    dropped_view_insufficient: int
    instances: int


class InstancesFile(Contract):
    scene_id: str
    source_pcd: str
    coordinate: str = "ENU"
    unit: str = "meter"
    filters: dict[str, object]
    summary: CollectSummary
    instances: list[LandmarkInstance]
