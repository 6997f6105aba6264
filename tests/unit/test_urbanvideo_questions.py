"""The 16 navigation question types on a hand-checkable block world (flat ground, a long hall
between the start and a tower, a fountain and a kiosk beside the way): every gold answer agrees
with the second code path QC uses, and the world mirrored left-right flips every answer that
depends on a side."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from skyqa.blob import LocalBlobStore
from skyqa.contracts.missions import MissionIndex, NavigationIndexRow
from skyqa.contracts.navigation import NavFrame, NavigationPlan, NavigationTask, NavState, NavVideo
from skyqa.contracts.qa import Option
from skyqa.contracts.urbanvideo import NavRow
from skyqa.families.base import PlanInputs
from skyqa.families.urbanvideo import words as W
from skyqa.families.urbanvideo.checks import DERIVE, moved
from skyqa.families.urbanvideo.family import FAMILY
from skyqa.families.urbanvideo.questions import BUILDERS, Mission, Question
from skyqa.v1 import scan_pb2

from services.mission_planner.navigation import (
    Flight,
    NavConfig,
    RouteLandmark,
    fly_leg,
    instruction,
    measured_landmarks,
    timeline,
)
from services.mission_planner.safety import ObstacleMap
from services.mission_planner.shapes import Target

pytestmark = pytest.mark.unit
FPS = 10.0
FOV = 90.0


def lm(lid: str, lo: tuple[float, float, float], hi: tuple[float, float, float], name: str) -> RouteLandmark:
    c = tuple((a + b) / 2 for a, b in zip(lo, hi, strict=True))
    s = tuple(b - a for a, b in zip(lo, hi, strict=True))
    return RouteLandmark(lid, int(lid.split("_")[1]), "building", "", name, Target(c, s, 2.0))  # type: ignore[arg-type]


def faces(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    axes = [np.arange(a, b + 0.01, 1.0) for a, b in zip(lo, hi, strict=True)]
    g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return g[np.any(np.isclose(g, lo) | np.isclose(g, hi), axis=1)]


def world(
    side: float, hall: float | None = 30.0, tower_y: float = 0.0, fountain_y: float = 0.0, span: float = 140.0
) -> tuple[ObstacleMap, list[RouteLandmark]]:
    """``side`` 1 or -1: the world as drawn, or mirrored across the x axis; ``hall``: the hall's
    height, None without it, ``span`` how far it reaches either side; ``tower_y``, ``fountain_y``:
    those moved sideways."""

    def box(lid: str, x0: float, y0: float, x1: float, y1: float, h: float, name: str) -> RouteLandmark:
        ys = sorted((side * y0, side * y1))
        return lm(lid, (x0, ys[0], 0.0), (x1, ys[1], h), name)

    marks = [
        box("lm_1", 100, tower_y - 10, 120, tower_y + 10, 40, "grey office tower"),
        box("lm_3", 16, fountain_y + 20, 22, fountain_y + 26, 10, "stone fountain"),
        box("lm_4", 90, 20, 96, 26, 4, "blue kiosk"),
    ]
    if hall is not None:
        marks.append(box("lm_2", 40, -span, 60, span, hall, "red brick hall"))
    ground = np.stack(np.meshgrid(np.arange(-150.0, 151, 2), np.arange(-150.0, 151, 2)), -1).reshape(-1, 2)
    cloud = [np.column_stack([ground, np.zeros(len(ground))])]
    keep = []
    for m in marks:
        lo = m.target.c - np.asarray(m.target.size) / 2
        hi = m.target.c + np.asarray(m.target.size) / 2
        cloud.append(faces(lo, hi))
        keep.append(ObstacleMap.keepout(lo, hi, 2.0))
    return ObstacleMap(np.concatenate(cloud), keep, 2.0), marks


def seen(p: NavState, m: RouteLandmark) -> NavFrame:
    """A pinhole stand-in for the renderer: the centre within the field of view and 150 m."""
    d = m.target.c - np.array([p.x, p.y, p.z])
    yaw, pitch = math.radians(p.yaw_deg), math.radians(p.camera_pitch_deg)
    fwd = np.array([math.cos(yaw) * math.cos(pitch), math.sin(yaw) * math.cos(pitch), math.sin(pitch)])
    left = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
    up = np.cross(fwd, left)
    f, x, y = float(d @ fwd), float(d @ left), float(d @ up)
    half = math.tan(math.radians(FOV / 2))
    if f <= 1 or abs(x / f) > half * 0.9 or abs(y / f) > half * 0.9 or np.linalg.norm(d) > 150:
        return NavFrame(frame=0, visible=False, visible_ratio=0.0, pixels=0, bbox_xyxy_norm=[0.0] * 4)
    u = 0.5 - x / f / half / 2
    return NavFrame(
        frame=0, visible=True, visible_ratio=1.0, pixels=500, bbox_xyxy_norm=[u - 0.02, 0.4, u + 0.02, 0.6]
    )


def mission(
    side: float, hall: float | None = 30.0, tower_y: float = 0.0, fountain_y: float = 0.0, span: float = 140.0
) -> NavigationTask:
    obstacles, marks = world(side, hall, tower_y, fountain_y, span)
    tower, fountain = marks[0], marks[1]
    f = Flight(NavState(x=0.0, y=0.0, z=20.0, yaw_deg=side * 20.0, camera_pitch_deg=0.0), NavConfig())
    fly_leg(f, fountain, 0, obstacles, marks, None)
    fly_leg(f, tower, 1, obstacles, marks, "whole")
    segments, poses, duration = timeline(f, FPS)
    plan = NavigationPlan(
        scene_id="blocks", traj_id="blocks_nav_route_000", kind="route", goal_part="whole",
        instruction=instruction("route", "whole", [fountain, tower], segments), route=["lm_3", "lm_1"],
        landmarks=[], start=poses[0], segments=segments, fps=FPS, frame_count=len(poses),
        duration_sec=duration, speeds={}, check={"collision_free": True, "min_distance_m": 2.0, "samples": 1},
        seed=0, attempt=0, poses=poses, alternatives=f.alternatives,
    )  # fmt: skip
    plan.landmarks = measured_landmarks(
        [fountain, tower], marks, np.array([[p.x, p.y, p.z] for p in poses]), NavConfig()
    )
    visibility = {
        m.landmark_id: [seen(p, m).model_copy(update={"frame": i}) for i, p in enumerate(poses)]
        for m in marks
        if m.landmark_id in {x.landmark_id for x in plan.landmarks}
    }
    video = NavVideo(path="task_rgb.mp4", fps=FPS, frame_count=len(poses), width=160, height=120, fov_deg=FOV)
    return NavigationTask(**plan.model_dump(), video=video, visibility=visibility)


def as_row(q: Question, task: NavigationTask) -> NavRow:
    options = [Option(option_id="ABCD"[k], label=lab) for k, lab in enumerate(q.options)]
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
    found = list(BUILDERS[kind](Mission(task)))  # type: ignore[index]
    assert found, f"no {kind} question on the block world"
    for q in found:
        assert q.options[0] not in q.options[1:] and len(q.options) >= 2
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
        "Turn left": "Turn right",
        "Turn right": "Turn left",
        "turned left": "turned right",
        "turned right": "turned left",
    }
    changed = 0
    for kind in ("landmark_position", "cognitive_map", "action_generation", "sequence_recall"):
        a = {(q.end_frame, q.question): q.options[0] for q in BUILDERS[kind](Mission(task))}
        b = {
            (q.end_frame, q.question.replace("right", "left")): q.options[0]
            for q in BUILDERS[kind](Mission(mirror))
        }
        for key, gold in a.items():
            other = b.get((key[0], key[1].replace("right", "left")))
            if other is not None and gold in flip:
                assert other == flip[gold], (kind, key)
                changed += 1
    assert changed >= 4


def golds(task: NavigationTask) -> dict[str, set[tuple[str, str]]]:
    return {
        kind: {(q.question, q.options[0]) for q in build(Mission(task))} for kind, build in BUILDERS.items()
    }


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
    m = Mission(task)
    found = {kind: len({q.key for q in build(m)}) for kind, build in BUILDERS.items()}
    one = Counter(r.task for r in plan_rows(task, tmp_path / "a", None, []))
    assert one == Counter({k: 1 for k, n in found.items() if n})
    two = plan_rows(task, tmp_path / "b", 3, [])
    assert Counter(r.task for r in two) == Counter(
        {k: min(3, len(list(BUILDERS[k](m)))) for k in found if found[k]}
    )
    assert len({r.sample_id for r in two}) == len(two)
    # a type asked alone gets the same questions as when every type is asked
    alone = plan_rows(task, tmp_path / "c", 3, ["duration", "causal"])
    assert {r.task for r in alone} == {"duration", "causal"}
    same = [r for r in two if r.task in {"duration", "causal"}]
    assert [(r.question, r.answer_label) for r in alone] == [(r.question, r.answer_label) for r in same]


@pytest.mark.parametrize(
    ("variant", "caption"),
    [
        ({}, "turn left, stone fountain, turn right, climb over the red brick hall, grey office tower"),
        (
            {"side": -1.0},
            "turn right, stone fountain, turn left, climb over the red brick hall, grey office tower",
        ),
        ({"hall": None}, "turn left, stone fountain, turn right, grey office tower"),
        # a tall, short hall: flying around it is quicker than over
        (
            {"hall": 60.0, "span": 12.0},
            "turn left, stone fountain, turn right, go around the red brick hall, grey office tower",
        ),
    ],
)
def test_the_flight_is_captioned_from_the_states_as_the_planner_flew_it(
    variant: dict[str, float | None], caption: str
) -> None:
    task = mission(**{"side": 1.0, **variant})  # type: ignore[arg-type]
    q = next(iter(BUILDERS["trajectory_captioning"](Mission(task))))
    assert q.options[0] == caption
    assert DERIVE["trajectory_captioning"](as_row(q, task), task) == caption
    # the second path reads the states: a flight whose states turn the other way disagrees
    flipped = task.model_copy(
        update={"poses": [p.model_copy(update={"yaw_deg": -p.yaw_deg}) for p in task.poses]}
    )
    assert DERIVE["trajectory_captioning"](as_row(q, flipped), flipped) != caption
