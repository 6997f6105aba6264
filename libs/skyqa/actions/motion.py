"""Executing an action program: a capsule body moved through a scene that can block it.

A translation is swept in steps of at most ``SWEEP_STEP_M``; the first sample whose capsule comes
closer to a surface than its radius stops the move at the previous sample (the collision and the
distance it fell short are recorded). Each action's frames ease from rest to rest
(:meth:`ActionSpace.step_shares`). A look beyond the pitch limit does not happen and counts as
blocked. The body then goes on from where it really is, so the expected pose of every step is the
actual start plus the action, as Reasoning-Structured Videos records it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from skyqa.actions.space import TRANSLATIONS, Capsule, Kinematics, Root, State, snap, wrap_deg
from skyqa.contracts.rsv import StepRecord, Vec5

SWEEP_STEP_M = 0.05


@runtime_checkable
class Clearance(Protocol):
    """Distances from points to the nearest surface of a scene."""

    def clearance(self, points: NDArray[np.float64]) -> NDArray[np.float64]: ...


def capsule_points(
    centres: NDArray[np.float64], capsule: Capsule, lift_m: float = 0.0
) -> NDArray[np.float64]:
    """Points along each capsule's axis, at most half a radius apart; ``lift_m`` raises the
    lowest one (a grown capsule that still stands on the ground)."""
    low = -capsule.axis_half_m + min(lift_m, 2 * capsule.axis_half_m)
    n = max(2, math.ceil((capsule.axis_half_m - low) / (capsule.radius_m / 2)) + 1)
    dz = np.linspace(low, capsule.axis_half_m, n)
    pts = np.repeat(np.asarray(centres, dtype=np.float64), n, axis=0)
    pts[:, 2] += np.tile(dz, len(centres))
    return pts


def overlaps(
    scene: Clearance, centres: NDArray[np.float64], capsule: Capsule, margin_m: float = 0.0
) -> NDArray[np.bool_]:
    """Whether the capsule at each centre overlaps the scene; ``margin_m`` grows it sideways
    and upwards, not below its feet, so a capsule standing on the ground keeps standing."""
    centres = np.asarray(centres, dtype=np.float64).reshape(-1, 3)
    if not len(centres):
        return np.zeros(0, dtype=bool)
    d = scene.clearance(capsule_points(centres, capsule, margin_m)).reshape(len(centres), -1)
    out: NDArray[np.bool_] = d.min(axis=1) < capsule.radius_m + margin_m
    return out


def sweep_samples(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Centres from just after ``a`` to ``b``, at most ``SWEEP_STEP_M`` apart."""
    n = max(1, math.ceil(float(np.linalg.norm(b - a)) / SWEEP_STEP_M))
    f = np.arange(1, n + 1, dtype=np.float64)[:, None] / n
    out: NDArray[np.float64] = a[None] + f * (b - a)[None]
    return out


@dataclass
class Executed:
    steps: list[StepRecord]
    frames: list[Vec5]  # body pose of every frame
    root_clear: bool


def _vec(p: tuple[float, float, float, float, float]) -> Vec5:
    return (snap(p[0]), snap(p[1]), snap(p[2]), wrap_deg(p[3]), snap(p[4]))


def execute(
    kin: Kinematics, actions: list[str], root: Root, scene: Clearance | None, commuting: bool = False
) -> Executed:
    """Run ``actions`` from ``root``; ``scene`` None moves through nothing (planning);
    ``commuting`` moves as a model would that lets the actions commute (the symmetric shortcut)."""
    space, capsule = kin.space, kin.capsule
    yaw0 = kin.root_steps(root)
    state = State.root(space)
    off = np.zeros(2)  # where the body is, minus where its lattice state is (collisions)
    here = np.array([root.x, root.y, root.z])
    root_clear = scene is None or not bool(overlaps(scene, here[None], capsule)[0])
    steps: list[StepRecord] = []
    frames: list[Vec5] = []
    f = space.frames_per_action
    shares = space.step_shares()
    for i, action in enumerate(actions):
        start = kin.body(state, root)
        start_v = _vec((start[0] + off[0], start[1] + off[1], start[2], start[3], start[4]))
        if action not in TRANSLATIONS and not kin.allowed(state, action):
            nxt, blocked, short = state, True, 0.0
            expected = kin.body(kin.apply(state, action, yaw0, commuting), root)
            expected_v = _vec(
                (expected[0] + off[0], expected[1] + off[1], expected[2], expected[3], expected[4])
            )
        else:
            nxt = kin.apply(state, action, yaw0, commuting)
            expected = kin.body(nxt, root)
            expected_v = _vec(
                (expected[0] + off[0], expected[1] + off[1], expected[2], expected[3], expected[4])
            )
            blocked, short = False, 0.0
            if action in TRANSLATIONS and scene is not None:
                a = np.array(start_v[:3])
                b = np.array(expected_v[:3])
                samples = sweep_samples(a, b)
                hit = np.nonzero(overlaps(scene, samples, capsule))[0]
                if len(hit):
                    stop = samples[hit[0] - 1] if hit[0] else a
                    blocked, short = True, float(np.linalg.norm(b - stop))
                    off = off + (stop[:2] - b[:2])
        state = nxt
        end = kin.body(state, root)
        actual_v = _vec((end[0] + off[0], end[1] + off[1], end[2], end[3], end[4]))
        steps.append(
            StepRecord(
                step=i,
                action=action,
                start=start_v,
                expected_end=expected_v,
                actual_end=actual_v,
                collision=blocked,
                collision_displacement_m=round(short, 4),
            )
        )
        dyaw = _turn(start_v[3], actual_v[3])
        for j, t in enumerate(shares):
            if j == f - 1:
                frames.append(actual_v)
            elif j == 0:
                frames.append(start_v)
            else:
                frames.append(
                    _vec(
                        (
                            start_v[0] + t * (actual_v[0] - start_v[0]),
                            start_v[1] + t * (actual_v[1] - start_v[1]),
                            start_v[2],
                            start_v[3] + t * dyaw,
                            start_v[4] + t * (actual_v[4] - start_v[4]),
                        )
                    )
                )
    return Executed(steps, frames, root_clear)


def _turn(a: float, b: float) -> float:
    """The signed smallest rotation from heading ``a`` to ``b`` (degrees)."""
    return (b - a + 180.0) % 360.0 - 180.0


def camera_pose(body: Vec5, capsule: Capsule) -> tuple[float, float, float, float, float, float]:
    """The camera pose (x, y, z, yaw, pitch, roll) of a body pose."""
    return (body[0], body[1], snap(body[2] + capsule.camera_offset_m), body[3], body[4], 0.0)
