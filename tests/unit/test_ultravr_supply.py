"""The UltraVR-style family's row supply (skyqa issue #42): on the 40-landmark procedural run the
family planned no row at all. In the nadir view 89 of 266 small objects had no 3D measurement
(the survey's targets came from the fused map, which misses lamps and many cars: "object not in
the fused map" left every count of their class in their region uncertain), the oblique view
yielded no candidate, and the second survey was rejected because areas had to be a footprint's
width apart on a city narrower than two footprints.

- the builtin backend measures every small object of the scene a view shows (the AirSim backend
  keeps the fused map's);
- the oblique view of a dense scene yields candidates of every task, its top edge well below
  the horizon;
- areas half a footprint apart are planned, and each view settles where few objects lie on its
  centre lines or its border;
- an object whose doubt cannot change an answer (a white car on a split line for a count of red
  cars) does not remove the question, while one that could still does;
- categorical labels are asked in turns per group over the release's views together, so views
  each offering part of a group's labels ask it, every label equally often.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from group_scenes import entry
from skyqa import keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.fusion import InstanceTable
from skyqa.contracts.missions import MissionIndex
from skyqa.contracts.ultra import MeasuredObject, SurveyIndexRow, SurveyTask, SurveyView
from skyqa.contracts.ultravr import UltraRow
from skyqa.families.base import PlanInputs
from skyqa.families.ultravr import FAMILY, objects as O
from skyqa.families.ultravr.templates import CATEGORY, LABELS, PRESENCE_LABELS, View, candidates
from skyqa.sim import Intrinsics, Pose, load_scene, project
from skyqa.v1 import render_pb2, scan_pb2
from ultravr_layouts import GREEN, RED, WHITE, H, W, measured, random_layout, survey

from services.mission_planner import surveys as S
from services.mission_planner.safety import ObstacleMap

pytestmark = pytest.mark.unit

SCENE = "demo_city"
GRAY_OR_BLACK = [0.25, 0.25, 0.25]  # on the edge between two grey words, neither of them red


def fused_table(scene_id: str) -> InstanceTable:
    """What the fused map holds of the scene, as on the 40-landmark run: no street lamp (thin
    poles the scan barely sees), every other car and tree missing."""
    entries = [
        entry(o)
        for o in load_scene(scene_id).things()
        if o.semantic.name != "street_lamp" and not (o.semantic.name in ("car", "tree") and o.instance_id % 2)
    ]
    return InstanceTable(scene_id=scene_id, instance_source="test", classes=[], instances=entries)


def ground(scene_id: str) -> ObstacleMap:
    x0, x1, y0, y1 = load_scene(scene_id).extent
    g = np.mgrid[x0:x1:2.0, y0:y1:2.0].reshape(2, -1).T
    return ObstacleMap(np.column_stack([g, np.zeros(len(g))]), [], 2.0)


def scan(
    scene_id: str, count: int = 1, size: tuple[int, int] = (1536, 1152), gsd: float = 0.1
) -> scan_pb2.ScanRequest:
    req = scan_pb2.ScanRequest(run_id="r", scene_id=scene_id, seed=8)
    req.surveys.count, req.surveys.gsd_m, req.surveys.fov_deg = count, gsd, 90.0
    req.surveys.width, req.surveys.height = size
    return req


@pytest.fixture(scope="module")
def rendered(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[render_pb2.VideoJob, SurveyTask, InstanceTable]:
    """One survey of the demo city planned on the builtin backend against the fused map above,
    rendered at 1536x1152 (0.1 m a pixel: a car is some 800 pixels)."""
    from skyqa.sim import BuiltinSimulator

    from services.renderer.survey import render_survey

    store = LocalBlobStore(tmp_path_factory.mktemp("ultravr_supply"))
    table = fused_table(SCENE)
    _, rejected, jobs = S.plan_all("r", SCENE, "builtin", table, ground(SCENE), scan(SCENE), 80, store)
    assert rejected == [] and len(jobs) == 1
    done = render_survey(jobs[0], BuiltinSimulator(load_scene(SCENE)), store)
    return jobs[0], S.bundle(done, store), table


def test_the_builtin_backend_measures_what_the_fused_map_lacks(
    rendered: tuple[render_pb2.VideoJob, SurveyTask, InstanceTable],
) -> None:
    """Every small object a view shows gets its in-frame and occluded shares, lamps and the cars
    the fused map lacks too: none is unmeasured (the run's "object not in the fused map")."""
    job, task, table = rendered
    mapped = {i.instance_id for i in table.instances}
    targets = {t.instance_id for t in job.targets}
    assert targets - mapped, "the scene's objects, not the fused map's, are the targets"
    for measured_view in task.measured:
        small = [m for m in measured_view.objects if m.class_name in O.NOUNS]
        lacking = [m for m in small if m.instance_id not in mapped]
        assert {m.class_name for m in lacking} >= {"street_lamp", "car"}
        assert all(m.in_frame >= 0 and m.occluded >= 0 and len(m.lit_rgb) == 3 for m in small)
        objs = O.objects_of(measured_view.objects, task.width, task.height)
        assert [o for o in objs if o.problem == O.UNMAPPED] == []


def test_the_airsim_backend_keeps_the_fused_map_s_objects(tmp_path: Path) -> None:
    """Its scene is not readable by the planner: the targets are the fused map's, every one
    that projects into a view."""
    assert S.scene_things("airsim", SCENE, None) is None
    store = LocalBlobStore(tmp_path)
    table = fused_table(SCENE)
    req = scan(SCENE, size=(1024, 768))
    _, _, jobs = S.plan_all("r", SCENE, "airsim", table, ground(SCENE), req, 80, store)
    targets = {t.instance_id for t in jobs[0].targets}
    small = {i.instance_id for i in table.instances if i.class_name in S.SMALL}
    assert targets and targets <= small


def test_the_oblique_view_of_a_dense_scene_yields_candidates_of_every_task(
    rendered: tuple[render_pb2.VideoJob, SurveyTask, InstanceTable],
) -> None:
    """The run's oblique view yielded none: its objects were unmeasured, it was aimed at an
    object (on both centre lines) and its top edge looked 3 degrees below the horizon. Its
    upper regions now end within a few heights of the camera."""
    _, task, _ = rendered
    kinds = [v.view for v in task.views]
    oblique = task.views[kinds.index("oblique")]
    half_height = math.degrees(math.atan(task.height / task.width * math.tan(math.radians(task.fov_deg / 2))))
    assert -oblique.pose[4] - half_height >= 18.0
    measured_view = task.measured[kinds.index("oblique")]
    # every building the view shows stands for a reviewed landmark, each named apart (the
    # review's descriptions): the conditioned comparison counts near them
    names = {
        m.instance_id: f"{m.class_name.replace('_', ' ')} {m.instance_id}"
        for m in measured_view.objects
        if m.category == "building"
    }
    view = View(
        O.objects_of(measured_view.objects, task.width, task.height),
        task.width,
        task.height,
        landmarks=O.landmarks_of(measured_view.objects, names, task.width, task.height),
    )
    found = Counter(c.task for c in candidates(view, claim_offset=0, rng=np.random.default_rng(0)))
    assert set(found) == set(CATEGORY), found


def test_areas_half_a_footprint_apart_are_both_surveyed() -> None:
    """Two clusters 0.6 of a footprint apart: the second was rejected ("no further area") when
    areas had to be a footprint's width apart."""
    half = (50.0, 40.0)
    things = [
        S.SceneThing(n, "car", [x + (n % 5), y + (n // 5) % 5, 0.7], [4.5, 1.8, 1.4])
        for n, (x, y) in enumerate([(0.0, 0.0)] * 25 + [(60.0, 0.0)] * 20)
    ]
    centres = S.choose_areas(things, 3, half)
    assert len(centres) == 2
    assert abs(centres[0][0] - centres[1][0]) >= half[0]


def test_a_view_settles_off_the_objects_on_its_centre_lines() -> None:
    """An area is centred on an object, so that object lay on both split lines, and a centre
    line along a street held the street's cars: the view shifts to where none is near a line
    or across the border."""
    k = Intrinsics.from_fov(1000, 800, 90.0)
    pose = [0.0, 0.0, 50.0, 90.0, -90.0, 0.0]
    street = [S.SceneThing(n, "car", [-40.0 + 8.0 * n, 0.0, 0.7], [4.5, 1.8, 1.4]) for n in range(11)]
    things = [*street, S.SceneThing(99, "tree", [0.0, 10.0, 3.0], [4.0, 4.0, 6.0])]
    view = SurveyView(view="nadir", pose=pose)
    moved = S.settle(view, things, k, 5.0, ground("tiny_town"))
    centres = np.array([t.center for t in things])
    shifts = np.zeros((1, 2))
    radii = np.array([max(t.size) / 2 for t in things])
    assert S.crowding(pose, centres, radii, k, shifts)[0] >= len(street)
    assert S.crowding(moved.pose, centres, radii, k, shifts)[0] == 0
    px, _ = project(centres, Pose(*moved.pose), k)
    assert np.all(np.abs(px[:, 1] - k.cy) >= S.SPLIT_BAND * k.height)


def test_an_object_whose_doubt_cannot_change_a_count_does_not_remove_it() -> None:
    """Red cars in the upper-left region: a white car on the vertical split line, or one whose
    colour lies between gray and black, is no red car in any region; a red car on the line, or
    one too small to tell, still leaves the count in doubt."""
    clear_red = measured(1, "car", [100, 100, 160, 124], lit_rgb=RED)
    line = [480, 200, 540, 224]  # centre 10 px right of the vertical split line (BOUNDARY: 20 px)
    red = O.Bundle(("car",), "cars", colour="red")

    def count(*extra: MeasuredObject) -> O.Tally:
        return O.tally(O.objects_of([clear_red, *extra], W, H), red, "upper-left")

    assert count().count == 1
    assert count(measured(2, "car", line, lit_rgb=WHITE)).count == 1
    assert count(measured(2, "car", [300, 200, 360, 224], lit_rgb=GRAY_OR_BLACK)).count == 1
    assert O.objects_of([measured(2, "car", line, lit_rgb=GRAY_OR_BLACK)], W, H)[0].colour is None
    assert count(measured(2, "car", line, lit_rgb=GRAY_OR_BLACK)).count == 1
    assert count(measured(2, "car", line, lit_rgb=RED)).problem == O.NEAR_BOUNDARY
    assert count(measured(2, "car", [300, 200, 304, 204], lit_rgb=WHITE)).problem == O.BELOW_FLOOR
    # the whole class's list on the way to a presence answer leaves the white one out too
    cars = O.Bundle(("car",), "cars")
    objs = O.objects_of([clear_red, measured(2, "car", line, lit_rgb=WHITE)], W, H)
    assert [o.instance_id for o in O.tally(objs, cars, "upper-left", by=red).members] == [1]
    assert O.tally(objs, cars, "upper-left").problem == O.NEAR_BOUNDARY


def test_a_name_stays_unique_beside_an_object_of_another_colour_on_the_line() -> None:
    """ "The red car in the upper-left region" names one object although a white car sits on the
    region's split line; a car on the line whose colour could be red takes the name away."""
    from skyqa.families.ultravr.templates import _named

    red_car = measured(1, "car", [100, 100, 160, 124], lit_rgb=RED)
    white_on_line = measured(2, "car", [480, 200, 540, 224], lit_rgb=WHITE)
    red_on_line = measured(3, "car", [480, 300, 540, 324], lit_rgb=RED)
    trees = [measured(4, "tree", [300, 100, 350, 150], lit_rgb=GREEN, elongation=1.0)]
    name = "the red car in the upper-left region"
    assert name in _named(View(O.objects_of([red_car, white_on_line, *trees], W, H), W, H))
    assert name not in _named(View(O.objects_of([red_car, red_on_line, *trees], W, H), W, H))


def test_an_extreme_object_is_certain_beside_a_trailing_object_on_the_line() -> None:
    """The leftmost car of the upper-left region is certain though a car sits on the vertical
    split line far to its right; not when the doubtful car could be the leftmost."""
    from skyqa.families.ultravr.templates import _extreme_of

    left = measured(1, "car", [100, 100, 160, 124])
    trailing = measured(2, "car", [480, 200, 540, 224])
    v = View(O.objects_of([left, trailing], W, H), W, H)
    got = _extreme_of(v, "car", "upper-left", "leftmost")
    assert isinstance(got, O.Obj) and got.instance_id == 1
    # on the horizontal split line, further left than the clear car: it could be the leftmost
    rival = measured(3, "car", [50, 390, 110, 414])
    v = View(O.objects_of([left, rival], W, H), W, H)
    assert _extreme_of(v, "car", "upper-left", "leftmost") == O.NEAR_BOUNDARY


def test_views_that_each_offer_part_of_a_group_s_labels_ask_it_together(tmp_path: Path) -> None:
    """Horizontally oriented trucks: one view shows one in every region (it offers "yes, yes"
    only), another one in the upper-left region only (every pattern but "yes, yes"): neither
    alone offers the group every presence label, so neither asked it (the run's views offered
    two or three labels per bundle, and no view asked a presence question); together they do,
    and the group's rows take every label equally often (within the turn cut short when the
    views run out of one)."""
    corners = [[100, 100, 160, 120], [700, 100, 760, 120], [100, 600, 160, 620], [700, 600, 760, 620]]
    views = {
        "s_survey_000": [measured(n + 1, "truck", b) for n, b in enumerate(corners)],
        "s_survey_001": [measured(1, "truck", corners[0])],
    }
    store, rows = LocalBlobStore(tmp_path), []
    for sid, objects in views.items():
        task = survey(objects).model_copy(update={"survey_id": sid})
        key = f"{keys.final_task('r', sid)}/{keys.SURVEY_TASK}"
        store.put(key, dump_json(task), "application/json")
        rows.append(SurveyIndexRow(survey_id=sid, task=key))

    def presence(surveys: list[SurveyIndexRow]) -> list[str]:
        index = MissionIndex(scene_id="s", missions=[], rejected=[], surveys=surveys)
        planned = FAMILY.plan(
            PlanInputs("r", "s", "builtin", 3, scan_pb2.ScanRequest(), store, [], {}, index)
        )
        return [r.answer_label for r in planned.rows if r.task == "presence_pattern"]

    assert presence(rows[:1]) == [] and presence(rows[1:]) == []
    golds = Counter(presence(rows))
    assert set(golds) == set(PRESENCE_LABELS), golds
    assert max(golds.values()) - min(golds.values()) <= 1, golds


def group_of(r: UltraRow) -> str:
    """What the row's question is about, as planning groups it."""
    ev: Any = r.evidence
    if r.task in ("count_order", "presence_pattern"):
        return str(ev["first"]["bundle"])
    if r.task == "claim_pattern":
        return str(ev["bundle"])
    if r.task == "extreme_relation":
        return f"{ev['first']['class']}|{ev['second']['class']}"
    return str(ev["first"]["description"]).rsplit(" in the ", 1)[1]  # relative position: the region


def test_given_its_group_every_label_is_the_gold_equally_often(tmp_path: Path) -> None:
    """Over 30 random views planned together: per categorical task and group (a bundle, two
    classes, a region), the golds take the task's labels in turns, so that what the question
    is about says nothing of its answer (at most one turn per group is cut short, by a view's
    ``PER_TASK`` or a question asked once)."""
    store, surveys = LocalBlobStore(tmp_path), []
    for n in range(30):
        task = survey(random_layout(np.random.default_rng([11, n]))).model_copy(
            update={"survey_id": f"s_survey_{n:03d}", "width": 8192, "height": 6144}
        )
        key = f"{keys.final_task('r', task.survey_id)}/{keys.SURVEY_TASK}"
        store.put(key, dump_json(task), "application/json")
        surveys.append(SurveyIndexRow(survey_id=task.survey_id, task=key))
    index = MissionIndex(scene_id="s", missions=[], rejected=[], surveys=surveys)
    rows = FAMILY.plan(PlanInputs("r", "s", "builtin", 3, scan_pb2.ScanRequest(), store, [], {}, index)).rows
    for name, labels in LABELS.items():
        mine = [r for r in rows if r.task == name]
        assert len(mine) >= 40, name
        per: dict[str, Counter[str]] = {}
        for r in mine:
            per.setdefault(group_of(r), Counter())[r.answer_label] += 1
        for group, golds in per.items():
            counts = [golds.get(lab, 0) for lab in labels]
            assert max(counts) - min(counts) <= 1, (name, group, counts)
