"""A small collected-landmarks document for review tests (unit and integration)."""

from __future__ import annotations

from skyqa.contracts import (
    Bbox3D,
    CameraPose,
    CollectSummary,
    InstancesFile,
    LandmarkInstance,
    RgbView,
)

VIEW_KEY = "runs/r1/scene_data/s/landmarks_raw/4_3/view_00_front.jpg"


def landmarks() -> InstancesFile:
    view = RgbView(
        view_id="view_00_front", path=VIEW_KEY, segmentation_path="p/0.png", mode="orbit",
        label="front", view_direction="front", yaw_deg=0, pitch_deg=-20, pitch_offset_deg=0,
        camera=CameraPose(x=0, y=0, z=10, yaw_deg=0, pitch_deg=-20), bbox_2d_xyxy=[1, 1, 5, 5],
        bbox_2d_xywh=[1, 1, 4, 4], bbox_2d_image_size=[10, 10], bbox_2d_valid=True, visible_pixels=10,
        visible_ratio=0.5, rendered_instance_id=3, is_valid=True,
    )  # fmt: skip
    lm = LandmarkInstance(
        instance_id="4_3", class_id=4, instance_numeric_id=3, class_name="house", center_3d=[0, 0, 0],
        bbox_3d=Bbox3D(min=[0, 0, 0], max=[1, 1, 1], size=[1, 1, 1], yaw_deg=0), point_count=50,
        rgb_views=[view],
    )  # fmt: skip
    twin = lm.model_copy(update={"instance_id": "4_7", "instance_numeric_id": 7})
    other = lm.model_copy(update={"instance_id": "5_1", "class_id": 5, "class_name": "tree"})
    summary = CollectSummary(
        input_points=1,
        valid_points=1,
        candidate_pairs=3,
        dropped_small_instances=0,
        dropped_view_insufficient=0,
        instances=3,
    )
    return InstancesFile(
        scene_id="s", source_pcd="x.pcd", filters={}, summary=summary, instances=[lm, twin, other]
    )
