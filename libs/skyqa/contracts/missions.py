"""Stage-3 handoff files under ``video_tasks/missions/<traj_id>/`` with UAV-DualCog's field names.

``composed_segments.json`` and ``constraint_report.json`` describe the planned mission;
``final_task/`` holds ``frames_manifest.json``, ``frame_index_map.json`` and ``task_data.json``
(schema ``stage3.v2``). ``frame_visibility.jsonl`` is the renderer's per-frame measurement that
task_data is built from (an addition). Times: frame ``f`` covers ``[f/fps, (f+1)/fps)``, so
interval ends are exclusive and behavior intervals tile ``[0, duration_sec]``.

One file for the whole mission tree (about 400 lines of field declarations): the models nest
into each other as the files do, and a reader comparing them with UAV-DualCog's schemas wants
them side by side.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from skyqa.contracts.aircop import GroupIndexRow, RejectedGroup
from skyqa.contracts.base import Contract
from skyqa.contracts.kinematics import KinematicsCheck as KinematicsCheck
from skyqa.contracts.navigation import RejectedNavigation
from skyqa.contracts.rsv import RejectedTrajectory, TrajectoryIndexRow
from skyqa.contracts.ultra import RejectedSurvey, SurveyIndexRow

TASK_SCHEMA_VERSION = "stage3.v2"
ParamValue = float | str


class RepairStats(Contract):
    repair_applied: bool
    lifted_points: int
    max_lift_m: float


class ObstacleAdaptation(Contract):
    checked: bool
    applied: bool
    collision_free: bool
    min_distance: float
    violation_count: int
    candidate_count: int
    cost: float
    extension_delta_m: float
    altitude_delta_m: float


class ElementInstance(Contract):
    element_instance_id: str
    element_class: str
    element_display_name: str
    description: str
    family: str
    camera_mode: str
    target_binding: str = "primary"
    target_instance_id: str
    params: dict[str, ParamValue]
    class_instance_index: int
    seed: int
    obstacle_adaptation: ObstacleAdaptation | None = None
    target_center_3d: list[float]
    target_bbox_3d: list[float]  # [0, 0, 0, sx, sy, sz, yaw]
    target_category: str
    target_description: str


class MissionSegment(Contract):
    segment_id: str
    element_instance_id: str
    element_class: str
    element_display_name: str
    target_instance_id: str
    target_binding: str = "primary"
    params: dict[str, ParamValue]
    start: list[float]
    end: list[float]
    num_points: int
    shared_start_with_previous: bool
    waypoint_start_idx: int
    waypoint_end_idx: int  # inclusive, into waypoints.npy
    projected_start: bool
    project_distance_m: float
    repair: RepairStats
    behavior_id: str
    event_id: str
    event_label: str
    mode_key: str
    mode_name: str
    target_class_name: str
    target_description: str


class SetInstance(Contract):
    set_id: str
    set_name: str
    set_scope: str = "single_landmark"
    landmark_order: list[str]
    allow_revisit: bool = False
    allow_interleave_repeat: bool = False
    max_total_elements: int
    element_template: list[str]


class MissionSummary(Contract):
    segment_count: int
    raw_points: int
    waypoints: int
    fps: float
    source_pose_fps: float
    base_pose_fps: float
    samples_per_segment: int
    duration_sec: float
    path_length_m: float


class MissionIdentity(Contract):
    scene_id: str
    traj_id: str
    mode: str = "single-landmark"
    task_group: str = "dual_awareness"
    task_family: str = "flight_mission"
    task_type: str  # set name
    task_subtype: str  # set id
    mission_kind: Literal["atomic", "composite"]
    task_difficulty: str
    task_difficulty_score: float
    instance_id: str
    rendered_instance_id: int
    secondary_instance_ids: list[str] = Field(default_factory=list)


class ComposedSegments(MissionIdentity):
    set_class: str
    set_instance: SetInstance
    element_instances: list[ElementInstance]
    element_plan: list[str]
    mode_sequence: list[str]
    event_sequence: list[str]
    behavior_sequence: list[str]
    seed: int
    attempt: int
    summary: MissionSummary
    segments: list[MissionSegment]


class CollisionCheck(Contract):
    collision_free: bool
    min_distance: float
    violation_count: int
    violations: list[dict[str, ParamValue]]


class RepairReport(Contract):
    repaired_segments: int
    lifted_points: int
    lifted_fraction: float
    max_lift_m: float


class Checks(Contract):
    kinematics: KinematicsCheck
    collision: CollisionCheck
    repair: RepairReport


class ConstraintReport(MissionIdentity):
    landmark_class_id: int
    landmark_class_name: str
    landmark_subcategory: str
    landmark_description: str
    landmark_center_3d: list[float]
    landmark_bbox_3d: list[float]
    event_count: int
    flight_description: str
    limits: dict[str, float]
    checks: Checks
    acceptance: dict[str, float]
    accepted: bool
    files: dict[str, str]
    summary: MissionSummary


class RejectedMission(Contract):
    """A row of ``video_tasks/rejected_missions.jsonl``: why no video was made."""

    traj_id: str
    instance_id: str
    set_name: str
    attempts: int
    reason: str


class FramesManifest(Contract):
    fps: float
    frame_count: int
    width: int
    height: int
    frames: list[str]


class FrameIndexRow(Contract):
    out_frame: int
    source_idx: int
    time_sec: float


class FrameIndexMap(Contract):
    fps: float
    frame_count: int
    frames: list[FrameIndexRow]


class TargetFrameStat(Contract):
    """One target in one frame, measured by the renderer."""

    instance_id: int
    is_visible: bool
    visible_ratio: float  # visible surface samples / all samples of the box surface
    visible_point_count: int
    target_inframe_point_count: int
    pixels: int  # pixels of the instance in the segmentation
    bbox_xyxy: list[int]  # from the segmentation; [0, 0, 0, 0] when absent
    # in-frame samples hidden behind something else (not the target's own far side), and the
    # instance id shown most often in their place (0: none)
    occluded_point_count: int = 0
    occluder_instance_id: int = 0
    sample_count: int = 0  # the box-surface samples measured (0 in rows written before it)


class FrameVisibility(Contract):
    frame: int
    time_sec: float
    targets: list[TargetFrameStat]


class IntervalFrames(Contract):
    start_frame: int
    end_frame: int  # inclusive


class IntervalSec(Contract):
    start_sec: float
    end_sec: float  # exclusive: (end_frame + 1) / fps


class FrameBox(Contract):
    frame: int
    time_sec: float
    bbox_xywh: list[int]
    bbox_xyxy: list[int]
    bbox_xyxy_norm: list[float]
    visible_ratio: float
    visible_point_count: int


class FrameVisibilityRow(Contract):
    frame: int
    time_sec: float
    target_instance_id: str
    is_visible: bool
    visible_ratio: float
    visible_point_count: int
    target_inframe_point_count: int


class FrameBoxNorm(Contract):
    frame: int
    time_sec: float
    bbox_xyxy_norm: list[float]


class VisibilityParams(Contract):
    grid_n: int
    min_visible_points: int
    min_visible_ratio: float
    min_bbox_px: int
    depth_margin_m: float
    occluders: str
    # the grid fields describe UAV-DualCog's statistics; the flag is decided on instance pixels
    decided_by: str = "instance pixels"
    min_visible_share: float = 0.0
    min_sighting_sec: float = 0.0


class MaskRow(Contract):
    frame: int
    time_sec: float
    visible_ratio: float
    visible_point_count: int
    target_inframe_point_count: int


class TargetPresence(Contract):
    intervals_frame: list[IntervalFrames]
    intervals_sec: list[IntervalSec]
    bboxes: list[FrameBox]
    frame_visibility: list[FrameVisibilityRow]
    frame_bboxes_xyxy_norm: list[FrameBoxNorm]
    keyframe_gt_dense: list[FrameBoxNorm]
    # one row per visible frame; the pixels are the landmark's instance id in that frame's
    # segmentation PNG (``mask_source``), where UAV-DualCog writes a mask tensor archive
    masks: list[MaskRow] = Field(default_factory=list)
    mask_tensor_archive: str = ""
    mask_source: str = ""
    visible_frame_count: int
    visibility_params: VisibilityParams


class PresenceTarget(Contract):
    target_instance_id: str
    target_center_3d: list[float]
    target_bbox_list: list[float]
    target_category: str
    target_description: str
    intervals_frame: list[IntervalFrames]
    intervals_sec: list[IntervalSec]
    frame_bboxes_xyxy_norm: list[FrameBoxNorm]
    visible_frame_count: int


class EnvTrack(Contract):
    visible_count: int
    difficulty_score: float
    difficulty_band: str
    visible_duration_ratio: float
    mean_visible_bbox_area_ratio: float
    intervals_frame: list[IntervalFrames]
    intervals_sec: list[IntervalSec]
    frame_visibility: list[FrameVisibilityRow] = Field(default_factory=list)
    frame_bboxes_xyxy_norm: list[FrameBoxNorm] = Field(default_factory=list)
    keyframe_gt_dense: list[FrameBoxNorm] = Field(default_factory=list)
    targets: dict[str, PresenceTarget] = Field(default_factory=dict)
    visible_frame_count: int


class BehaviorInterval(Contract):
    event_id: str
    event_label: str
    behavior_id: str
    target_instance_id: str
    intervals_frame: list[IntervalFrames]
    intervals_sec: list[IntervalSec]
    start_sec: float
    end_sec: float


class FrameBehavior(Contract):
    frame: int
    time_sec: float
    event_id: str
    event_label: str
    behavior_id: str
    target_instance_id: str


class BehaviorVocab(Contract):
    behavior_id: str
    event_label: str


class SelfTrack(Contract):
    task_type: str
    task_subtype: str
    task_difficulty: str
    task_difficulty_score: float
    set_instance: SetInstance
    element_instances: list[ElementInstance]
    landmark_order: list[str]
    mode_sequence: list[str]
    event_sequence: list[str]
    behavior_sequence: list[str]
    behavior_intervals_sec: list[BehaviorInterval]
    frame_behavior_labels: list[FrameBehavior]
    keyframe_gt_dense: list[FrameBehavior]  # one row per whole second
    behavior_vocab: list[BehaviorVocab]


class VideoInfo(Contract):
    path: str
    path_web: str = ""  # the same file: skyqa's video already streams (H.264 baseline, faststart)
    frames_manifest: str
    frame_index_map: str
    frame_visibility: str
    fps: float
    source_pose_fps: float
    width: int
    height: int
    frame_width: int = 0
    frame_height: int = 0
    frame_count: int
    duration_sec: float
    bitrate: int
    codec: str
    pix_fmt: str
    archive_width: int
    archive_height: int
    pose_smooth_window: int
    camera_forward_smooth_window: int


class TaskTracks(Contract):
    environmental_awareness: EnvTrack
    self_state_awareness: SelfTrack


class TaskData(Contract):
    task_schema_version: str = TASK_SCHEMA_VERSION
    scene_id: str
    traj_id: str
    video: VideoInfo
    target_presence: TargetPresence
    target_presence_targets: dict[str, PresenceTarget]
    task_tracks: TaskTracks


class NavigationIndexRow(Contract):
    traj_id: str
    kind: str  # "goal" | "route"
    goal_part: str
    route: list[str]
    task: str  # its final_task/navigation_task.json
    video: str
    frame_count: int
    duration_sec: float


class MissionIndexRow(Contract):
    traj_id: str
    instance_id: str
    mission_kind: str
    set_name: str
    task_data: str
    video: str
    frame_count: int
    duration_sec: float


class MissionIndex(Contract):
    """``video_tasks/missions_index.json``: every mission of the run and every rejection."""

    scene_id: str
    missions: list[MissionIndexRow]
    rejected: list[RejectedMission]
    navigation: list[NavigationIndexRow] = Field(default_factory=list)
    rejected_navigation: list[RejectedNavigation] = Field(default_factory=list)
    groups: list[GroupIndexRow] = Field(default_factory=list)
    rejected_groups: list[RejectedGroup] = Field(default_factory=list)
    trajectories: list[TrajectoryIndexRow] = Field(default_factory=list)
    rejected_trajectories: list[RejectedTrajectory] = Field(default_factory=list)
    surveys: list[SurveyIndexRow] = Field(default_factory=list)
    rejected_surveys: list[RejectedSurvey] = Field(default_factory=list)


class FailedMissions(Contract):
    """``video_tasks/failed_missions.json``: the missions whose rendered video never shows their
    landmark (mission id -> landmark id); those landmarks are not asked about."""

    reason: str
    missions: dict[str, str] = Field(default_factory=dict)
