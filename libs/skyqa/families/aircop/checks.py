"""QC of the collaboration rows: structure, and each answer re-derived on a second code path.

The planner's per-view facts are not trusted here. An object's pixels and box come from the
stored segmentation image, the share of it a mask lost from the pixels under the recorded
rectangle (not box overlap), a view's quality from re-measuring the shipped, degraded image
against the clean frame; only the in-frame and occluded shares are the renderer's (nothing
stored says what is behind what). A row whose re-derived answer differs from its gold fails,
and so does one without exactly the source's four options A-D. What a view shows as a whole
(counts, kinds, the dominant feature) is re-read from the stored segmentation and the mask's
pixels (:func:`.facts.contents`), and a row whose candidates fall inside a perceptual margin
(a near-tie, an object a person might or might not count) is re-derived as not asked, so fails.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
from PIL import Image

from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts.aircop import GroupTask
from skyqa.contracts.collab import CollabRow
from skyqa.contracts.qa import DegradeRequest
from skyqa.degrade import lost_mask, measure
from skyqa.errors import BlobNotFound
from skyqa.families import mcq
from skyqa.families.aircop import facts as F
from skyqa.families.aircop.paths import marked_path, view_path
from skyqa.families.aircop.questions import (
    BUILDERS,
    Group,
    Question,
    recognise,
)
from skyqa.families.structure import Verdict

LETTERS = "ABCD"  # AirCopBench's QC: exactly four options keyed A-D


class Rebuilt:
    """A group's facts from the stored images: states from the segmentation, quality re-measured."""

    def __init__(
        self, task: GroupTask, store: BlobStore, run_id: str, degraded: Mapping[str, DegradeRequest]
    ) -> None:
        final = keys.final_task(run_id, task.group_id)
        root = keys.run_prefix(run_id)
        self.qualities, seen, frames, masks, views = [], [], [], [], []
        for u, uav in enumerate(task.uavs):
            req = degraded[view_path(task.group_id, uav.uav)]
            clean = _rgb(store.get(f"{final}/{task.images[u]}"))
            shipped = _rgb(store.get(f"{root}/{req.output_image}"))
            m = measure(clean, shipped, req.degradation)
            q = F.ViewQuality(req.degradation, m.quality, m.limited_by)
            self.qualities.append(q)
            cls, instance = media.decode_segmentation(store.get(f"{final}/{task.segmentation[u]}"))
            frames.append(clean)
            masks.append(instance)
            lost = lost_mask(req.degradation, instance.shape[1], instance.shape[0])
            views.append(F.contents(cls, instance, lost))
            row = []
            for obj, v in zip(task.objects, task.views[u], strict=True):
                mask = instance == obj.instance_id
                pixels = int(mask.sum())
                box = _box(mask) if pixels else [0.0] * 4
                view = v.model_copy(update={"pixels": pixels, "bbox_xyxy_norm": box})
                share = float(lost[mask].mean()) if pixels else 0.0
                s = F.Seen(u, obj, view, share, F.state_given(view, share, q, task.width, task.height))
                row.append(replace(s, doubtful=F.borderline(s, task.width, task.height)))
            seen.append(row)
        self.seen = seen
        self.views = views
        # naming is the question's wording, not its answer
        self.shown = F.shown_names(task, frames, masks, views)
        self.names = F.group_names(task, self.shown)


def _rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def _box(mask: np.ndarray) -> list[float]:
    h, w = mask.shape
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    return [
        round(cols[0] / w, 4),
        round(rows[0] / h, 4),
        round((cols[-1] + 1) / w, 4),
        round((rows[-1] + 1) / h, 4),
    ]


def check_rows(
    rows: list[CollabRow],
    tasks: dict[str, GroupTask | None],
    store: BlobStore,
    run_id: str,
    degraded: Mapping[str, DegradeRequest],
) -> Verdict:
    v = Verdict()
    rebuilt: dict[str, Rebuilt | None] = {}
    for r in rows:
        mcq.check_structure(r, v)
        if [o.option_id for o in r.options] != list(LETTERS):
            v.fail(r.sample_id, f"not the source's four options {'-'.join(LETTERS)}")
        task = tasks.get(r.group_id)
        if task is None:
            v.fail(r.sample_id, "group task missing or unreadable")
            continue
        if r.group_id not in rebuilt:
            try:
                rebuilt[r.group_id] = Rebuilt(task, store, run_id, degraded)
            except (BlobNotFound, KeyError, OSError, ValueError):
                rebuilt[r.group_id] = None
        facts = rebuilt[r.group_id]
        if facts is None:
            v.fail(r.sample_id, "group views missing or unreadable")
            continue
        g = Group(task, facts.seen, facts.qualities, facts.names, facts.views, facts.shown)
        try:
            regions = _regions(r.evidence)
        except ValueError as e:
            v.fail(r.sample_id, str(e))
            continue
        if (problem := _media_problem(r, task, regions, degraded)) is not None:
            v.fail(r.sample_id, problem)
            continue
        if (problem := judge(r, g, regions)) is not None:
            v.fail(r.sample_id, problem)
    return v


def judge(r: CollabRow, g: Group, regions: Regions) -> str | None:
    """Why the row's answer is not the one answer the re-measured group supports, or None:
    its gold is not among the answers the group's questions like it (same text, same regions)
    have, or one of its wrong options is."""
    golds = {q.gold for q in _candidates(g, r) if _same(q, r, regions)}
    if r.answer_label not in golds:
        return "answer disagrees with the re-measured views"
    if any(o.label in golds for o in r.options if o.option_id != r.answer_option_id):
        return "a wrong option is also an answer the views support"
    return None


Regions = dict[str, tuple[float, ...]]


def _regions(evidence: Mapping[str, object]) -> Regions:
    """The regions a row's evidence names (UAV label -> normalized xyxy)."""
    raw = evidence.get("regions", {})
    if not isinstance(raw, dict):
        raise ValueError("evidence regions is not a mapping")
    out: Regions = {}
    for label, box in raw.items():
        if not isinstance(box, list) or len(box) != 4 or not all(isinstance(x, int | float) for x in box):
            raise ValueError(f"the region of {label} is not a box")
        out[str(label)] = tuple(round(float(x), 4) for x in box)
    return out


def _media_problem(
    r: CollabRow, task: GroupTask, regions: Regions, degraded: Mapping[str, DegradeRequest]
) -> str | None:
    """Each image the row shows is its UAV's degraded view, with the region the question names
    drawn on it where it names one, and nothing drawn elsewhere."""
    labels = [u.uav for u in task.uavs]
    if r.image_labels != labels or len(r.images) != len(labels) or set(regions) - set(labels):
        return "images are not the group's views"
    for label, path in zip(labels, r.images, strict=True):
        base, shown = degraded.get(view_path(task.group_id, label)), degraded.get(path)
        if base is None or shown is None:
            return f"{label}'s view was not degraded as recorded"
        box = regions.get(label)
        want = view_path(task.group_id, label) if box is None else marked_path(task.group_id, label, box)
        drawn = tuple(round(float(x), 4) for x in shown.marked)
        if path != want or drawn != (box or ()) or shown.degradation != base.degradation:
            return f"{label}'s image does not show the region the question names"
        if shown.source_image != base.source_image:
            return f"{label}'s image is not its view"
    return None


def _candidates(g: Group, r: CollabRow) -> list[Question]:
    """The questions the re-measured group offers that the row could be: recognition re-derived
    for the kinds the row lists (the list was drawn over the whole release), the others built."""
    if r.task != "object_recognition":
        return list(BUILDERS[r.task](g))
    listed = r.evidence.get("listed")
    labels = [u.uav for u in g.task.uavs]
    if not isinstance(listed, list) or r.uav not in labels:
        return []
    q = recognise(g, labels.index(r.uav), [str(k) for k in listed])
    return [] if q is None else [q]


def _same(q: Question, r: CollabRow, regions: Regions) -> bool:
    """The row asks this question, of the same regions."""
    return q.question == r.question and {k: tuple(b) for k, b in q.marks} == regions
