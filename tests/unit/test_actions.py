"""The action algebra and the constructions: every identity holds on exact states, and the
hard tiers carry their witnesses against a commuting model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from pydantic import ValidationError
from skyqa.actions import ActionSpace, Capsule, Kinematics, Root, State, build, execute, inverse_of
from skyqa.actions.constructions import RESIDUAL_H, _segments
from skyqa.actions.motion import overlaps
from skyqa.actions.roots import grid_roots, path_clear

pytestmark = pytest.mark.unit
KIN = Kinematics(ActionSpace(), Capsule())
ROOT = Root(10.0, -4.0, 0.93, 45.0)
SEEDS = range(12)


def states(actions: list[str], commuting: bool = False) -> list[State]:
    return KIN.run(actions, ROOT, commuting)


@pytest.mark.parametrize("split", ["inverse_easy", "inverse_hard", "loop_hard"])
@pytest.mark.parametrize("seed", SEEDS)
def test_closed_constructions_return_exactly_to_the_root(split: str, seed: int) -> None:
    b = build(split, KIN, np.random.default_rng(seed))
    s = states(b.actions)
    assert len(b.actions) == 40
    assert KIN.same(s[0], s[-1])
    # the same state gives the same floats, so a deterministic renderer gives the same pixels
    assert KIN.body(s[0], ROOT) == KIN.body(s[-1], ROOT)
    assert b.identities == [(0, 359, 0.0)]
    turnaround = b.anchors[0] // 9 + 1
    assert not KIN.same(s[turnaround], s[0])  # an anchor a copy of the first frame does not match


@pytest.mark.parametrize("seed", SEEDS)
def test_inverse_is_a_then_its_inverse(seed: int) -> None:
    easy = build("inverse_easy", KIN, np.random.default_rng(seed))
    acts = [a for a in easy.actions if a != "no_op"]
    half = len(acts) // 2
    assert acts[half:] == inverse_of(acts[:half])
    assert not {"turn_left", "turn_right"} & set(acts)  # easy: level moves and looks commute
    hard = build("inverse_hard", KIN, np.random.default_rng(seed))
    assert {"turn_left", "turn_right"} & set(hard.actions)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_hard_tiers_carry_a_witness_against_a_commuting_model(seed: int) -> None:
    hard = build("inverse_hard", KIN, np.random.default_rng(seed))
    k = hard.anchors[0] // 9 + 1
    truth, shortcut = states(hard.actions)[k], states(hard.actions, commuting=True)[k]
    assert math.dist(KIN.offset(truth), KIN.offset(shortcut)) >= 1.0
    easy = build("inverse_easy", KIN, np.random.default_rng(seed))
    # on the easy tier the commuting model is right everywhere: that is what makes it easy
    assert all(KIN.same(a, b) for a, b in zip(states(easy.actions), states(easy.actions, True), strict=True))
    poly = build("loop_hard", KIN, np.random.default_rng(seed))
    assert not KIN.same(states(poly.actions, commuting=True)[-1], states(poly.actions)[0])
    assert poly.construction in ("rectangle", "triangle", "hexagon")


@pytest.mark.parametrize("seed", SEEDS)
def test_the_discrete_return_closes_within_the_cards_residual(seed: int) -> None:
    b = build("loop_easy", KIN, np.random.default_rng(seed))
    s = states(b.actions)
    gap = math.dist(KIN.offset(s[-1]), KIN.offset(s[0]))
    assert gap == pytest.approx(b.residual_m, abs=1e-6)
    assert gap < RESIDUAL_H * KIN.space.translation_m
    assert (s[-1].heading, s[-1].pitch) == (0, 0)
    assert b.identities == [(0, 359, b.residual_m)]


@pytest.mark.parametrize("seed", SEEDS)
def test_equivalent_paths_differ_and_meet(seed: int) -> None:
    for stage in (0, 1):
        b = build("equivalence_easy", KIN, np.random.default_rng(seed), stage)
        assert b.actions != b.partner and len(b.partner) == 40
        sa, sb = states(b.actions), states(b.partner)
        assert KIN.body(sa[-1], ROOT) == KIN.body(sb[-1], ROOT)
        if b.construction == "commutative_shuffle":
            # a shuffle only within runs of one kind: the runs line up one to one
            ra, rb = _segments(b.actions), _segments(b.partner)
            assert [sorted(x) for x in ra] == [sorted(x) for x in rb]
        else:
            assert b.construction == "l_shape_zigzag"
            moves = sum(1 for a in b.actions if a.startswith("move_"))
            inner_a = {KIN.offset(s) for s in sa[1:moves]}
            inner_b = {KIN.offset(s) for s in sb[1:moves]}
            assert not inner_a & inner_b  # disjoint interiors


def test_a_state_reached_two_ways_has_one_pose() -> None:
    tri = ["move_forward", *["turn_left"] * 8] * 3
    s = states(tri)
    assert s[-1].moves != s[0].moves  # the counts differ (three headings) ...
    assert KIN.body(s[-1], ROOT) == KIN.body(s[0], ROOT)  # ... the pose does not


def test_the_action_space_is_configuration_and_checked() -> None:
    space = ActionSpace(translation_m=0.5, yaw_deg=30.0, frames_per_action=5, actions=24)
    kin = Kinematics(space, Capsule())
    b = build("loop_hard", kin, np.random.default_rng(0))
    assert len(b.actions) == 24 and b.anchors[-1] == 24 * 5 - 1
    root = Root(0.0, 0.0, 0.93, 60.0)
    assert kin.same(kin.run(b.actions, root)[-1], kin.run(b.actions, root)[0])
    ground = lambda xy: np.zeros(len(xy))  # noqa: E731
    headings = {r.yaw_deg for r in grid_roots(kin, Wall(50.0), (0.0, 0.0, 0.0, 0.0), ground)}
    assert len(headings) == 12  # 30 degree steps: every heading, not 8 of them
    with pytest.raises(ValidationError, match="divide 90"):
        ActionSpace(yaw_deg=7.0)
    with pytest.raises(ValidationError, match="half-height"):
        Capsule(radius_m=1.0, half_height_m=0.5)


class Wall:
    """A plane at x = ``x`` (and the ground at z = 0)."""

    def __init__(self, x: float) -> None:
        self.x = x

    def clearance(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = np.minimum(np.abs(points[:, 0] - self.x), np.abs(points[:, 2]))
        return out


def test_a_blocked_move_stops_at_the_wall_and_is_recorded() -> None:
    wall = Wall(3.0)
    root = Root(0.0, 0.0, 0.93, 0.0)
    ran = execute(KIN, ["move_forward"] * 4 + ["turn_left"], root, wall)
    hit = [s for s in ran.steps if s.collision]
    assert [s.step for s in hit] == [2, 3]
    stop = ran.steps[2].actual_end[0]
    assert 3.0 - 0.34 - 0.06 < stop < 3.0 - 0.34  # stops within a sweep step of touching
    assert ran.steps[2].collision_displacement_m == pytest.approx(3.0 - stop, abs=1e-6)
    assert ran.steps[2].expected_end[0] == 3.0
    assert ran.steps[3].expected_end[0] == pytest.approx(stop + 1.0)  # expected: actual start + the action
    assert ran.steps[4].actual_end[3] == 15.0 and not ran.steps[4].collision  # turning is never blocked
    assert ran.frames[-1] == ran.steps[-1].actual_end and ran.frames[0] == ran.steps[0].start
    assert len(ran.frames) == 5 * 9


def test_a_look_beyond_the_pitch_limit_is_blocked() -> None:
    ran = execute(KIN, ["look_up"] * 9, ROOT, None)
    assert [s.collision for s in ran.steps] == [False] * 8 + [True]
    assert ran.steps[-1].actual_end[4] == 60.0 and ran.steps[-1].expected_end[4] == 67.5


def test_roots_keep_the_capsule_clear_and_stand_on_the_ground() -> None:
    wall = Wall(2.2)
    roots = grid_roots(KIN, wall, (-4.0, 8.0, -2.0, 2.0), lambda xy: np.zeros(len(xy)))
    xs = sorted({r.x for r in roots})
    assert xs == [-4.0, -2.0, 0.0, 4.0, 6.0, 8.0]  # 2 is within a radius of the wall
    assert len(roots) == len(xs) * 3 * 8 and {r.z for r in roots} == {0.98}  # 0.1 m above the ground
    assert sorted({r.yaw_deg for r in roots}) == [-180.0, -135.0, -90.0, -45.0, 0.0, 45.0, 90.0, 135.0]
    assert not overlaps(wall, np.array([[r.x, r.y, r.z] for r in roots]), KIN.capsule).any()
    assert path_clear(KIN, ["move_forward"] * 2, Root(-4.0, 0.0, 0.93), wall, 0.3)
    assert not path_clear(KIN, ["move_forward"] * 6, Root(-4.0, 0.0, 0.93), wall, 0.3)
