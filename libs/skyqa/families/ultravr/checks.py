"""QC of the ultra-resolution rows: structure, the GT-CoT trace's own arithmetic, and every
box it names re-found in the renderer's measurements of the view.

Independently of planning: a step's box must be a measured object of the view that a viewer
counts without doubt (pixels, in-frame and occluded shares re-read against the floors), of a
class the row names, whose box centre lies in the region the step names and clear of the split
lines; a box list must hold every such object of its bundle in that region (a recount over
the measurements); counts must equal their lists' lengths, the arithmetic steps must follow
from the counts, and the last step must be the gold answer. A conditioned count's landmark step
must hold the measured box of the landmark its evidence names, wholly in its region, and its
list every such object near the landmark, none in doubt. A comparison's bundles must be of one
super-category, and a view asks a fact once (a bundle's claims, two things either way round).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from skyqa.contracts.ultra import MeasuredObject, SurveyTask
from skyqa.contracts.ultravr import UltraRow
from skyqa.families.structure import Verdict, check_options
from skyqa.families.ultravr import objects as O
from skyqa.families.ultravr.templates import (
    CLAIM_LABELS,
    EXTREME_LABELS,
    EXTREMES,
    ORDER_LABELS,
    ORDERING,
    POSITIONS,
    PRESENCE_LABELS,
)
from skyqa.sim.classes import by_name
from skyqa.vocab.colours import clear_colour

_REGION = re.compile(r"in the (upper|lower)-(left|right) region")
TOLERANCE = 1e-3


def _clear(m: MeasuredObject) -> bool:
    return m.in_frame >= O.MIN_IN_FRAME and m.pixels >= O.FLOOR_PX and 0 <= m.occluded <= O.MAX_OCCLUDED


def _in_region(m: MeasuredObject, region: str, w: int, h: int) -> bool | None:
    """Whether its box centre lies in ``region``; None when it is near a split line."""
    cx, cy = (m.box[0] + m.box[2]) / 2.0, (m.box[1] + m.box[3]) / 2.0
    if abs(cx - w / 2) < O.BOUNDARY * w or abs(cy - h / 2) < O.BOUNDARY * h:
        return None
    level, side = region.split("-")
    return (cy < h / 2) == (level == "upper") and (cx < w / 2) == (side == "left")


def _accepts(m: MeasuredObject, bundle: str) -> bool:
    classes, colour, orientation = bundle.split(":")
    if m.class_name not in classes.split("+"):
        return False
    if colour and (len(m.lit_rgb) != 3 or clear_colour(np.asarray(m.lit_rgb)) != colour):
        return False
    return not orientation or O.orientation_of(m.axis_deg, m.elongation) == orientation


def _boxes(text: str) -> list[list[float]] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(b, list) and len(b) == 4 for b in value):
        return value
    return None


def _find(box: list[float], measured: list[MeasuredObject], w: int, h: int) -> MeasuredObject | None:
    for m in measured:
        if all(abs(a - b) <= TOLERANCE for a, b in zip(_norm(m, w, h), box, strict=True)):
            return m
    return None


def _centre(box: list[float]) -> tuple[float, float]:
    return (box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0


def _expected(row: UltraRow, counts: list[int]) -> str | None:
    """The answer each task's rule gives from the trace's own facts."""
    steps = row.reasoning_steps
    task = row.task
    truth = [(True, True), (True, False), (False, True), (False, False)]
    if task == "count_difference":
        if [s.answer for s in steps if s.answer_format == "boolean"] != [
            "yes" if n else "no" for n in counts
        ]:
            return "an existence step does not match its count"
        return str(abs(counts[0] - counts[1]))
    if task in PAIR_TASKS:
        # CCTV's trace: S1/S4 existence, S7..S10 total, difference, ratio, ordering, from the counts
        a, b = counts
        ratio = (
            ("0:0" if a == 0 else "1:0")
            if b == 0
            else f"{Fraction(a, b).numerator}:{Fraction(a, b).denominator}"
        )
        told = [steps[k].answer for k in (0, 3, 6, 7, 8, 9)]
        if told != [
            "yes" if a else "no",
            "yes" if b else "no",
            str(a + b),
            str(abs(a - b)),
            ratio,
            ORDERING[0 if a > b else 1 if b > a else 2],
        ]:
            return "an existence or computed step does not follow from the counts"
    if task == "count_total":
        return str(counts[0] + counts[1])
    if task == "count_ratio":
        f = Fraction(counts[0], counts[1])
        return f"{f.numerator}:{f.denominator}"
    if task == "count_order":
        a, b = counts
        return ORDER_LABELS[0 if a > b else 1 if b > a else 2 if a else 3]
    if task == "claim_pattern":
        if steps[-3].answer != str(sum(counts)) or steps[-2].answer != O.REGIONS[int(np.argmax(counts))]:
            return "the claim evidence does not follow from the counts"
        claimed = re.search(r"exactly (\d+) .* the (\S+) region has more", row.question)
        if claimed is None:
            return None
        a_true, b_true = int(claimed.group(1)) == sum(counts), claimed.group(2) == steps[-2].answer
        return CLAIM_LABELS[truth.index((a_true, b_true))]
    if task == "presence_pattern":
        chosen = [_boxes(s.answer) for s in steps if s.operation == "PER"]
        return PRESENCE_LABELS[truth.index((bool(chosen[0]), bool(chosen[1])))]
    if task == "extreme_relation":
        e1, e2 = (None if steps[k].answer == "none" else json.loads(steps[k].answer) for k in (1, 3))
        if (steps[0].answer == "yes") != (e1 is not None) or (steps[2].answer == "yes") != (e2 is not None):
            return "an existence step does not match its box"
        if e1 is None or e2 is None:
            return EXTREME_LABELS[2] if e1 is None else EXTREME_LABELS[3]
        axis = 1 if "Compared vertically" in row.question else 0
        return EXTREME_LABELS[0] if _centre(e1)[axis] < _centre(e2)[axis] else EXTREME_LABELS[1]
    if task == "relative_position":
        (ax, ay), (bx, by) = (_centre(json.loads(steps[k].answer)) for k in (0, 1))
        return POSITIONS[2 * (ay >= by) + (ax >= bx)]
    return None


def _trace(row: UltraRow) -> str | None:
    """The trace's own consistency: counts equal their lists, and each task's rule applied to
    the trace's facts gives the gold, which is also the last step's answer."""
    steps = row.reasoning_steps
    if not steps or steps[-1].answer != row.answer_label:
        return "the trace's last step is not the gold answer"
    counts = []
    for prev, s in itertools.pairwise(steps):
        if (
            s.answer_format == "integer"
            and prev.answer_format == "bbox_coordinates_list"
            and s.operation == "QUA"
        ):
            listed = _boxes(prev.answer)
            if listed is None or str(len(listed)) != s.answer:
                return "a count does not match its box list"
            counts.append(len(listed))
    try:
        expected = _expected(row, counts)
    except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError, RecursionError):
        return "the trace is malformed for its task"
    if expected is None:
        return f"no rule checks the task {row.task!r}"
    if expected != row.answer_label:
        return (
            expected
            if expected.startswith(("the claim", "an existence", "an existence or computed"))
            else "the gold does not follow from the trace"
        )
    return None


def _grounding(row: UltraRow, task: SurveyTask) -> str | None:
    kinds = [v.view for v in task.views]
    if row.view not in kinds:
        return "the survey has no such view"
    w, h = task.width, task.height
    pictured = task.measured[kinds.index(row.view)]
    measured = pictured.objects
    if not row.image.endswith(pictured.image):
        return "the row's image is not the view's"
    landmarks = LANDMARK_STEPS.get(row.task, ())
    for k, s in enumerate(row.reasoning_steps):
        if k in landmarks:
            continue  # a landmark, not a small object: checked against the landmark it names
        if s.answer_format == "bbox_coordinates_list":
            listed = _boxes(s.answer)
        elif s.answer_format == "bbox" and s.answer != "none":
            listed = _boxes(f"[{s.answer}]")
        else:
            continue
        if listed is None:
            return f"a step's boxes do not parse: {s.answer[:40]}"
        where = _REGION.search(s.question)
        for box in listed:
            m = _find(box, measured, w, h)
            if m is None or not _clear(m):
                return "a step names a box no clearly visible object has"
            if where and _in_region(m, f"{where.group(1)}-{where.group(2)}", w, h) is not True:
                return "a step's object is not in the region it names"
    lists: list[tuple[int, str, str]] = []  # (step, bundle, region) of every list the rule reads
    if row.task in LIST_STEPS:
        for part, k in zip(("first", "second"), LIST_STEPS[row.task], strict=True):
            ev: Any = row.evidence[part]
            lists.append((k, ev["bundle"], ev["region"]))
    elif row.task == "claim_pattern":
        lists += [(2 * i, row.evidence["bundle"], r) for i, r in enumerate(O.REGIONS)]
    near: dict[int, MeasuredObject] = {}  # list step -> the landmark it is conditioned by
    for part, k, at in zip(("first", "second"), LIST_STEPS.get(row.task, ()), landmarks, strict=False):
        mark = row.evidence[part].get("landmark")
        if not isinstance(mark, dict):
            return "a conditioned count names no landmark"
        ev = row.evidence[part]
        lm = next((m for m in measured if m.instance_id == mark.get("instance")), None)
        if lm is None or _boxes(f"[{row.reasoning_steps[at].answer}]") != [_norm(lm, w, h)]:
            return "a landmark step's box is not the landmark's"
        if not all(_in_region(c, ev["region"], w, h) for c in _corners(lm)):
            return "a landmark does not lie in the region it is named in"
        if str(mark.get("name")) not in row.question:
            return "the question does not name its landmark"
        near[k] = lm
    for k, bundle, region in lists:
        pool = [m for m in measured if _accepts(m, bundle) and _clear(m) and _in_region(m, region, w, h)]
        if k in near:
            size = max(w, h)
            lm = near[k]
            pool = [m for m in pool if m.instance_id != lm.instance_id]
            if any(O.NEAR * size < _gap(m, lm) <= O.FAR * size for m in pool):
                return "an object's nearness to its landmark is in doubt"
            pool = [m for m in pool if _gap(m, lm) <= O.NEAR * size]
        recount = sorted(_norm(m, w, h) for m in pool)
        listed = _boxes(row.reasoning_steps[k].answer) or []
        if len(recount) != len(listed) or any(
            max(abs(a - b) for a, b in zip(x, y, strict=True)) > TOLERANCE
            for x, y in zip(recount, sorted(listed), strict=True)
        ):
            return "a recount of the measurements differs from the row's list"
    if row.task == "extreme_relation":
        for part, k in (("first", 1), ("second", 3)):
            ev = row.evidence[part]
            axis, sign = EXTREMES[ev["extreme"]]
            pool = [
                m
                for m in measured
                if m.class_name == ev["class"] and _clear(m) and _in_region(m, ev["region"], w, h)
            ]
            best = min(pool, key=lambda m: -sign * (m.box[axis] + m.box[axis + 2]), default=None)
            shown = row.reasoning_steps[k].answer
            if (best is None) != (shown == "none") or (
                best is not None and _boxes(f"[{shown}]") != [_norm(best, w, h)]
            ):
                return "an extreme object is not the region's extreme"
    return None


def _norm(m: MeasuredObject, w: int, h: int) -> list[float]:
    return [round(m.box[0] / w, 4), round(m.box[1] / h, 4), round(m.box[2] / w, 4), round(m.box[3] / h, 4)]


def _corners(m: MeasuredObject) -> list[MeasuredObject]:
    """The landmark's box corners as point objects (to test that its whole box lies in a region)."""
    x0, y0, x1, y1 = m.box
    return [m.model_copy(update={"box": [x, y, x, y]}) for x in (x0, x1 - 1) for y in (y0, y1 - 1)]


def _gap(m: MeasuredObject, lm: MeasuredObject) -> float:
    cx, cy = (m.box[0] + m.box[2]) / 2.0, (m.box[1] + m.box[3]) / 2.0
    x0, y0, x1, y1 = lm.box
    return float(np.hypot(max(x0 - cx, 0.0, cx - x1), max(y0 - cy, 0.0, cy - y1)))


# the steps naming the landmarks a conditioned comparison's two counts are conditioned by
LANDMARK_STEPS = {"count_difference": (0, 4)}
# the steps holding the two lists a comparison or a presence row's rule reads
PAIR_TASKS = ("count_total", "count_ratio", "count_order")  # CCTV's 11-step comparison trace
LIST_STEPS = {
    "count_difference": (2, 6),
    "count_total": (1, 4),
    "count_ratio": (1, 4),
    "count_order": (1, 4),
    "presence_pattern": (1, 3),
}


def _kinds(row: UltraRow) -> str | None:
    """A comparison's two bundles must be of one super-category (the simulator's categories,
    read here from the class list, not from the generator's bundles)."""
    if row.category != "comparison":
        return None
    kinds = {
        by_name(c).category
        for part in ("first", "second")
        for c in str(row.evidence[part]["bundle"]).split(":")[0].split("+")
    }
    return "the comparison pairs classes of different kinds" if len(kinds) > 1 else None


def _fact(row: UltraRow) -> str:
    """What a row asks of its view however it is worded: a claim pattern its bundle, a row
    about two things the two (either order), any other row its question."""
    ev: Any = row.evidence
    if row.task == "claim_pattern":
        return f"{row.task}:{ev['bundle']}"
    if "first" not in ev:
        return f"{row.task}:{row.question}"
    sides = sorted(
        json.dumps({k: v for k, v in ev[p].items() if k != "instances"}, sort_keys=True)
        for p in ("first", "second")
    )
    return f"{row.task}:{'|'.join(sides)}"


def check_rows(rows: list[UltraRow], tasks: Mapping[str, SurveyTask | None]) -> dict[str, str]:
    v = Verdict()
    asked: dict[tuple[str, str], str] = {}
    for row in rows:
        first = asked.setdefault((row.unit, _fact(row)), row.sample_id)
        if first != row.sample_id:
            v.fail(row.sample_id, f"asks the fact {first} asks of its view")
        # the labels are the answer space of a structure ("upper-left" against "upper-right",
        # two presence patterns), not paraphrases, so their wording may be close
        ids = [o.option_id for o in row.options]
        check_options(
            row.sample_id, [o.label for o in row.options], ids, [row.answer_option_id], v, text=False
        )
        if (
            dict(zip(ids, (o.label for o in row.options), strict=True)).get(row.answer_option_id)
            != row.answer_label
        ):
            v.fail(row.sample_id, "answer label is not the answer option's")
        task = tasks.get(row.survey_id)
        if task is None:
            v.fail(row.sample_id, "its survey task is missing or malformed")
            continue
        why = _kinds(row) or _trace(row) or _grounding(row, task)
        if why:
            v.fail(row.sample_id, why)
    return v.reasons
