"""The UltraVR-style family on hand-built object layouts: what each template answers, what it
removes and why, the QC's second path, and the sequential protocols S4/S5 on a scripted
responder whose early steps are wrong."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from skyqa import keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.ultra import SurveyTask
from skyqa.contracts.ultravr import UltraRow
from skyqa.families.ultravr import FAMILY, objects as O
from skyqa.families.ultravr.checks import check_rows
from skyqa.families.ultravr.family import CANDIDATES_FILE as FAMILY_CANDIDATES
from skyqa.families.ultravr.templates import (
    CATEGORY,
    CLAIM_LABELS,
    EXTREME_LABELS,
    LABELS,
    ORDER_LABELS,
    ORDERING,
    POSITIONS,
    PRESENCE_LABELS,
    RATIO_SETS,
    Candidate,
    View,
    candidates,
    fact,
    pair_ratio,
)
from ultravr_layouts import GREEN, RED, REVIEWED, YELLOW, H, W, landmark, measured, random_layout, survey

from services.evaluator.conditions import rows_for
from services.evaluator.html_report import html_page
from services.evaluator.leaderboard import leaderboard
from services.evaluator.questions import Question
from services.evaluator.runner import Cache, run_items

pytestmark = pytest.mark.unit

# three cars upper-left (a red horizontal, a white vertical, a white horizontal), one white
# horizontal car lower-right, two trees, a truck whose centre is 10 px from the vertical split
# line, a street lamp below the visibility floor and a yellow bus upper-left
LAYOUT = [
    measured(1, "car", [100, 100, 160, 124], lit_rgb=RED),
    measured(2, "car", [300, 200, 324, 260]),
    measured(3, "car", [200, 300, 260, 324]),
    measured(4, "car", [700, 600, 760, 624]),
    measured(5, "tree", [800, 100, 850, 150], lit_rgb=GREEN, elongation=1.0),
    measured(6, "tree", [100, 600, 150, 650], lit_rgb=GREEN, elongation=1.0),
    measured(7, "truck", [490, 100, 530, 120]),
    measured(8, "street_lamp", [900, 700, 904, 704]),
    measured(10, "bus", [350, 150, 410, 170], lit_rgb=YELLOW),
    measured(9, "residential_building", [400, 400, 600, 700], category="building", in_frame=-1.0),
    # two reviewed landmarks: a water tower upper-left whose surroundings hold car 1 (and no
    # other object within FAR), a fountain lower-right with nothing near it
    landmark(20, "water_tower", [60, 20, 120, 80]),
    landmark(21, "fountain", [850, 450, 900, 500]),
]
NAMES = {9: "gray residential building", 20: "gray water tower", 21: "teal fountain"}


def view() -> View:
    return View(O.objects_of(LAYOUT, W, H), W, H, landmarks=O.landmarks_of(LAYOUT, NAMES, W, H))


UL_LR = "cars in the upper-left region and the number of cars in the lower-right region"
LR_UL = "cars in the lower-right region and cars in the upper-left region"
UL_TO_LR = "cars in the upper-left region to the number of cars in the lower-right region"


def drawn(seeds: int = 40) -> list[Candidate]:
    """The layout's candidates over many draws of the numeric windows and false claims (one
    draw asks a numeric gold with one window, or not at all)."""
    out: dict[tuple[str, str, tuple[str, ...]], Candidate] = {}
    for seed in range(seeds):
        for c in candidates(view(), claim_offset=0, rng=np.random.default_rng(seed)):
            out.setdefault((c.task, c.question, c.options), c)
    return list(out.values())


def find(found: list[Candidate], task: str, *words: str) -> Candidate:
    return next(c for c in found if c.task == task and all(w in c.question for w in words))


def test_objects_carry_quadrant_orientation_colour_and_visibility() -> None:
    objs = {o.instance_id: o for o in view().objects}
    assert 9 not in objs  # not a class the questions count
    assert objs[1].regions == {"upper-left"} and objs[4].regions == {"lower-right"}
    assert (objs[1].orientation, objs[2].orientation, objs[5].orientation) == ("horizontal", "vertical", None)
    assert (objs[1].colour, objs[2].colour, objs[5].colour) == ("red", "white", "green")
    assert objs[7].regions == {"upper-left", "upper-right"}  # near the boundary: both
    assert objs[8].problem == O.BELOW_FLOOR and objs[1].problem is None
    assert O.orientation_of(24.0, 3.0) is None and O.orientation_of(40.0, 3.0) == "diagonal"
    assert O.orientation_of(100.0, 1.2) is None  # too round to have an axis


def test_comparison_counts_and_distractors_follow_the_layout() -> None:
    v = view()
    candidates(v, claim_offset=0)
    found = drawn()
    totals = [c for c in found if c.task == "count_total" and LR_UL in c.question]
    # 1 car and 3: the total 4 in a window of four consecutive counts within 1..8, at every
    # rank that window allows
    assert {c.gold for c in totals} == {"4"} and {c.rank for c in totals} == {0, 1, 2, 3}
    for c in totals:
        values = [int(x) for x in c.options]
        assert values == [values[0] + i for i in range(4)] and values.index(4) == c.rank
        assert min(values) >= 1 and max(values) <= 8
    c = totals[0]
    # the GT-CoT, CCTV's comparison trace: per bundle existence, boxes, count; then total,
    # difference, ratio, ordering; then the option the evidence supports
    ops = [s.operation for s in c.steps]
    assert ops == ["GND", "PER", "QUA", "GND", "PER", "QUA", "QUA", "QUA", "QUA", "INT", "INF"]
    assert [s.answer for s in c.steps[::3]] == ["yes", "yes", "4", "the second count is larger"]
    assert len(json.loads(c.steps[4].answer)) == 3 and c.steps[5].answer == "3" and c.steps[2].answer == "1"
    assert [s.answer for s in c.steps[6:]] == ["4", "2", "1:3", "the second count is larger", "4"]
    # the ratio: one of the fixed option sets that hold it (never options built from the gold)
    ratios = [
        c
        for c in found
        if c.task == "count_ratio" and c.question.startswith(f"What is the ratio of the number of {UL_TO_LR}")
    ]
    assert {c.gold for c in ratios} == {"3:1"} and {c.options for c in ratios} == {
        s for s in RATIO_SETS if "3:1" in s
    }
    assert all(c.options.index("3:1") == c.rank for c in ratios)
    order = find(found, "count_order", "first the upper-left region and second the lower-right", "more cars")
    assert order.gold == ORDER_LABELS[0] and order.options == ORDER_LABELS
    flipped = find(
        found, "count_order", "first the lower-right region and second the upper-left", "more cars"
    )
    assert flipped.gold == ORDER_LABELS[1]
    # the truck near the split line makes every count of trucks or vehicles there ambiguous
    assert not [c for c in found if re.search(r"trucks? in the upper", c.question)]
    assert v.removed[O.NEAR_BOUNDARY] > 0 and v.removed[O.BELOW_FLOOR] > 0
    assert not [c for c in found if "street lamps in the lower-right" in c.question]


def test_logical_verification_patterns_follow_the_layout() -> None:
    found = drawn()
    both = find(
        found,
        "presence_pattern",
        "first the lower-right region and second the upper-left",
        "horizontally oriented cars",
    )
    assert both.gold == PRESENCE_LABELS[0] and both.options == PRESENCE_LABELS
    only = find(
        found,
        "presence_pattern",
        "first the lower-right region and second the upper-left",
        "vertically oriented cars",
    )
    assert only.gold == "No in the first region, yes in the second"
    # the same fact named the other way round
    other = find(
        found,
        "presence_pattern",
        "first the upper-left region and second the lower-right",
        "vertically oriented cars",
    )
    assert other.gold == "Yes in the first region, no in the second"
    assert [s.operation for s in only.steps] == ["GND", "PER", "GND", "PER", "INF"]
    claims = [c for c in found if c.task == "claim_pattern" and c.evidence["bundle"] == "car::"]
    assert {c.kind for c in claims} == set(CLAIM_LABELS)
    true = next(c for c in claims if c.gold == CLAIM_LABELS[0])
    assert "exactly 4 cars" in true.question and "the upper-left region has more" in true.question
    assert [s.answer for s in true.steps[-3:-1]] == ["4", "upper-left"]
    # a false count is one of the counts next to the true one, above or below it
    wrong = {c.evidence["claimed"]["count"] for c in claims if c.gold == CLAIM_LABELS[2]}
    assert wrong == {3, 5}


def test_relational_inference_extremes_and_named_objects() -> None:
    found = candidates(view(), claim_offset=0)
    # extremes along y are compared along x, between two regions of the same column
    rel = find(
        found,
        "extreme_relation",
        "the bottommost car in the upper-left",
        "the bottommost tree in the lower-left",
    )
    assert rel.gold == EXTREME_LABELS[1] and rel.evidence["first"]["instance"] == 3
    assert rel.options == EXTREME_LABELS and "Compared horizontally" in rel.question
    assert not [
        c
        for c in found
        if c.task == "extreme_relation" and "upper-left" in c.question and "lower-right" in c.question
    ]
    missing = find(
        found, "extreme_relation", "the leftmost car in the upper-left", "the leftmost car in the upper-right"
    )
    assert missing.gold == "There is no such object in the second region"
    pos = find(found, "relative_position", "the red car in the upper-left region relative to the yellow bus")
    assert pos.gold == POSITIONS[0] == "Above and to the left of it" and pos.options == POSITIONS
    # two white cars upper-left: "the white car in the upper-left region" names nobody
    assert not [c for c in found if "the white car in the upper-left" in c.question]


def row_of(c: Candidate, slot: int = 0) -> UltraRow:
    inputs = SimpleNamespace(scene_id="s", engine="builtin")
    image = "video_tasks/missions/s_survey_000/final_task/survey/view_00.jpg"
    task = survey(LAYOUT)
    return FAMILY._row(inputs, f"r{slot}", task, "nadir", "s_survey_000_nadir", image, c)  # type: ignore[arg-type]


def test_the_qc_second_path_accepts_the_rows_and_catches_tampering() -> None:
    found = drawn()
    once = list({fact(c): c for c in found}.values())  # a view asks a fact once
    rows = [row_of(c, k) for k, c in enumerate(once)]
    assert check_rows(rows, {"s_survey_000": survey(LAYOUT)}) == {}
    c = next(c for c in found if c.task == "count_total" and c.gold == "4")
    row = row_of(c)
    steps = [s.model_copy() for s in row.reasoning_steps]
    steps[1].answer = "4"
    bad_count = row.model_copy(update={"sample_id": "count", "reasoning_steps": steps})
    # a car the renderer measured is hidden from the row's list: the recount differs
    hidden = [m for m in LAYOUT if m.instance_id != 3] + [measured(11, "car", [220, 340, 280, 364])]
    reasons = check_rows([bad_count], {"s_survey_000": survey(LAYOUT)})
    assert reasons == {"count": "a count does not match its box list"}
    assert check_rows([row], {"s_survey_000": survey(hidden)})  # box 3 is gone from the measurements
    assert check_rows([row], {"s_survey_000": None}) == {
        row.sample_id: "its survey task is missing or malformed"
    }
    # a presence row whose perceived list is emptied no longer supports its pattern
    presence = row_of(next(c for c in found if c.task == "presence_pattern" and c.gold == PRESENCE_LABELS[0]))
    steps = [s.model_copy() for s in presence.reasoning_steps]
    steps[1].answer = "[]"
    emptied = presence.model_copy(update={"reasoning_steps": steps})
    assert check_rows([emptied], {"s_survey_000": survey(LAYOUT)}) == {
        presence.sample_id: "the gold does not follow from the trace"
    }


class Scripted:
    """Answers the steps of a count_total row like a model that misgrounds the first
    region (one box too few) and otherwise reasons correctly from the transcript it is shown."""

    name = "scripted"
    conditions = frozenset({"full", "pred_step", "gt_prefix"})

    def __init__(self, row: UltraRow) -> None:
        self.gold = row.reasoning_steps

    async def answer(self, q: Question, condition: str) -> tuple[str, dict[str, Any]]:
        shown = dict(re.findall(r"^A(\d+): (.*)$", q.user, re.M))
        if q.step == 1:
            return json.dumps({"answer": json.loads(self.gold[1].answer)[1:]}), {"status": "ok"}
        if q.step in (0, 3, 4):
            return json.dumps({"answer": self.gold[q.step].answer}), {"status": "ok"}
        if q.step in (2, 5):
            return json.dumps({"answer": str(len(json.loads(shown[str(q.step)])))}), {"status": "ok"}
        if q.step is not None and q.step < len(self.gold):  # the final question is asked as step n
            a, b = int(shown["3"]), int(shown["6"])
            told = [
                str(a + b),
                str(abs(a - b)),
                pair_ratio(a, b),
                ORDERING[0 if a > b else 1 if b > a else 2],
            ]
            return json.dumps({"answer": told[q.step - 6] if q.step < 10 else shown["7"]}), {"status": "ok"}
        label = shown.get(str(len(self.gold)), "")
        letter = next((o.option_id for o in q.row.options if o.label == label), "A")
        return json.dumps({"answer_option_id": letter}), {"status": "ok"}


async def test_s4_and_s5_score_a_responder_whose_early_step_is_wrong(tmp_path: Path) -> None:
    c = next(c for c in drawn() if c.task == "count_total" and c.rank == 1 and LR_UL in c.question)
    row = row_of(c)
    q = Question(FAMILY, row, row.sample_id)
    store = LocalBlobStore(tmp_path)
    items = []
    for condition in ("pred_step", "gt_prefix"):
        got, stats = await run_items(
            Scripted(row), rows_for(condition, [q]), store, "runs/r", Cache(None), condition=condition
        )
        assert stats.asked == len(row.reasoning_steps) + 1  # one call per step and the final
        items += got
    s4, s5 = items
    # S4: the wrong first list propagates into its count, the total, the difference and the
    # ratio (the ordering survives); the answer is wrong
    assert s4["step_correct"] == [1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0]
    assert s4["first_error"] == "PER" and s4["option_correct"] == 0
    assert json.loads(s4["pred_steps"][1]) == json.loads(row.reasoning_steps[1].answer)[1:]
    # S5: with true prefixes every later step and the answer are right; only the localisation fails
    assert s5["step_correct"] == [1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert s5["first_error"] == "PER" and s5["option_correct"] == 1
    board = leaderboard(items)
    (entry,) = board["models"]
    s4_ops, s5_ops = entry["step_protocols"]["S4 pred-step"], entry["step_protocols"]["S5 GT-prefix"]
    assert s4_ops["operation_error"] == {"GND": 0.0, "PER": 0.5, "QUA": 0.8, "INT": 0.0, "INF": 1.0}
    assert s5_ops["operation_error"] == {"GND": 0.0, "PER": 0.5, "QUA": 0.0, "INT": 0.0, "INF": 0.0}
    assert s4_ops["final"]["option_correct"] == 0.0 and s5_ops["final"]["option_correct"] == 1.0
    # the report page shows the per-operation errors under each protocol
    page = html_page(board, "t").decode()
    section = page.split("Per-operation errors")[1].split("<h2>")[0]
    assert "S4 pred-step" in section and "S5 GT-prefix" in section and "&#x27;INF&#x27;: 1.0" in section


def test_few_shot_examples_show_other_units_complete_trajectories() -> None:
    found = [c for c in drawn() if c.task == "count_ratio"]
    rows = [row_of(c, k) for k, c in enumerate(found[:3])]
    rows[1] = rows[1].model_copy(update={"unit": "other_view"})
    qs = [Question(FAMILY, r, r.sample_id) for r in rows]
    asked = rows_for("fewshot_cot", qs)
    first = asked[0].user
    # the one row of another unit is the example, with its whole trace; the asked row's own
    # step answers never appear before its question
    assert first.startswith("Solved examples") and "Example 1:" in first and "Example 2:" not in first
    assert all(f"A{i}: {s.answer}" in first for i, s in enumerate(rows[1].reasoning_steps, 1))
    own = first.split("Now the question.")[1]
    assert rows[0].reasoning_steps[0].answer not in own and "S1." in own


def test_native_images_go_to_a_model_at_their_own_size(tmp_path: Path) -> None:
    from PIL import Image

    from services.evaluator.runner import ModelResponder

    store = LocalBlobStore(tmp_path)
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (768, 1024, 3), dtype=np.uint8))
    import io

    buf = io.BytesIO()
    img.save(buf, "JPEG")
    row = row_of(candidates(view(), claim_offset=0)[0])
    store.put(f"runs/r/{row.image}", buf.getvalue(), "image/jpeg")
    responder = ModelResponder("m", object(), store, "runs/r", {})  # type: ignore[arg-type]
    q = Question(FAMILY, row, row.sample_id)
    full = responder.request(q, "full")
    assert [i.data for i in full.images] == [buf.getvalue()]  # as stored, not resized to 640x480
    crops = responder.request(q, "crop")
    sizes = [Image.open(io.BytesIO(i.data)).size for i in crops.images]
    assert sizes == [(512, 384)] * 4  # quadrants at native resolution


def test_a_survey_view_rendered_in_bands_is_the_whole_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Row bands give the whole-frame render's pixels and the same per-instance boxes and pixel
    counts; a target's in-frame and occluded shares and colour are measured."""
    from skyqa.geometry import instance_boxes
    from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene
    from skyqa.v1 import render_pb2

    from services.renderer import survey as S

    scene = load_scene("tiny_town")
    sim = BuiltinSimulator(scene)
    camera, pose = CameraSpec(320, 240, 90.0), Pose(0.0, 0.0, 90.0, 90.0, -90.0, 0.0)
    job = render_pb2.VideoJob(width=320, height=240, fov_deg=90.0)
    cars = [o for o in scene.objects if o.semantic.name == "car"]
    for o in cars:
        job.targets.add(instance_id=o.instance_id, center=list(o.center), size=list(o.size))
    monkeypatch.setattr(S, "BAND_PIXELS", 320 * 37)  # bands of 37 rows, the last one short
    bgr, objects = S.render_view(sim, job, pose, camera)
    whole = sim.render(pose, camera)
    assert np.array_equal(bgr[..., ::-1], whole.rgb)
    boxes = {b.instance_id: b for b in instance_boxes(whole.instance, whole.semantic)}
    assert [o.instance_id for o in objects] == sorted(boxes)
    for m in objects:
        b = boxes[m.instance_id]
        assert (m.pixels, m.box) == (b.pixels, [b.x0, b.y0, b.x1, b.y1])
        ys, xs = np.nonzero(whole.instance == m.instance_id)
        assert np.allclose(m.centroid, [xs.mean(), ys.mean()], atol=0.01)
    seen = [o for o in objects if o.instance_id in {c.instance_id for c in cars}]
    assert seen and all(o.in_frame >= 0 and len(o.lit_rgb) == 3 for o in seen)
    assert all(o.in_frame == -1 for o in objects if o.instance_id not in {c.instance_id for c in cars})
    # a car seen from straight above is long along its heading: its pixels' axis says so
    car = max(seen, key=lambda o: o.pixels)
    yaw = next(c.yaw_deg for c in cars if c.instance_id == car.instance_id)
    assert car.elongation > 1.5
    # looking straight down with yaw 90, image x is world +x and image y world -y: a heading of
    # yaw degrees lies at -yaw in the image
    off = (car.axis_deg + yaw) % 180.0
    assert min(off, 180.0 - off) < 10.0, (car.axis_deg, yaw)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("x", "--surveys needs COUNT"),
        ("1,2048", "--surveys needs COUNT"),
        ("-1", "--surveys needs COUNT"),
        ("1,100x99999", "survey size must be within"),
        ("1,16384x12288", "at most 80 megapixels"),
        ("99", "surveys must be 0..16"),
    ],
)
def test_bad_survey_options_say_what_to_fix(text: str, error: str) -> None:
    from skyqa.errors import InvalidInput
    from skyqa.scan_options import build_request

    with pytest.raises(InvalidInput, match=error):
        build_request("tiny_town", "preview", None, None, None, None, 0, surveys=text)


def test_survey_options_and_defaults() -> None:
    from skyqa.scan_options import build_request

    req = build_request("tiny_town", "preview", None, None, None, None, 0, surveys="2,1024x768")
    assert (req.surveys.count, req.surveys.width, req.surveys.height) == (2, 1024, 768)
    default = build_request("tiny_town", "preview", None, None, None, None, 0)
    assert (default.surveys.count, default.surveys.width, default.surveys.height) == (1, 8192, 6144)
    none = build_request("tiny_town", "preview", None, None, None, None, 0, surveys="0")
    assert none.surveys.count == 0


def test_bad_survey_jobs_are_refused_with_the_reason() -> None:
    from skyqa.errors import InvalidInput
    from skyqa.v1 import common_pb2, render_pb2

    from services.renderer.survey import validate_survey_job

    def job(**kw: Any) -> render_pb2.VideoJob:
        j = render_pb2.VideoJob(
            run_id="r", job_id="s", requester="mission", output_prefix="runs/r/x", width=1024, height=768,
            fov_deg=90.0, jpeg_quality=85, survey=True,
        )  # fmt: skip
        j.poses.append(common_pb2.Pose(z=100.0, pitch_deg=-90.0))
        for k, v in kw.items():
            setattr(j, k, v)
        return j

    validate_survey_job(job())
    with pytest.raises(InvalidInput, match="survey size"):
        validate_survey_job(job(width=20000))
    with pytest.raises(InvalidInput, match="fov"):
        validate_survey_job(job(fov_deg=200.0))
    bad = job()
    bad.poses.append(common_pb2.Pose(x=float("nan")))
    with pytest.raises(InvalidInput, match="pose 1 is not finite"):
        validate_survey_job(bad)
    many = job()
    for _ in range(8):
        many.poses.append(common_pb2.Pose(z=1.0))
    with pytest.raises(InvalidInput, match=r"1\.\.8 views"):
        validate_survey_job(many)


def test_the_workbench_marks_every_grounded_box_on_the_row_image() -> None:
    rows = [row_of(c, k) for k, c in enumerate(drawn(4))]
    for r in rows:
        marks = FAMILY.marks(r)
        assert {m.path for m in marks} <= {r.image}
        want = []
        for i, s in enumerate(r.reasoning_steps, 1):
            if s.answer_format == "bbox_coordinates_list":
                want += [(f"S{i} {s.operation}", tuple(b)) for b in json.loads(s.answer)]
            elif s.answer_format == "bbox" and s.answer != "none":
                want.append((f"S{i} {s.operation}", tuple(json.loads(s.answer))))
        assert [(m.role, m.box) for m in marks] == want
    assert any(FAMILY.marks(r) for r in rows)


def test_the_sample_export_types_each_ground_truth_as_its_format_says() -> None:
    rows = [row_of(c, k) for k, c in enumerate(drawn(4))]
    out = FAMILY.exports(rows)["ultravr_samples"]
    assert isinstance(out, bytes)
    samples = json.loads(out)["samples"]
    assert [s["id"] for s in samples] == [r.sample_id for r in rows]
    kinds = {
        "bbox_coordinates_list": list,
        "integer": int,
        "boolean": bool,
        "relation": str,
        "option_label": str,
    }
    for s, r in zip(samples, rows, strict=True):
        assert s["options"][s["answer"]] == r.answer_label
        steps = s["reasoning_supervision"]["steps"]
        assert [x["step_id"] for x in steps] == [f"S{i}" for i in range(1, len(r.reasoning_steps) + 1)]
        for x in steps:
            if x["answer_format"] == "bbox":
                assert x["ground_truth"] is None or len(x["ground_truth"]) == 4
            else:
                assert isinstance(x["ground_truth"], kinds[x["answer_format"]]), x


class WrongLastStep(Scripted):
    """Right on every step but the last (the answer itself), and answers the final question from
    the transcript's last step."""

    async def answer(self, q: Question, condition: str) -> tuple[str, dict[str, Any]]:
        if q.step is not None and q.step < len(self.gold) - 1:
            return json.dumps({"answer": self.gold[q.step].answer}), {"status": "ok"}
        if q.step == len(self.gold) - 1:
            return json.dumps({"answer": "0"}), {"status": "ok"}
        return await super().answer(q, condition)


async def test_s5_never_shows_the_answer_and_budgets_whole_rollouts(tmp_path: Path) -> None:
    found = drawn()
    c = next(c for c in found if c.task == "count_total" and c.rank == 1 and LR_UL in c.question)
    row = row_of(c)
    q = Question(FAMILY, row, row.sample_id)
    store = LocalBlobStore(tmp_path)
    # the last step states the answer: S5 shows the model's own (wrong) one there, not the gold
    (item,), _ = await run_items(
        WrongLastStep(row), rows_for("gt_prefix", [q]), store, "runs/r", Cache(None), condition="gt_prefix"
    )
    assert item["step_correct"] == [1] * 10 + [0] and item["option_correct"] == 0
    # a budget of one rollout completes one row and leaves the other not run, whatever the order
    other = row_of(next(x for x in found if x.task == "count_ratio" and x.rank == 1), 1)
    qs = [q, Question(FAMILY, other, other.sample_id)]
    items, stats = await run_items(
        Scripted(row), rows_for("pred_step", qs), store, "runs/r", Cache(None), concurrency=4,
        budget=len(row.reasoning_steps) + 1, condition="pred_step",
    )  # fmt: skip
    assert sorted(i["parse_kind"] for i in items) == ["choice", "not_run"]
    assert stats.asked == len(row.reasoning_steps) + 1 and stats.not_run == 1


def test_step_answers_of_any_json_type_and_hostile_replies() -> None:
    from skyqa.steps import step_correct

    from services.evaluator.rollout import step_answer

    assert step_correct("yes", True) and step_correct("no", False) and not step_correct("yes", False)
    assert step_correct("none", None) and not step_correct("[0.1, 0.1, 0.2, 0.2]", None)
    deep = "[" * 100_000
    assert step_answer(deep) == deep  # not a crash
    assert not step_correct("[[0.1, 0.1, 0.2, 0.2]]", deep)


def test_the_airsim_backend_gets_no_survey_it_cannot_render() -> None:
    from skyqa import scan
    from skyqa.errors import InvalidInput
    from skyqa.v1 import scan_pb2

    req = scan.apply_defaults(scan_pb2.ScanRequest(run_id="r1", scene_id="tiny_town", backend="airsim"))
    assert req.surveys.count == 0
    req.surveys.count = 1
    with pytest.raises(InvalidInput, match="airsim backend renders surveys up to 4096x3072"):
        scan.validate(req)
    req.surveys.width, req.surveys.height = 4096, 3072
    scan.validate(req)


def test_a_release_over_many_layouts_gives_no_pixel_free_rule_an_edge(tmp_path: Path) -> None:
    """The family's own planning over 80 random views: every row passes the second-path QC, the
    gold's letter is uniform per task, and a rule fitted on half the views that reads a numeric
    row's first option (the one structural cue its options carry) stays near chance on the
    other half."""
    from collections import Counter, defaultdict

    from skyqa import keys
    from skyqa.contracts import dump_json
    from skyqa.contracts.missions import MissionIndex
    from skyqa.contracts.ultra import SurveyIndexRow
    from skyqa.families.base import PlanInputs
    from skyqa.v1 import scan_pb2

    store, surveys, tasks = LocalBlobStore(tmp_path), [], {}
    for n in range(80):
        objects = random_layout(np.random.default_rng([7, n]))
        task = survey(objects).model_copy(
            update={"survey_id": f"s_survey_{n:03d}", "width": 8192, "height": 6144}
        )
        key = f"{keys.final_task('r', task.survey_id)}/{keys.SURVEY_TASK}"
        store.put(key, dump_json(task), "application/json")
        surveys.append(SurveyIndexRow(survey_id=task.survey_id, task=key))
        tasks[task.survey_id] = task
    index = MissionIndex(scene_id="s", missions=[], rejected=[], surveys=surveys)
    inputs = PlanInputs("r", "s", "builtin", 3, scan_pb2.ScanRequest(), store, REVIEWED, {}, index)
    planned = FAMILY.plan(inputs)
    rows = planned.rows
    assert len(rows) > 800 and check_rows(rows, tasks) == {}
    by_task: dict[str, list[UltraRow]] = defaultdict(list)
    for r in rows:
        by_task[r.task].append(r)
    assert set(by_task) == set(CATEGORY)
    # a categorical task's four labels come in its own order in every row, whatever the answer
    for r in rows:
        labels = [o.label for o in r.options]
        if r.task in LABELS:
            assert labels == list(LABELS[r.task]), (r.task, labels)
        else:
            shares = [float(Fraction(lab.replace(":", "/"))) for lab in labels]
            assert shares == sorted(shares), (r.task, labels)
    for name, mine in by_task.items():
        letters = Counter(r.answer_option_id for r in mine)
        # categorical golds are balanced exactly; a numeric gold's rank is drawn per window
        slack = 2 if name in LABELS else len(mine) // 8
        assert max(letters.values()) - min(letters.get(x, 0) for x in "ABCD") <= slack, (name, letters)
        if name in ("count_difference", "count_total"):
            # a 0 among the options could only be a difference's gold: none is ever offered
            assert all(int(o.label) >= 1 for r in mine for o in r.options)
            fit, held = (
                [r for r in mine if r.unit < "s_survey_040"],
                [r for r in mine if r.unit >= "s_survey_040"],
            )
            cue: dict[int, Counter[int]] = defaultdict(Counter)
            for r in fit:
                values = [int(o.label) for o in r.options]
                cue[min(values[0], 3)][values.index(int(r.answer_label))] += 1
            rule = {start: c.most_common(1)[0][0] for start, c in cue.items()}
            hits = sum(
                rule.get(min(int(r.options[0].label), 3))
                == [o.label for o in r.options].index(r.answer_label)
                for r in held
            )
            assert hits / len(held) < 0.4, (name, hits, len(held))
    funnel = json.loads(planned.files[FAMILY_CANDIDATES])
    assert funnel["rows"] == len(rows) and funnel["removed"]


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["measured"].append(d["measured"][0]),  # more measured views than planned
        lambda d: d["measured"][0]["objects"][0].update(box=[1, 2, 3]),
        lambda d: d.update(width=0),
        lambda d: d["measured"][0]["objects"][0].update(pixels=-5),
    ],
)
def test_a_tampered_survey_task_is_refused_with_a_clear_error(
    change: Callable[[dict[str, Any]], None],
) -> None:
    from skyqa.contracts import dump_json, load_json
    from skyqa.errors import InvalidInput

    doc = json.loads(dump_json(survey(LAYOUT)))
    change(doc)
    with pytest.raises(InvalidInput, match="survey task"):
        load_json(SurveyTask, json.dumps(doc).encode(), "survey task")


def test_the_conditioned_comparison_follows_the_rs_template_with_its_landmarks() -> None:
    """UltraVR RS's comparison: one object type in two regions, each near a landmark the view
    shows, nine steps S1..S9 with the landmark boxes at S1 and S5 (GND), existence at S2/S6
    (INT), the near objects' boxes at S3/S7 (PER), counts at S4/S8 (QUA), |S4 - S8| at S9 (INF)."""
    found = drawn()
    diffs = [c for c in found if c.task == "count_difference"]
    asked = [
        c
        for c in diffs
        if "cars in the upper-left region near the gray water tower and cars in the lower-right "
        "region near the teal fountain" in c.question
    ]
    assert asked and {c.gold for c in asked} == {"1"}
    c = asked[0]
    assert [s.operation for s in c.steps] == ["GND", "INT", "PER", "QUA", "GND", "INT", "PER", "QUA", "INF"]
    assert [s.answer_format for s in c.steps] == [
        "bbox", "boolean", "bbox_coordinates_list", "integer",
        "bbox", "boolean", "bbox_coordinates_list", "integer", "integer",
    ]  # fmt: skip
    assert json.loads(c.steps[0].answer) == [0.06, 0.025, 0.12, 0.1]  # the water tower
    assert [s.answer for s in c.steps[1:4]] == ["yes", json.dumps([[0.1, 0.125, 0.16, 0.155]]), "1"]
    assert [s.answer for s in c.steps[5:]] == ["no", "[]", "0", "1"]
    assert c.evidence["first"]["landmark"] == {"instance": 20, "name": "gray water tower"}
    # every difference is landmark-conditioned; the residential building on the split lines
    # conditions nothing
    assert all(" near the " in c.question and len(c.steps) == 9 for c in diffs)
    assert not [c for c in diffs if "residential building" in c.question]
    v = view()
    candidates(v, claim_offset=0)
    assert v.removed[O.LANDMARK_SPLIT] > 0
    # an object between NEAR and FAR of the landmark makes its count uncertain: not asked
    doubt = [*LAYOUT, measured(30, "car", [150, 20, 210, 44])]  # 60 px from the tower: in doubt
    v = View(O.objects_of(doubt, W, H), W, H, landmarks=O.landmarks_of(doubt, NAMES, W, H))
    assert not [
        c
        for c in candidates(v, 0)
        if c.task == "count_difference" and "counts of cars in the upper-left" in c.question
    ]
    assert v.removed[O.NEAR_DOUBT] > 0
    # the QC recounts around the landmark and refuses a row whose landmark box or count is off
    row = row_of(c)
    assert check_rows([row], {"s_survey_000": survey(LAYOUT)}) == {}
    assert check_rows([row], {"s_survey_000": survey(doubt)}) == {
        row.sample_id: "an object's nearness to its landmark is in doubt"
    }
    steps = [s.model_copy() for s in row.reasoning_steps]
    steps[0].answer = json.dumps([0.05, 0.025, 0.12, 0.1])
    moved = row.model_copy(update={"reasoning_steps": steps})
    assert check_rows([moved], {"s_survey_000": survey(LAYOUT)}) == {
        row.sample_id: "a landmark step's box is not the landmark's"
    }


def test_comparisons_pair_only_bundles_of_one_kind() -> None:
    """Totals, ratios and orders of two bundles pair vehicles with vehicles, never trucks with
    trees or trees with containers; the QC refuses a row that pairs two kinds."""
    found = drawn()
    pairs = [c for c in found if c.category == "comparison"]
    for c in pairs:
        kinds = {
            O.kind_of(k)
            for side in ("first", "second")
            for k in c.evidence[side]["bundle"].split(":")[0].split("+")
        }
        assert len(kinds) == 1, c.question
    # cars with buses: vehicle kinds together
    assert [
        c
        for c in pairs
        if c.task == "count_total"
        and {c.evidence["first"]["bundle"], c.evidence["second"]["bundle"]} == {"car::", "bus::"}
    ]
    tampered = next(c for c in pairs if c.task == "count_total" and c.evidence["first"]["bundle"] == "car::")
    row = row_of(tampered)
    ev = {**row.evidence, "second": {**row.evidence["second"], "bundle": "tree::"}}
    assert check_rows([row.model_copy(update={"evidence": ev})], {"s_survey_000": survey(LAYOUT)}) == {
        row.sample_id: "the comparison pairs classes of different kinds"
    }


def test_a_bundle_s_claims_are_one_fact_asked_once_per_view(tmp_path: Path) -> None:
    """Two claim rows of one bundle in one view ("exactly 4 cars" with one region and with
    another) ask one fact twice: planning asks it once, the QC refuses the second."""
    claims = [c for c in drawn() if c.task == "claim_pattern" and c.evidence["bundle"] == "car::"]
    assert len({c.question for c in claims}) > 1 and len({fact(c) for c in claims}) == 1
    a, b = (row_of(c, k) for k, c in enumerate(claims[:2]))
    assert check_rows([a, b], {"s_survey_000": survey(LAYOUT)}) == {
        b.sample_id: f"asks the fact {a.sample_id} asks of its view"
    }
    from skyqa.contracts.missions import MissionIndex
    from skyqa.contracts.ultra import SurveyIndexRow
    from skyqa.families.base import PlanInputs
    from skyqa.v1 import scan_pb2

    store = LocalBlobStore(tmp_path)
    surveys = []
    for n in range(12):
        task = survey(random_layout(np.random.default_rng([3, n]))).model_copy(
            update={"survey_id": f"s_survey_{n:03d}", "width": 8192, "height": 6144}
        )
        key = f"{keys.final_task('r', task.survey_id)}/{keys.SURVEY_TASK}"
        store.put(key, dump_json(task), "application/json")
        surveys.append(SurveyIndexRow(survey_id=task.survey_id, task=key))
    index = MissionIndex(scene_id="s", missions=[], rejected=[], surveys=surveys)
    rows = FAMILY.plan(
        PlanInputs("r", "s", "builtin", 3, scan_pb2.ScanRequest(), store, REVIEWED, {}, index)
    ).rows
    seen = Counter((r.unit, r.evidence["bundle"]) for r in rows if r.task == "claim_pattern")
    assert seen and max(seen.values()) == 1
    assert [r for r in rows if r.task == "count_difference"]


def test_v0_allows_abstention_and_an_abstention_is_counted_not_scored() -> None:
    """UltraVR's V0 removes the image and "explicitly allows abstention when the answer cannot
    be determined from the provided text"; an explicit abstention ("not sure") is counted as
    one, never as correct. Other conditions, and families whose source has no such V0 (the
    blind gate's DualCog rows), keep the plain prompt."""
    from services.evaluator.conditions import prompt_for

    row = row_of(next(c for c in drawn() if c.task == "count_total"))
    q = Question(FAMILY, row, row.sample_id)
    v0 = prompt_for(q, "text_only")
    assert v0.startswith(q.user) and "cannot be determined" in v0 and "No image is attached" in v0
    assert prompt_for(q, "full") == q.user
    other = SimpleNamespace(name="dualcog_image", prompts=lambda r: ("s", "plain"))
    assert prompt_for(Question(other, row, "x"), "text_only") == "plain"
    for reply in (
        "The answer cannot be determined without the image.",
        "I'm not sure: no image was provided.",
        '{"answer": "cannot be determined"}',
    ):
        parsed = FAMILY.parse(row, reply)
        assert parsed.kind == "abstain", reply
        assert FAMILY.score(row, parsed, steps=False)["option_correct"] == 0.0
    assert FAMILY.parse(row, '{"answer_option_id": "B"}').kind == "choice"


def test_the_card_says_which_source_elements_are_not_built() -> None:
    from skyqa.families.ultravr.family import NOTES

    assert "Source elements not built here" in NOTES and "CCTV, WSI and AD" in NOTES
