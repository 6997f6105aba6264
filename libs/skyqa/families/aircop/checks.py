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
from skyqa.families.aircop.questions import (
    BUILDERS,
    Group,
    Question,
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
        self.qualities, seen, frames, masks, classes, views = [], [], [], [], [], []
        for u, uav in enumerate(task.uavs):
            req = degraded[f"image_tasks/groups/{task.group_id}/{uav.uav}.jpg"]
            clean = _rgb(store.get(f"{final}/{task.images[u]}"))
            shipped = _rgb(store.get(f"{root}/{req.output_image}"))
            m = measure(clean, shipped, req.degradation)
            q = F.ViewQuality(req.degradation, m.quality, m.limited_by)
            self.qualities.append(q)
            cls, instance = media.decode_segmentation(store.get(f"{final}/{task.segmentation[u]}"))
            frames.append(clean)
            masks.append(instance)
            classes.append(cls)
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
        self.names = F.unique_names(task, frames, masks, classes)


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
        g = Group(task, facts.seen, facts.qualities, facts.names, facts.views)
        golds = {q.gold for q in BUILDERS[r.task](g) if _same(q, r)}
        if r.answer_label not in golds:
            v.fail(r.sample_id, "answer disagrees with the re-measured views")
        elif any(o.label in golds for o in r.options if o.option_id != r.answer_option_id):
            v.fail(r.sample_id, "a wrong option is also an answer the views support")
    return v


def _same(q: Question, r: CollabRow) -> bool:
    return q.question == r.question
