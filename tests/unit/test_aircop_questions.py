"""The AirCopBench rules on a hand-built street (a red car, a tall white truck west of it, a blue
car north): UAV1 looks at the car over the truck, UAV2 from the east with nothing in between,
UAV3 from high and far, UAV4 and UAV5 away from the street (five UAVs, so that who to
collaborate with has the source's four options). Who, when, why and what to collaborate, quality and the object questions
follow from what the renderer measured and what each view's degradation did."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from group_scenes import render_group
from PIL import Image
from skyqa import media
from skyqa.blob import LocalBlobStore
from skyqa.contracts.aircop import GroupIndexRow, GroupTask
from skyqa.contracts.degradation import KINDS
from skyqa.contracts.missions import MissionIndex
from skyqa.degrade import LEVELS, degraded_jpeg, draw, lost_mask
from skyqa.families.aircop import facts as F
from skyqa.families.aircop.checks import check_rows
from skyqa.families.aircop.family import FAMILY
from skyqa.families.aircop.paths import marked_path
from skyqa.families.aircop.questions import BUILDERS, CAUSE, USABLE, WHEN, WHY, Group, Question
from skyqa.families.base import PlanInputs
from skyqa.v1 import scan_pb2

from services.qa_generator.assets import degrade_view

pytestmark = pytest.mark.unit

POSES = [
    [-30.0, 0.0, 6.0, 0.0, -10.0, 0.0],  # behind the truck
    [30.0, 0.0, 6.0, 180.0, -10.0, 0.0],  # clear
    [0.0, -45.0, 40.0, 90.0, -40.0, 0.0],  # high, south
    [90.0, 90.0, 30.0, 45.0, -30.0, 0.0],  # north-east, looking away
    [-90.0, -90.0, 35.0, 225.0, -30.0, 0.0],  # south-west, looking away
]


def render(tmp_path: Path, truck: bool = True) -> tuple[GroupTask, LocalBlobStore]:
    return render_group(tmp_path, POSES, truck)


def group(task: GroupTask, store: LocalBlobStore, kinds: dict[int, tuple[str, float]] | None = None) -> Group:
    final = "runs/r/video_tasks/missions/street_hand_000/final_task"
    frames, masks, classes, qualities, views = [], [], [], [], []
    for u in range(len(task.uavs)):
        clean = store.get(f"{final}/{task.images[u]}")
        frames.append(np.asarray(Image.open(io.BytesIO(clean)).convert("RGB")))
        cls, instance = media.decode_segmentation(store.get(f"{final}/{task.segmentation[u]}"))
        masks.append(instance)
        classes.append(cls)
        kind, strength = (kinds or {}).get(u, ("none", 0.0))
        d = draw(kind, strength, seed=u)  # type: ignore[arg-type]
        _, m = degraded_jpeg(clean, d)
        qualities.append(F.ViewQuality(d, m.quality, m.limited_by))
        views.append(F.contents(cls, instance, lost_mask(d, instance.shape[1], instance.shape[0])))
    names = F.unique_names(task, frames, masks, classes)
    return Group(task, F.perceive(task, qualities), qualities, names, views)


def asked(g: Group, kind: str, uav: str, about: str = "") -> Question:
    found = [q for q in BUILDERS[kind](g) if q.uav == uav and about in q.question]
    assert len(found) == 1, [q.question for q in BUILDERS[kind](g)]
    return found[0]


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[GroupTask, LocalBlobStore]:
    return render(tmp_path_factory.mktemp("street"))


def test_objects_are_named_by_the_colour_their_pixels_show(scene: tuple[GroupTask, LocalBlobStore]) -> None:
    g = group(*scene)
    assert g.names == {1: "red car", 2: "white truck", 3: "blue car"}


def test_the_car_hidden_from_uav1_makes_uav2_the_one_to_ask(scene: tuple[GroupTask, LocalBlobStore]) -> None:
    g = group(*scene)
    car1, car2 = g.seen[0][0], g.seen[1][0]
    assert (car1.state, car2.state) == ("occluded", "clear")
    assert asked(g, "who_to_collaborate", "UAV1", "red car").gold == "UAV2"
    assert asked(g, "when_to_collaborate", "UAV1", "red car").gold == WHEN["occluded"]
    assert asked(g, "when_to_collaborate", "UAV2", "red car").gold == WHEN["clear"]
    why = asked(g, "why_to_collaborate", "UAV1", "red car")
    assert why.gold == WHY["occluded"]
    assert asked(g, "causal_assessment", "UAV1", "red car").gold == CAUSE["occluded"]
    assert asked(g, "usability_assessment", "UAV1", "red car").gold == USABLE["occluded"]
    what = [q for q in BUILDERS["what_to_collaborate"](g) if q.uav == "UAV1"]
    assert all(q.gold != "the white truck" for q in what)  # UAV1 sees the truck itself


def test_without_the_truck_uav1_needs_no_help(tmp_path: Path) -> None:
    g = group(*render(tmp_path, truck=False))
    assert g.seen[0][0].state == "clear"
    assert asked(g, "when_to_collaborate", "UAV1", "red car").gold == WHEN["clear"]
    assert not [q for q in BUILDERS["who_to_collaborate"](g) if q.uav == "UAV1" and "red car" in q.question]


def test_heavier_noise_lowers_the_quality_and_a_ruined_view_helps_nobody(
    scene: tuple[GroupTask, LocalBlobStore],
) -> None:
    light = group(*scene, kinds={1: ("noise", 0.05)})
    heavy = group(*scene, kinds={1: ("noise", 1.0)})
    gold = {g: LEVELS.index(asked(g, "quality_assessment", "UAV2").gold) for g in (light, heavy)}
    assert gold[light] > gold[heavy] and gold[heavy] < F.USABLE_QUALITY
    assert heavy.seen[1][0].state == "degraded"
    assert asked(heavy, "causal_assessment", "UAV2", "red car").gold == CAUSE["noise"]
    # with UAV2's view ruined, UAV3's small but clear view of the red car is the one to ask
    assert asked(light, "who_to_collaborate", "UAV1", "red car").gold == "UAV2"
    assert asked(heavy, "who_to_collaborate", "UAV1", "red car").gold == "UAV3"


def test_object_questions_read_the_measured_views(scene: tuple[GroupTask, LocalBlobStore]) -> None:
    task = scene[0]
    g = group(*scene)
    # UAV2 looks west along the street from 30 m: the white truck stands behind the red car,
    # their boxes overlap, so neither is grounded relative to the other
    about = "red car appear relative to the white"
    assert not [q for q in BUILDERS["object_grounding"](g) if q.uav == "UAV2" and about in q.question]
    # every vehicle UAV2's picture shows is counted, read off its segmentation
    cars = [i for i in g.views[1].instances if i.category == "vehicle"]
    assert all(F.counted(i, g.views[1], g.q[1], task.width, task.height) for i in cars)
    assert (
        asked(g, "object_counting", "UAV2", "vehicles can be made out in UAV2").gold == str(len(cars)) == "3"
    )
    # UAV1 looks east: the blue car, 10 m north, is left of the truck in its picture; UAV3 sees
    # the blue car with too few pixels to be sure of it, so nothing is grounded on it there
    grounded = {(q.uav, q.question): q.gold for q in BUILDERS["object_grounding"](g)}
    assert (
        grounded["UAV1", "In UAV1's image, where does the blue car appear relative to the white truck?"]
        == "on its left"
    )
    assert not [u for u, q in grounded if u == "UAV3" and "blue car" in q]
    # matching points at the object by colour, class and the object nearest it
    matched = {q.question: q.gold for q in BUILDERS["object_matching"](g)}
    asked_ = (
        "In UAV1's image, take the blue car nearest the white truck. In UAV2's image, where does "
        "that same object appear relative to the white truck?"
    )
    assert matched[asked_] == "on its right"  # UAV2 looks west: north is on the right
    # UAV1 and UAV2 both fly at 6 m, and all three 30 m off: no UAV is lowest or farthest by a
    # margin a person could see, so no posture is asked (there is no "about equal" answer)
    assert not list(BUILDERS["observing_posture"](g))


def test_qc_rederives_the_planned_answers_from_the_stored_views_and_catches_a_wrong_one(
    tmp_path: Path,
) -> None:
    task, store = render(tmp_path)
    # the group flown eight times under other ids, each copy's views degraded anew: a release
    # needs four golds of a fixed label space (quality) before it asks one (family.even_golds)
    final = "runs/r/video_tasks/missions/{}/final_task"
    rows_of_index = []
    for n in range(8):
        gid = task.group_id if n == 0 else f"{task.group_id}_copy{n}"
        for name in [*task.images, *task.segmentation]:
            if n:
                store.put(f"{final.format(gid)}/{name}", store.get(f"{final.format(task.group_id)}/{name}"))
        key = f"{final.format(gid)}/group_task.json"
        if n:
            store.put(key, task.model_copy(update={"group_id": gid}).model_dump_json().encode())
        rows_of_index.append(GroupIndexRow(group_id=gid, size=5, task=key))
    index = MissionIndex(scene_id="street", missions=[], rejected=[], groups=rows_of_index)
    scan = scan_pb2.ScanRequest(scene_id="street", run_id="r")
    inputs = PlanInputs(
        run_id="r", scene_id="street", engine="builtin", seed=4, scan=scan, store=store,
        landmarks=[], excluded={}, missions=index,
    )  # fmt: skip
    planned = FAMILY.plan(inputs)
    assert {d.degradation.kind for d in planned.degraded} <= set(KINDS)
    assert len([d for d in planned.degraded if not d.marked]) == 8 * 5  # one per view, and boxed copies
    for g in planned.degraded:
        degrade_view(store, "runs/r", g)
    degraded = {g.output_image: g for g in planned.degraded}
    groups: dict[str, GroupTask | None] = {
        r.group_id: task.model_copy(update={"group_id": r.group_id}) for r in planned.rows
    }
    rows = [r for r in planned.rows if r.group_id == task.group_id]
    assert any(r.task == "quality_assessment" for r in planned.rows)
    rows += [r for r in planned.rows if r.task == "quality_assessment" and r not in rows][:1]
    # one group of five UAVs: no posture or comparison leads by a visible margin
    assert len({r.task for r in rows}) >= 6
    assert all([o.option_id for o in r.options] == list("ABCD") for r in rows)
    assert not check_rows(rows, groups, store, "r", degraded).reasons
    # a row cut to three options is refused, whatever its gold
    short = rows[0].model_copy(
        update={"options": [o for o in rows[0].options if o.option_id == rows[0].answer_option_id]
                + [o for o in rows[0].options if o.option_id != rows[0].answer_option_id][:2]}
    )  # fmt: skip
    assert "four options" in check_rows([short], groups, store, "r", degraded).reasons[short.sample_id]
    # a gold moved to another option, and a shipped view swapped for a clean one
    other = next(o for o in rows[0].options if o.option_id != rows[0].answer_option_id)
    wrong = rows[0].model_copy(update={"answer_option_id": other.option_id, "answer_label": other.label})
    assert check_rows([wrong], groups, store, "r", degraded).reasons == {
        wrong.sample_id: "answer disagrees with the re-measured views"
    }
    # a count inside a red box: the model is shown the UAV's degraded view with the box drawn
    # on it; a row whose region moved, or that shows the view without the box, is refused
    boxed = next(r for r in rows if r.task == "object_counting" and r.evidence.get("regions"))
    regions = boxed.evidence["regions"]
    assert isinstance(regions, dict) and len(regions) == 1
    ((label, box),) = regions.items()
    path = boxed.images[boxed.image_labels.index(label)]
    assert path == marked_path(task.group_id, label, box) and degraded[path].marked == box
    shown = np.asarray(Image.open(io.BytesIO(store.get(f"runs/r/{path}"))).convert("RGB")).astype(int)
    x0, y0 = round(box[0] * task.width) + 1, round(box[1] * task.height) + 1
    assert shown[y0, x0 + 5, 0] > 200 and shown[y0, x0 + 5, 1] < 80  # the box's red line
    assert FAMILY.marks(boxed)[0].path == path
    moved = dict(boxed.evidence, regions={label: [round(b + 0.05, 2) for b in box]})
    unboxed = list(boxed.images)
    unboxed[boxed.image_labels.index(label)] = f"image_tasks/groups/{task.group_id}/{label}.jpg"
    for forged in (
        boxed.model_copy(update={"evidence": moved}),
        boxed.model_copy(update={"images": unboxed}),
    ):
        why = check_rows([forged], groups, store, "r", degraded).reasons[forged.sample_id]
        assert why == f"{label}'s image does not show the region the question names"
    # the shipped view of the quality row's UAV replaced by one of another quality
    rated = next(r for r in rows if r.task == "quality_assessment")
    req = degraded[f"image_tasks/groups/{task.group_id}/{rated.uav}.jpg"]
    clean = store.get(f"runs/r/{req.source_image}")
    swap = clean if rated.answer_label == "Very poor" else degraded_jpeg(clean, draw("noise", 1.0, seed=0))[0]
    store.put(f"runs/r/{req.output_image}", swap)
    assert check_rows([rated], groups, store, "r", degraded).reasons
