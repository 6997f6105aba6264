"""The geometry rules behind image answers, and QC catching broken rows."""

from __future__ import annotations

import difflib
import itertools

import numpy as np
import pytest
from skyqa.contracts.qa import Option
from skyqa.sim import Pose

from services.mission_planner.library import load_library
from services.qa_generator import labels as L, qc
from services.qa_generator.video_tasks import distractor_pool, element_label


def test_observer_label_mirrors_left_and_right_only() -> None:
    assert L.observer_label("front_left") == "Front-Right"
    assert L.observer_label("back_right") == "Back-Left"
    assert L.observer_label("front") == "Front" and L.object_label("back_left") == "Back-Left"


@pytest.mark.parametrize(
    ("ref", "target", "expected"),
    [
        (0, -45, (45, "clockwise")),
        (0, 90, (90, "counterclockwise")),
        (0, 180, (180, "clockwise")),
        (170, -55, (135, "counterclockwise")),
    ],
)
def test_orbit_turn_takes_the_short_way(ref: float, target: float, expected: tuple[int, str]) -> None:
    assert L.orbit_turn(ref, target) == expected


def bearing_of(h: float, v: float) -> L.Bearing:
    return L.Bearing(h, v, 10.0)


def test_env_direction_has_a_dead_zone_around_front() -> None:
    assert L.env_direction(bearing_of(1.0, 0), "4way") == "Front"
    assert L.env_direction(bearing_of(5.0, 0), "4way") is None  # too close to the boundary to be fair
    assert L.env_direction(bearing_of(20.0, 0), "4way") == "Left"
    assert L.env_direction(bearing_of(-20.0, 0), "8way") == "Front-Right"
    assert L.env_direction(L.Bearing(0, 0, -1.0), "4way") == "Back"


def test_env_action_is_the_move_that_centres_the_landmark() -> None:
    assert L.env_action(bearing_of(20, 2), "4way") == "Turn left"
    assert L.env_action(bearing_of(2, -12), "4way") == "Descend"
    assert L.env_action(bearing_of(10, 9), "4way") is None  # neither axis dominates
    assert L.env_action(bearing_of(-12, 9), "8way") == "Turn right and climb"
    assert L.env_action(bearing_of(-12, 3.5), "8way") is None  # the vertical axis is ambiguous
    assert L.env_action(bearing_of(0.5, 1.0), "8way") is None  # already centred


def test_bearing_is_measured_in_the_camera_frame() -> None:
    pose = Pose(0, 0, 10, 90.0, 0.0, 0.0)  # looking north
    b = L.bearing(np.array([-10.0, 100.0, 10.0]), pose)  # west of the axis: the left
    assert b.horizontal_deg == pytest.approx(np.degrees(np.arctan2(10, 100)))
    assert abs(b.vertical_deg) < 1e-9
    h, v = qc.world_bearing([-10.0, 100.0, 10.0], [0, 0, 10, 90.0, 0.0, 0.0])
    assert h == pytest.approx(b.horizontal_deg) and v == pytest.approx(0.0)


def test_label_spaces_have_no_near_duplicate_options() -> None:
    for space in (L.OBJECT_8, L.ENV_8, L.ACTION_8):
        worst = max(difflib.SequenceMatcher(None, a, b).ratio() for a, b in itertools.combinations(space, 2))
        assert worst <= qc.MAX_SIMILARITY


def test_structure_check_catches_missing_answers_and_near_duplicate_distractors() -> None:
    v = qc.Verdict()
    qc._structure("a", ["Left", "Right"], ["A", "B"], ["C"], v)
    assert v.reasons["a"] == "answer not among the options"
    near = element_label("circular_orbit", "look_forward", {"arc_deg": 180, "direction": "cw"})
    nearer = element_label("circular_orbit", "look_forward", {"arc_deg": 270, "direction": "cw"})
    qc._structure("b", [near, nearer], ["A", "B"], ["A"], v)
    assert v.reasons["b"] == "two options more similar than 0.85"
    qc._structure("c", [near, nearer], ["A", "B"], ["A", "B"], v)  # two correct options may share wording
    assert "c" not in v.reasons


def test_distractor_pool_covers_every_behavior_and_is_seeded() -> None:
    lib = load_library()
    a = distractor_pool(lib, np.random.default_rng(3))
    assert a == distractor_pool(lib, np.random.default_rng(3))
    assert len(a) == 25 and len(set(a)) == 25
    assert Option(option_id="A", label=a[0]).label == a[0]


def test_letter_balance_reports_a_chi_square_p_value() -> None:
    from skyqa.contracts.qa import ImageRow

    row = ImageRow.model_construct(task_type="self_where", answer_option_id="A", difficulty="4way")
    skewed = qc.letter_balance([row] * 20)
    assert skewed["self_where"]["A"] == 20 and skewed["self_where"]["chi2_p"] < 0.001
