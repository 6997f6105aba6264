"""Navigation missions (UrbanVideo-Bench style): a flight to a goal, or along a route of 2-4
landmarks, as a list of discrete action segments, each with the planner's reason.

``video_tasks/missions/<traj_id>/navigation_plan.json`` is what the planner decided; the
mission's ``final_task/navigation_task.json`` adds what the renderer measured (per-frame
visibility and boxes of every landmark on the route and near it). Frame ``f`` shows the drone
at time ``f / fps``; segment ``i`` covers frames ``start_frame..end_frame`` (inclusive), and the
last frame, the end state, belongs to the last segment.

Angles: yaw counter-clockwise from east (a left turn adds yaw), camera pitch up positive; ENU
metres.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from skyqa.contracts.base import Contract
from skyqa.contracts.kinematics import KinematicsCheck

Action = Literal[
    "fly_forward",
    "ascend",
    "descend",
    "turn_left",
    "turn_right",
    "rotate_camera_up",
    "rotate_camera_down",
    "hover",
]
Reason = Literal[
    "face_landmark",  # turn towards the leg's landmark
    "avoid_obstacle",  # turn aside and fly around what blocks the straight way
    "clear_obstacle",  # climb: the straight way at this height is blocked
    "pass_obstacle",  # fly forward over what blocked the way
    "descend_after_obstacle",  # back down once past it
    "approach_landmark",  # fly forward to the leg's landmark
    "match_goal_height",  # climb or descend to the goal's facade or above its roof
    "look_at_landmark",  # tilt the camera to keep the landmark in view
    "arrive",  # hover at the destination
]
GoalPart = Literal["whole", "facade", "rooftop"]


class NavState(Contract):
    x: float
    y: float
    z: float
    yaw_deg: float
    camera_pitch_deg: float


class NavSegment(Contract):
    index: int
    action: Action
    amount: float  # metres (forward, ascend, descend), degrees (turns, camera) or seconds (hover)
    reason: Reason
    leg: int  # the route step (0-based) the segment belongs to
    toward: str  # the landmark id that leg flies to
    start_frame: int
    end_frame: int  # inclusive
    start: NavState
    end: NavState
    # the first move that avoids a blocked way (climb or side turn): the landmark id in the way,
    # or "" (unlabelled structure)
    blocked_by: str = ""


class NavLandmark(Contract):
    landmark_id: str
    rendered_instance_id: int
    category: str
    subcategory: str
    description: str  # the reviewed description the instruction names it by
    center: list[float]
    size: list[float]
    on_route: bool


class NavAlternative(Contract):
    """A way the leg could have been flown, judged where the planner chose: straight on at the
    current height, over (the least safe climb), or around either side; ``seconds`` is the
    estimated flight time when feasible. What a counterfactual question asks about."""

    leg: int
    toward: str
    option: Literal["straight", "over", "around_left", "around_right"]
    feasible: bool
    seconds: float | None
    blocked_by: str  # the straight way: the landmark in the way, "" (unlabelled or clear)
    chosen: bool


class NavCheck(Contract):
    collision_free: bool
    min_distance_m: float
    samples: int  # points checked along the path
    # the frames measured against the limits they keep (absent in plans made before the check)
    kinematics: KinematicsCheck | None = None


class NavigationPlan(Contract):
    scene_id: str
    traj_id: str
    kind: Literal["goal", "route"]
    goal_part: GoalPart
    instruction: str  # the goal or the route in words, as the rows quote it
    route: list[str]  # landmark ids in flight order; a goal mission: just the goal
    landmarks: list[NavLandmark]  # the route's, then those near the path
    start: NavState
    segments: list[NavSegment]
    fps: float
    frame_count: int
    duration_sec: float
    speeds: dict[str, float]  # m/s and deg/s the segments are timed with
    check: NavCheck
    seed: int
    attempt: int
    poses: list[NavState]  # the drone at each frame: what the renderer is asked to draw
    alternatives: list[NavAlternative] = Field(default_factory=list)


class NavFrame(Contract):
    frame: int
    visible: bool
    visible_ratio: float
    pixels: int
    bbox_xyxy_norm: list[float]  # [0, 0, 0, 0] when not in view


class NavVideo(Contract):
    path: str  # relative to the mission's final_task folder
    fps: float
    frame_count: int
    width: int
    height: int
    fov_deg: float


class NavigationTask(NavigationPlan):
    """The plan plus what the renderer measured, one list per landmark in ``landmarks``."""

    video: NavVideo
    visibility: dict[str, list[NavFrame]] = Field(default_factory=dict)


class RejectedNavigation(Contract):
    traj_id: str
    kind: str
    route: list[str]
    attempts: int
    reason: str
