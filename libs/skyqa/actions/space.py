"""The discrete action space and the embodiment that moves through it.

Reasoning-Structured Videos' defaults: nine primitives, 1 m translations, 15 degree turns,
7.5 degree looks, nine frames per action, 40 actions, and a capsule body (radius 0.34 m,
half-height 0.88 m, camera 0.6 m above its centre), as in Unreal's character capsule, whose
half-height runs from the centre to the top of the upper hemisphere.

States are kept exactly: the heading and the pitch as step counts, the position as signed move
counts per absolute heading. A position is evaluated from its counts in one fixed order and
snapped to a micrometre grid, so two action sequences that reach the same state in exact
arithmetic (a triangle closing, two shuffled paths meeting) give bit-identical camera poses, and
a deterministic renderer gives bit-identical frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

from pydantic import Field, model_validator

from skyqa.contracts.base import Contract
from skyqa.kinematics import LIMITS, PLANNED_ACCEL, trapezoid_s

# the card's order: ``action_id`` is the index here
ACTIONS: tuple[str, ...] = (
    "move_forward",
    "move_backward",
    "move_left",
    "move_right",
    "turn_left",
    "turn_right",
    "look_up",
    "look_down",
    "no_op",
)
ACTION_IDS = {a: i for i, a in enumerate(ACTIONS)}
TRANSLATIONS = frozenset(ACTIONS[:4])
TURNS = frozenset(ACTIONS[4:6])
LOOKS = frozenset(ACTIONS[6:8])
ROTATIONS = TURNS | LOOKS
INVERSE = {
    "move_forward": "move_backward",
    "move_backward": "move_forward",
    "move_left": "move_right",
    "move_right": "move_left",
    "turn_left": "turn_right",
    "turn_right": "turn_left",
    "look_up": "look_down",
    "look_down": "look_up",
    "no_op": "no_op",
}
SNAP_DECIMALS = 6  # positions on a micrometre grid


@lru_cache(maxsize=64)
def _shares(translation_m: float, frames: int) -> tuple[float, ...]:
    s = trapezoid_s(translation_m, LIMITS.v_max, PLANNED_ACCEL, frames - 1)
    return tuple(float(v) for v in s)


class ActionSpace(Contract):
    """Step sizes and the video each action becomes."""

    translation_m: float = Field(1.0, gt=0.0, le=10.0)
    yaw_deg: float = Field(15.0, ge=1.0, le=90.0)  # at most 360 headings
    pitch_deg: float = Field(7.5, gt=0.0, le=45.0)
    max_pitch_deg: float = Field(60.0, gt=0.0, le=89.0)  # a look beyond it is blocked
    frames_per_action: int = Field(9, ge=2, le=60)
    actions: int = Field(40, ge=4, le=400)

    @model_validator(mode="after")
    def _grid(self) -> ActionSpace:
        # a quarter turn must be whole steps: left and right moves are headings of the grid
        if not 0 < self.yaw_deg <= 90 or (90.0 / self.yaw_deg) % 1:
            raise ValueError(f"yaw step must divide 90 degrees, got {self.yaw_deg}")
        return self

    @property
    def headings(self) -> int:
        return round(360.0 / self.yaw_deg)

    @property
    def max_pitch_steps(self) -> int:
        return int(self.max_pitch_deg // self.pitch_deg)

    @property
    def frames(self) -> int:
        return self.actions * self.frames_per_action

    def step_shares(self) -> tuple[float, ...]:
        """How far through its action each of an action's frames is. An action starts and
        stops at rest (a real body cannot turn 1 m/s forward into 1 m/s backward between two
        frames): the frames follow a rest-to-rest move at the planned acceleration
        (:func:`skyqa.kinematics.trapezoid_s`), symmetric, so a step and its inverse pass the
        same poses in reverse and identities hold on every frame."""
        return _shares(self.translation_m, self.frames_per_action)

    def end_frame(self, step: int) -> int:
        """The frame showing the state after action ``step`` (each action's frames run from its
        start state to its end state inclusive)."""
        return step * self.frames_per_action + self.frames_per_action - 1


class Capsule(Contract):
    radius_m: float = Field(0.34, gt=0.0, le=5.0)
    half_height_m: float = Field(0.88, gt=0.0, le=10.0)  # centre to the top of the capsule
    camera_offset_m: float = Field(0.6, ge=-10.0, le=10.0)  # camera above the centre

    @model_validator(mode="after")
    def _shape(self) -> Capsule:
        if self.half_height_m < self.radius_m:
            raise ValueError("capsule half-height must be at least its radius")
        return self

    @property
    def axis_half_m(self) -> float:
        """Half the length of the segment whose radius-neighbourhood is the capsule."""
        return self.half_height_m - self.radius_m


@dataclass(frozen=True)
class State:
    """A body state in exact step counts, relative to a root (x, y, z of the capsule centre in
    metres, ENU, heading in degrees counter-clockwise from +x).

    ``moves[k]`` counts unit moves along absolute heading ``k`` minus those along ``k + n/2``
    (headings 0..n/2-1), so a move and its reverse cancel exactly."""

    heading: int  # yaw steps from the root's heading, modulo the number of headings
    pitch: int  # pitch steps, positive up
    moves: tuple[int, ...]

    @classmethod
    def root(cls, space: ActionSpace) -> State:
        return cls(0, 0, (0,) * (space.headings // 2))


@dataclass(frozen=True)
class Root:
    """Where a trajectory starts: the capsule centre and the heading (a multiple of the yaw
    step) and pitch of the body."""

    x: float
    y: float
    z: float
    yaw_deg: float = 0.0
    pitch_deg: float = 0.0


class Kinematics:
    """Exact action application and pose evaluation in one action space."""

    def __init__(self, space: ActionSpace, capsule: Capsule) -> None:
        self.space = space
        self.capsule = capsule
        self.n = space.headings

    @cached_property
    def _units(self) -> list[tuple[float, float]]:
        step = math.radians(self.space.yaw_deg)
        return [(math.cos(k * step), math.sin(k * step)) for k in range(self.n // 2)]

    def _move(self, moves: tuple[int, ...], heading: int) -> tuple[int, ...]:
        half = self.n // 2
        out = list(moves)
        heading %= self.n
        if heading < half:
            out[heading] += 1
        else:
            out[heading - half] -= 1
        return tuple(out)

    def apply(self, state: State, action: str, root_yaw_steps: int = 0, commuting: bool = False) -> State:
        """The state after ``action``; looks beyond the pitch limit are the caller's to refuse
        (:meth:`allowed`). Move directions are absolute headings: the root's plus the state's;
        ``commuting`` moves along the root's heading whatever the body's, as a model would that
        treats the actions as commuting (the symmetric shortcut)."""
        h = root_yaw_steps + (0 if commuting else state.heading)
        quarter = self.n // 4
        if action == "move_forward":
            return State(state.heading, state.pitch, self._move(state.moves, h))
        if action == "move_backward":
            return State(state.heading, state.pitch, self._move(state.moves, h + 2 * quarter))
        if action == "move_left":
            return State(state.heading, state.pitch, self._move(state.moves, h + quarter))
        if action == "move_right":
            return State(state.heading, state.pitch, self._move(state.moves, h - quarter))
        if action == "turn_left":
            return State((state.heading + 1) % self.n, state.pitch, state.moves)
        if action == "turn_right":
            return State((state.heading - 1) % self.n, state.pitch, state.moves)
        if action == "look_up":
            return State(state.heading, state.pitch + 1, state.moves)
        if action == "look_down":
            return State(state.heading, state.pitch - 1, state.moves)
        if action == "no_op":
            return state
        raise ValueError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")

    def allowed(self, state: State, action: str) -> bool:
        nxt = state.pitch + (1 if action == "look_up" else -1 if action == "look_down" else 0)
        return abs(nxt) <= self.space.max_pitch_steps

    def run(self, actions: list[str], root: Root, commuting: bool = False) -> list[State]:
        """Every state from the root through each action (len(actions) + 1 states)."""
        yaw0 = self.root_steps(root)
        states = [State.root(self.space)]
        for a in actions:
            states.append(self.apply(states[-1], a, yaw0, commuting))
        return states

    def root_steps(self, root: Root) -> int:
        steps = root.yaw_deg / self.space.yaw_deg
        if abs(steps - round(steps)) > 1e-9:
            raise ValueError(
                f"root yaw {root.yaw_deg} is not a multiple of the yaw step {self.space.yaw_deg}"
            )
        return round(steps)

    def offset(self, state: State) -> tuple[float, float]:
        """The exact displacement of ``state`` from its root, in metres, evaluated in one order
        and snapped, so equal states give equal floats."""
        dx = dy = 0.0
        for c, (ux, uy) in zip(state.moves, self._units, strict=True):
            dx += c * ux
            dy += c * uy
        t = self.space.translation_m
        return snap(dx * t), snap(dy * t)

    def body(self, state: State, root: Root) -> tuple[float, float, float, float, float]:
        """Capsule centre x, y, z and body yaw, pitch (degrees) of ``state``."""
        dx, dy = self.offset(state)
        yaw = wrap_deg(root.yaw_deg + state.heading * self.space.yaw_deg)
        return (
            snap(root.x + dx),
            snap(root.y + dy),
            root.z,
            yaw,
            root.pitch_deg + state.pitch * self.space.pitch_deg,
        )

    def same(self, a: State, b: State) -> bool:
        """Equal states: equal heading and pitch, and equal evaluated positions (move counts may
        differ and still cancel, as around a triangle)."""
        return a.heading == b.heading and a.pitch == b.pitch and self.offset(a) == self.offset(b)


def snap(v: float) -> float:
    return float(round(v, SNAP_DECIMALS)) + 0.0  # no negative zero


def wrap_deg(a: float) -> float:
    """An angle in [-180, 180)."""
    return snap((a + 180.0) % 360.0 - 180.0)
