"""The 16 navigation question types on a hand-checkable block world (flat ground, a long hall
between the start and a tower, a fountain and a kiosk beside the way): every gold answer agrees
with the second code path QC uses, and the world mirrored left-right flips every answer that
depends on a side."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from nav_blocks import FPS, build, mission
from skyqa.blob import LocalBlobStore
from skyqa.contracts.missions import MissionIndex, NavigationIndexRow
from skyqa.contracts.navigation import NavigationTask, NavState
from skyqa.contracts.qa import Option
from skyqa.contracts.urbanvideo import NavRow
from skyqa.families.base import PlanInputs
from skyqa.families.urbanvideo import words as W
from skyqa.families.urbanvideo.checks import DERIVE, moved
from skyqa.families.urbanvideo.family import FAMILY
from skyqa.families.urbanvideo.questions import BUILDERS, VOCABULARY, Question
from skyqa.v1 import scan_pb2

pytestmark = pytest.mark.unit


def as_row(q: Question, task: NavigationTask) -> NavRow:
    options = [Option(option_id="ABCDEFGH"[k], label=lab) for k, lab in enumerate(q.options)]
    return NavRow(
        sample_id="s", scene_id="blocks", engine="builtin", task=q.task, task_display_name=q.task,
        group="recall", mission_id=task.traj_id, mission_kind="route", instruction=task.instruction,
        video_path="v.mp4", fps=FPS, clip_end_frame=q.end_frame, frame_count=task.frame_count,
        question=q.question, options=options, answer_option_id="A", answer_label=q.options[0],
        evidence=q.evidence, difficulty="easy", prompt_text="", user_prompt="", system_prompt="",
    )  # fmt: skip


@pytest.fixture(scope="module")
def flights() -> tuple[NavigationTask, NavigationTask]:
    return mission(1.0), mission(-1.0)


def test_the_mission_is_what_the_world_makes_of_it(flights: tuple[NavigationTask, NavigationTask]) -> None:
    task, _ = flights
    assert task.instruction.startswith("Turn left and fly forward to the stone fountain")
    assert any(s.reason == "clear_obstacle" and s.blocked_by == "lm_2" for s in task.segments)
    assert not any(a.feasible for a in task.alternatives if a.option == "straight" and a.leg == 1)


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_every_type_has_questions_whose_gold_the_second_path_derives(
    kind: str, flights: tuple[NavigationTask, NavigationTask]
) -> None:
    task, _ = flights
    found = build(kind, task)
    assert found, f"no {kind} question on the block world"
    for q in found:
        # a pool's distractors are added by the family, over the release
        assert q.options[0] not in q.options[1:] and len(q.options) >= (1 if q.pool else 2)
        assert 0 <= q.end_frame < task.frame_count
        if kind in DERIVE:
            assert DERIVE[kind](as_row(q, task), task) == q.options[0], (kind, q.question)


def test_mirroring_the_world_flips_what_depends_on_a_side(
    flights: tuple[NavigationTask, NavigationTask],
) -> None:
    task, mirror = flights
    assert [s.action for s in mirror.segments] == [
        {"turn_left": "turn_right", "turn_right": "turn_left"}.get(s.action, s.action) for s in task.segments
    ]
    flip = {
        "ahead on the left": "ahead on the right",
        "ahead on the right": "ahead on the left",
        "behind on the left": "behind on the right",
        "behind on the right": "behind on the left",
        "to its left": "to its right",
        "to its right": "to its left",
        "Rotate left": "Rotate right",
        "Rotate right": "Rotate left",
        "turned left": "turned right",
        "turned right": "turned left",
    }
    changed = 0
    for kind in ("landmark_position", "cognitive_map", "action_generation", "sequence_recall"):
        a = {(q.end_frame, q.question): q.options[0] for q in build(kind, task)}
        b = {(q.end_frame, q.question.replace("right", "left")): q.options[0] for q in build(kind, mirror)}
        for key, gold in a.items():
            other = b.get((key[0], key[1].replace("right", "left")))
            if other is not None and gold in flip:
                assert other == flip[gold], (kind, key)
                changed += 1
    assert changed >= 4


def golds(task: NavigationTask) -> dict[str, set[tuple[str, str]]]:
    return {kind: {(q.question, q.options[0]) for q in build(kind, task)} for kind in BUILDERS}


def test_a_changed_world_changes_the_answers_of_every_type(
    flights: tuple[NavigationTask, NavigationTask],
) -> None:
    """Against the world as drawn, each type's questions and gold answers differ in at least one
    variant: mirrored, without the hall, the tower or the fountain moved sideways."""
    task, mirror = flights
    here = golds(task)
    variants = [mission(1.0, hall=None), mission(1.0, tower_y=60.0), mission(1.0, fountain_y=45.0)]
    there = [golds(mirror), *(golds(v) for v in variants)]
    same = [kind for kind in BUILDERS if all(other[kind] == here[kind] for other in there)]
    assert not same, f"no variant changes the answers of {same}"


def test_the_next_action_is_read_off_the_states() -> None:
    a = NavState(x=0.0, y=0.0, z=10.0, yaw_deg=170.0, camera_pitch_deg=0.0)
    assert moved(a, a.model_copy(update={"yaw_deg": -175.0})) == "turn_left"  # across the +-180 seam
    assert moved(a, a.model_copy(update={"z": 9.0})) == "descend"
    assert moved(a, a.model_copy(update={"camera_pitch_deg": -5.0})) == "rotate_camera_down"
    assert moved(a, a) == "hover"
    assert W.COMMAND[moved(a, a.model_copy(update={"x": 1.0}))] == "Fly forward"


def plan_rows(task: NavigationTask, tmp_path: Path, per_type: int | None, types: list[str]) -> list[NavRow]:
    store = LocalBlobStore(tmp_path / "store")
    store.put("runs/r/task.json", task.model_dump_json().encode())
    scan = scan_pb2.ScanRequest(scene_id="blocks", run_id="r")
    if per_type is not None:
        scan.navigation.per_type = per_type
    scan.navigation.types.extend(types)
    index = MissionIndex(
        scene_id="blocks",
        missions=[],
        rejected=[],
        navigation=[
            NavigationIndexRow(
                traj_id=task.traj_id,
                kind=task.kind,
                goal_part=task.goal_part,
                route=task.route,
                task="runs/r/task.json",
                video=task.video.path,
                frame_count=task.frame_count,
                duration_sec=task.duration_sec,
            )
        ],
    )
    inputs = PlanInputs(
        run_id="r", scene_id="blocks", engine="builtin", seed=0, scan=scan, store=store,
        landmarks=[], excluded={}, missions=index,
    )  # fmt: skip
    return FAMILY.plan(inputs).rows


def test_questions_per_type_and_the_types_asked_come_from_the_scan(
    flights: tuple[NavigationTask, NavigationTask], tmp_path: Path
) -> None:
    task = flights[0]
    found = {kind for kind in BUILDERS if build(kind, task)}
    one = Counter(r.task for r in plan_rows(task, tmp_path / "a", None, []))
    # one mission's one row of a fixed vocabulary cannot have its labels each be the answer (nor
    # can a counterfactual's three answers each be asked); alone, no landmark another mission
    # flies to can stand in a caption for one of its own, nor are there five causes, next moves or
    # landmarks (the golds of other missions) for the options of a Causal, Sequence Recall, Scene
    # Recall, Start/End or Association row
    unasked = {"trajectory_captioning", "counterfactual", "causal", "sequence_recall", "scene_recall",
               "start_end_position", "association"}  # fmt: skip
    assert set(one.values()) == {1} and set(one) == found - set(VOCABULARY) - unasked
    two = plan_rows(task, tmp_path / "b", 3, [])
    assert all(n <= 3 for n in Counter(r.task for r in two).values())
    assert any(n > 1 for n in Counter(r.task for r in two).values())
    assert not FAMILY.balance(two)  # the plan left out what the release's balance would drop
    assert len({r.sample_id for r in two}) == len(two)
    # a type asked alone gets the same questions as when every type is asked
    alone = plan_rows(task, tmp_path / "c", 3, ["progress_evaluation", "object_recall"])
    assert {r.task for r in alone} == {"progress_evaluation", "object_recall"}
    same = [r for r in two if r.task in {"progress_evaluation", "object_recall"}]
    assert [(r.question, r.answer_label) for r in alone] == [(r.question, r.answer_label) for r in same]


@pytest.mark.parametrize(
    ("variant", "caption"),
    [
        (
            {},
            "The drone turned left and reached the stone fountain, then turned right, climbed over "
            "the red brick hall and reached the grey office tower.",
        ),
        (
            {"side": -1.0},
            "The drone turned right and reached the stone fountain, then turned left, climbed over "
            "the red brick hall and reached the grey office tower.",
        ),
        (
            {"hall": None},
            "The drone turned left and reached the stone fountain, then turned right and reached the "
            "grey office tower.",
        ),
        # a tall, short hall: flying around it is quicker than over
        (
            {"hall": 60.0, "span": 12.0},
            "The drone turned left and reached the stone fountain, then turned right, went around "
            "the red brick hall and reached the grey office tower.",
        ),
    ],
)
def test_the_flight_is_captioned_from_the_states_as_the_planner_flew_it(
    variant: dict[str, float | None], caption: str
) -> None:
    task = mission(**{"side": 1.0, **variant})  # type: ignore[arg-type]
    q = build("trajectory_captioning", task)[0]
    assert q.options[0] == caption
    assert DERIVE["trajectory_captioning"](as_row(q, task), task) == caption
    # the second path reads the states: a flight whose states turn the other way disagrees
    flipped = task.model_copy(
        update={"poses": [p.model_copy(update={"yaw_deg": -p.yaw_deg}) for p in task.poses]}
    )
    assert DERIVE["trajectory_captioning"](as_row(q, flipped), flipped) != caption


def test_a_flight_around_an_unlabelled_structure_is_captioned_without_it() -> None:
    """A leg that climbed over or went around a structure without a description is summed up by
    its turn and where it led ("around a structure" names nothing a person could point at), as
    QC reads it off the states when no landmark stood in the way; where a described landmark
    did stand in the way by the states, QC refuses that caption. No move is named after it."""
    task = mission(1.0)
    bare = task.model_copy(
        update={"segments": [s.model_copy(update={"blocked_by": ""}) for s in task.segments]}
    )
    hall = next(lm.landmark_id for lm in task.landmarks if "hall" in lm.description)
    unlisted = bare.model_copy(update={"landmarks": [lm for lm in bare.landmarks if lm.landmark_id != hall]})
    assert "hall" in build("trajectory_captioning", task)[0].options[0]
    for flight in (bare, unlisted):
        q = build("trajectory_captioning", flight)[0]
        assert not any("structure" in x or "hall" in x for x in q.options)
        agrees = DERIVE["trajectory_captioning"](as_row(q, flight), flight) == q.options[0]
        assert agrees == (flight is unlisted)
    for kind in ("sequence_recall", "proximity", "scene_recall"):
        assert not any("hall" in str(q.evidence["moment"]) for q in build(kind, bare)), kind
    assert not any("hall" in q.options[0] for q in build("causal", bare))
