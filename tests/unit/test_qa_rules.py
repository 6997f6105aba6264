"""The geometry rules behind image answers, and QC catching broken rows."""

from __future__ import annotations

import difflib
import itertools

import numpy as np
import pytest
from partial_models import partial_model
from skyqa.contracts.qa import Option
from skyqa.families import structure
from skyqa.families.dualcog_image import checks
from skyqa.families.dualcog_video.tasks import distractor_pool
from skyqa.sim import Pose
from skyqa.vocab import directions as L
from skyqa.vocab.behaviors import element_label, load_library


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


def test_env_direction_keeps_a_margin_around_its_boundary() -> None:
    assert L.env_direction(bearing_of(2.9, 0), "4way") == "Front"
    for near in (3.1, 5.0, 5.25, 6.9, -5.7):  # within MARGIN_DEG of the 5-degree boundary
        assert L.env_direction(bearing_of(near, 0), "4way") is None, near
    assert L.env_direction(bearing_of(7.1, 0), "4way") == "Left"
    assert L.env_direction(bearing_of(-20.0, 0), "8way") == "Front-Right"
    assert L.env_direction(bearing_of(5.25, 0), "4way", margin=0.0) == "Left"  # the bare rule
    assert L.env_direction(L.Bearing(0, 0, -1.0), "4way") is None  # behind: not an in-frame answer


def test_env_action_is_the_move_that_centres_the_landmark() -> None:
    assert L.env_action(bearing_of(20, 2), "4way") == "Turn left"
    assert L.env_action(bearing_of(2, -12), "4way") == "Descend"
    assert L.env_action(bearing_of(10, 9), "4way") is None  # neither axis dominates
    assert L.env_action(bearing_of(-12, 9), "8way") == "Turn right and climb"
    assert L.env_action(bearing_of(-12, 3.5), "8way") is None  # the vertical axis is ambiguous
    assert L.env_action(bearing_of(0.5, 1.0), "8way") is None  # already centred


def test_env_action_drops_answers_near_a_threshold() -> None:
    # the cases: 0.25 and 0.7 degrees past the 5-degree threshold, a 1.48 vs 1.5 ratio
    assert L.env_action(bearing_of(5.25, 0.5), "4way") is None
    assert L.env_action(bearing_of(-5.7, 0.2), "4way") is None
    assert L.env_action(bearing_of(14.8, 10.0), "4way") is None
    assert L.env_action(bearing_of(15.2, 10.0), "4way") is None  # 1.52: past 1.5 but inside the margin
    assert L.env_action(bearing_of(20.0, 10.0), "4way") == "Turn left"  # 2.0 clears 1.5 * 1.3
    assert L.env_action(bearing_of(15.2, 10.0), "4way", 0.0, 1.0) == "Turn left"  # the bare rule


def test_bearing_is_measured_in_the_camera_frame() -> None:
    pose = Pose(0, 0, 10, 90.0, 0.0, 0.0)  # looking north
    b = L.bearing(np.array([-10.0, 100.0, 10.0]), pose)  # west of the axis: the left
    assert b.horizontal_deg == pytest.approx(np.degrees(np.arctan2(10, 100)))
    assert abs(b.vertical_deg) < 1e-9
    h, v = checks.world_bearing([-10.0, 100.0, 10.0], [0, 0, 10, 90.0, 0.0, 0.0])
    assert h == pytest.approx(b.horizontal_deg) and v == pytest.approx(0.0)


def test_label_spaces_have_no_near_duplicate_options() -> None:
    for space in (L.OBJECT_8, L.ENV_8, L.ACTION_8):
        worst = max(difflib.SequenceMatcher(None, a, b).ratio() for a, b in itertools.combinations(space, 2))
        assert worst <= structure.MAX_SIMILARITY


def test_structure_check_catches_missing_answers_and_near_duplicate_distractors() -> None:
    v = structure.Verdict()
    structure.check_options("a", ["Left", "Right"], ["A", "B"], ["C"], v)
    assert v.reasons["a"] == "answer not among the options"
    near = element_label("circular_orbit", "look_forward", {"arc_deg": 180, "direction": "cw"})
    nearer = element_label("circular_orbit", "look_forward", {"arc_deg": 270, "direction": "cw"})
    structure.check_options("b", [near, nearer], ["A", "B"], ["A"], v)
    assert v.reasons["b"] == "two options more similar than 0.85"
    structure.check_options(
        "c", [near, nearer], ["A", "B"], ["A", "B"], v
    )  # two correct options may share wording
    assert "c" not in v.reasons


def test_distractor_pool_covers_every_behavior_and_is_seeded() -> None:
    lib = load_library()
    a = distractor_pool(lib, np.random.default_rng(3))
    assert a == distractor_pool(lib, np.random.default_rng(3))
    assert len(a) == 25 and len(set(a)) == 25
    assert Option(option_id="A", label=a[0]).label == a[0]


def test_joint_rows_do_not_tell_composite_golds_apart_by_their_text() -> None:
    from skyqa.vocab import prompts
    from skyqa.vocab.behaviors import composite_label

    lib = load_library()
    pool = distractor_pool(lib, np.random.default_rng(0))
    for name in lib.set_names("composite"):
        # a gold composite reads exactly like a composite distractor, naming none of its steps
        assert composite_label(lib, name) in pool
    # the prompt does not say how many options are right (UAV-DualCog's wording does)
    assert "{how_many}" not in prompts.JOINT_USER and "Select one option" not in prompts.JOINT_USER


def planted_env_row(h_deg: float, label: str, task: str = "env_where") -> tuple[structure.Verdict, str]:
    """One environment row whose landmark sits ``h_deg`` left of the optical axis, checked by QC."""
    from skyqa.contracts import Bbox3D, ValidInstance
    from skyqa.contracts.qa import EnvRequest, ImageRow
    from skyqa.sim import Intrinsics, project_box

    k = Intrinsics.from_fov(640, 480, 72.0)
    center = np.array([100.0, 100.0 * np.tan(np.radians(h_deg)), 0.0])
    lo, hi = center - 3.0, center + 3.0
    pose = Pose(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    box, inside = project_box(lo, hi, pose, k)
    assert inside
    mask = np.zeros((480, 640), dtype=np.uint32)
    x0, y0, x1, y1 = (round(float(v)) for v in box)
    mask[y0:y1, x0:x1] = 7
    req = partial_model(
        EnvRequest,
        request_id="req",
        source_view_id="view_00_front",
        target_center_3d=center.tolist(),
        target_aabb=[lo.tolist(), hi.tolist()],
        pose=[0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        fov_deg=72.0,
    )
    row = partial_model(
        ImageRow,
        sample_id="row",
        task_type=task,
        difficulty="4way",
        answer_label=label,
        answer_bbox_xyxy_norm=[x0 / 640, y0 / 480, x1 / 640, y1 / 480],
    )
    box3d = partial_model(Bbox3D, min=lo.tolist(), max=hi.tolist(), extent=[])  # no ground measured
    lm = partial_model(ValidInstance, valid_view_ids=["view_00_front"], bbox_3d=box3d)
    v = structure.Verdict()
    checks._recheck_env(row, lm, req, {"req": mask}, v)
    return v, v.reasons.get("row", "")


def test_qc_drops_a_planted_near_threshold_row_and_keeps_a_clear_one() -> None:
    # 5.25 degrees left: the bare rule says Left, which the world-frame re-check confirms, but
    # it is within MARGIN_DEG of the 5-degree boundary, so the row has no fair answer
    _, reason = planted_env_row(5.25, "Left")
    assert reason == "answer within the margin of a decision boundary"
    _, reason = planted_env_row(12.0, "Left")
    assert reason == ""
    _, reason = planted_env_row(12.0, "Turn left", task="env_how")
    assert reason == ""
    _, reason = planted_env_row(6.2, "Turn left", task="env_how")
    assert reason == "answer within the margin of a decision boundary"


def test_option_similarity_is_the_same_both_ways_round() -> None:
    # difflib's ratio is not symmetric: the generator compared (distractor, gold) and passed a
    # pair that QC, comparing (gold, distractor), rejected, which dropped whole landmarks
    a = "approach, descending 25 m with the camera locked on the landmark"
    b = "depart, rising 25 m with the camera locked on the landmark"
    one_way = difflib.SequenceMatcher(None, b, a).ratio()
    other_way = difflib.SequenceMatcher(None, a, b).ratio()
    assert one_way <= structure.MAX_SIMILARITY < other_way
    assert L.similarity(a, b) == L.similarity(b, a) == other_way


def test_environment_perception_steps_follow_the_box_not_a_constant() -> None:
    from skyqa.contracts.qa import ImageRow
    from skyqa.families.dualcog_image.reasoning import steps_for

    def per(box: list[float]) -> str:
        row = partial_model(
            ImageRow,
            task_type="env_where",
            answer_bbox_xyxy_norm=box,
            answer_label="Left",
            reference_object_view="front",
            metadata={"horizontal_deg": 20.0, "vertical_deg": -5.0},
        )
        return next(s.answer for s in steps_for(row) if s.operation == "PER")

    assert per([0.05, 0.1, 0.2, 0.3]) == "the upper left of the image"
    assert per([0.4, 0.4, 0.6, 0.6]) == "the centre of the image"
    assert per([0.7, 0.7, 0.9, 0.95]) == "the lower right of the image"


def test_reasoning_steps_agree_with_the_paired_row_and_a_planted_contradiction_is_caught() -> None:
    from skyqa.contracts.qa import ImageRow
    from skyqa.families.dualcog_image.reasoning import steps_for

    box = [0.3, 0.3, 0.6, 0.7]
    common = {
        "landmark_id": "lm",
        "reference_object_view": "Front",
        "answer_bbox_xyxy_norm": box,
        "difficulty": "4way",
    }
    views = {"reference_view_id": "view_00_front", "target_view_id": "view_06_left"}
    where = partial_model(
        ImageRow,
        sample_id="lm_self_shared_4way_000000_where",
        task_type="self_where",
        answer_label="Left",
        metadata=views,
        **common,
    )
    what = partial_model(
        ImageRow,
        sample_id="lm_self_shared_4way_000000_what",
        task_type="self_what",
        answer_label="Image 3",
        metadata={
            **views,
            "turn_degrees": 90,
            "turn_direction": "counterclockwise",
            "query_label": "Right",  # the observer's word for the same view
            "target_object_view": "Left",
        },
        **common,
    )
    env = partial_model(
        ImageRow,
        sample_id="lm_env_shared_4way_000000_where",
        task_type="env_where",
        answer_label="Left",
        metadata={"horizontal_deg": 20.0, "vertical_deg": -5.0},
        **{**common, "answer_bbox_xyxy_norm": [0.05, 0.3, 0.25, 0.5]},
    )
    rows = [where, what, env]
    for r in rows:
        r.reasoning_steps = steps_for(r)
    assert checks.check_reasoning(rows).reasons == {}

    # the self_what step names the observer's side, which self_where calls the other facade
    what.reasoning_steps = [
        s.model_copy(update={"answer": "Right"}) if s.operation == "INT" else s for s in what.reasoning_steps
    ]
    # an environment step on the wrong side of its answer
    env.reasoning_steps = [
        s.model_copy(update={"answer": "20 degrees to the right"}) if s.operation == "QUA" else s
        for s in env.reasoning_steps
    ]
    # a grounding step with another box
    where.reasoning_steps = [
        s.model_copy(update={"answer": "[0.100, 0.300, 0.600, 0.700]"}) if s.operation == "GND" else s
        for s in where.reasoning_steps
    ]
    assert checks.check_reasoning(rows).reasons == {
        what.sample_id: "reasoning steps name other facades than the paired self_where row",
        env.sample_id: "reasoning steps place a left answer on the right",
        where.sample_id: "reasoning step grounds another box than the answer",
    }
    # without its pair, a self_what row cannot be checked and is not released
    assert checks.check_reasoning([what]).reasons == {
        what.sample_id: "reasoning steps have no paired self_where row"
    }
