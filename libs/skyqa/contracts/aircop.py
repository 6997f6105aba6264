"""AirCopBench-style UAV groups: several UAVs photograph one shared area at the same moment.

``group_plan.json`` is what the mission planner decided (the area, each UAV's pose, the objects
in the area); ``final_task/group_task.json`` adds what the renderer measured of every object in
every UAV's view. Object ids are the fused (and rendered) instance ids.
"""

from __future__ import annotations

from skyqa.contracts.base import Contract


class GroupObject(Contract):
    instance_id: int
    class_name: str
    category: str
    center: list[float]  # box centre x, y, z (m)
    size: list[float]  # box size x, y, z (m)
    yaw_deg: float


class GroupUav(Contract):
    uav: str  # "UAV1", "UAV2", ...
    pose: list[float]  # x, y, z, yaw, pitch, roll (degrees)
    distance_m: float  # horizontal distance to the area's centre
    altitude_m: float  # above the area's centre on the ground


class GroupPlan(Contract):
    scene_id: str
    group_id: str
    center: list[float]  # the shared area's centre on the ground
    radius_m: float  # objects whose centre lies this close (horizontally) belong to the area
    uavs: list[GroupUav]
    objects: list[GroupObject]
    width: int
    height: int
    fov_deg: float
    seed: int
    attempts: int  # pose draws it took


class ObjectView(Contract):
    """One object in one UAV's view, as the renderer measured it."""

    instance_id: int
    in_frame: float  # share of its box-surface samples that project inside the image
    visible_ratio: float  # share of its box-surface samples seen (its far side never is)
    occluded: float  # of its in-frame samples facing the camera, the share hidden by something else
    occluder_instance_id: int  # what hides them most (0: nothing)
    pixels: int  # its pixels in the segmentation
    bbox_xyxy_norm: list[float]  # from the segmentation; zeros when it has no pixels


class GroupTask(GroupPlan):
    images: list[str]  # per UAV, relative to the group's final_task folder
    segmentation: list[str]
    views: list[list[ObjectView]]  # per UAV (in ``uavs`` order), per object (in ``objects`` order)


class GroupIndexRow(Contract):
    group_id: str
    size: int
    task: str  # its final_task/group_task.json


class RejectedGroup(Contract):
    group_id: str
    size: int
    reason: str
