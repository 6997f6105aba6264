"""Handoff files of action trajectories (Reasoning-Structured Videos).

The mission planner writes a :class:`TrajectoryPlan` per trajectory; the renderer executes its
actions and writes an :class:`Execution` (what the body actually did, step by step); the
qa-generator validates both and releases the trajectory in the card's layout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt

from skyqa.actions.space import ActionSpace, Capsule
from skyqa.contracts.base import Contract
from skyqa.contracts.kinematics import KinematicsCheck

Vec5 = tuple[float, float, float, float, float]  # capsule centre x, y, z (m, ENU), yaw, pitch (deg)

SPLITS = ("inverse_easy", "inverse_hard", "loop_easy", "loop_hard", "equivalence_easy", "equivalence_hard")
RANDOM_WALK = "random_walk"
STEM = r"^run_[A-Za-z0-9._-]{1,128}__(traj_\d{1,9}|pair_\d{1,9}_[AB]_traj_\d{1,9})$"
Split = Literal[
    "inverse_easy",
    "inverse_hard",
    "loop_easy",
    "loop_hard",
    "equivalence_easy",
    "equivalence_hard",
    "random_walk",
]


class IdentityPair(Contract):
    """Two frames whose camera states are equal by construction (``trajectory`` "self" or the
    pair's partner for the second frame), within ``tolerance_m`` (a loop that closes by a
    discrete return closes within its residual)."""

    first: int = Field(ge=0)
    second: int = Field(ge=0)
    partner: bool = False  # the second frame is the partner trajectory's
    tolerance_m: float = Field(0.0, ge=0.0)


class TrajectoryPlan(Contract):
    traj_id: str
    number: int  # the card's trajectory_id
    split: Split  # what it was built as
    construction: str  # e.g. "explore_return", "rectangle", "commutative_shuffle"
    seed: int
    root: Vec5
    actions: list[str]
    space: ActionSpace
    capsule: Capsule
    identities: list[IdentityPair] = Field(default_factory=list)
    anchors: list[NonNegativeInt] = Field(default_factory=list)  # frames the GT-anchored tier compares
    witness: str = ""  # what a symmetric (abelian) shortcut gets wrong here
    pair_id: str = ""  # equivalence: the pair both halves share
    role: Literal["", "path_A", "path_B"] = ""
    partner: str = ""  # the other half's traj_id
    partner_number: int = -1
    closure_residual_m: float = 0.0
    width: int
    height: int
    fov_deg: float
    fps: float
    crf: int
    # the frames measured against the kinematic limits (absent in plans made before the check)
    kinematics: KinematicsCheck | None = None


class StepRecord(Contract):
    step: int
    action: str
    start: Vec5
    expected_end: Vec5
    actual_end: Vec5
    collision: bool
    collision_displacement_m: float  # how much of the move was blocked


class Execution(Contract):
    """What the renderer's body did: every step's start, expected and actual end."""

    traj_id: str
    steps: list[StepRecord]
    frame_count: int
    kept_frames: dict[int, str]  # frame -> lossless PNG key, relative to the trajectory folder
    root_clear: bool  # the capsule did not overlap the scene at the root

    @property
    def collisions(self) -> list[int]:
        return [int(s.collision) for s in self.steps]


class TrajectoryIndexRow(Contract):
    traj_id: str
    split: Split
    plan: str  # trajectory_plan.json
    execution: str  # execution.json
    video: str


class RejectedTrajectory(Contract):
    traj_id: str
    reason: str


class TrajectoryRow(Contract):
    """One released trajectory: where its files are in the card's layout, what it asserts and
    how it validated. A trajectory that failed validation is released in ``random_walk/`` with
    the reason, never as a relation."""

    sample_id: str
    traj_id: str
    number: int  # the card's trajectory_id
    split: Split  # where it is released
    built_as: Split  # what it was constructed as
    trajectory_type: Literal["inverse", "loop", "equivalence", "random_walk"]
    construction: str
    difficulty: Literal["easy", "hard", "none"]
    pair_id: str = ""
    role: Literal["", "path_A", "path_B"] = ""
    partner_number: int = -1
    stem: str = Field(pattern=STEM)  # run_<ts>__traj_<id> or run_<ts>__pair_<pid>_<A|B>_traj_<id>
    video: str  # release-relative paths: <folder>/<split>/<stem>.mp4
    meta: str  # and <stem>_meta.json
    keyframes: list[NonNegativeInt]  # frames kept losslessly, under <split>/keyframes/<stem>/
    actions: list[str]
    root: Vec5
    width: int
    height: int
    fps: float
    frames: int
    frames_per_action: int
    identities: list[IdentityPair]
    anchors: list[NonNegativeInt]
    witness: str = ""
    closure_residual_m: float = 0.0
    collisions: int
    pose_error_max_m: float  # Layer 1: the worst step, actual against expected end
    identity_error_max_m: float  # the worst relation endpoint pair
    pixel_mse: list[float]  # Layer 2: per identity pair, on the lossless frames
    failure: str = ""  # why a relation went to random_walk
