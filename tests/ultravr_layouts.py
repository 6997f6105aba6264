"""Survey views for the UltraVR-style family's tests: hand-built object layouts (what the
renderer measures of each small object) and random ones over a whole survey image."""

from __future__ import annotations

from typing import Any

import numpy as np
from skyqa.contracts import ValidInstance
from skyqa.contracts.ultra import MeasuredObject, MeasuredView, SurveyTask, SurveyView

W, H = 1000, 800
RED, WHITE, GREEN, YELLOW = [0.78, 0.14, 0.12], [0.92, 0.92, 0.9], [0.2, 0.55, 0.22], [0.93, 0.8, 0.18]


def measured(iid: int, cls: str, box: list[int], **kw: Any) -> MeasuredObject:
    x0, y0, x1, y1 = box
    base: dict[str, Any] = {
        "instance_id": iid,
        "class_name": cls,
        "category": "vehicle",
        "pixels": (x1 - x0) * (y1 - y0),
        "box": box,
        "centroid": [(x0 + x1) / 2, (y0 + y1) / 2],
        "axis_deg": 0.0 if x1 - x0 >= y1 - y0 else 90.0,
        "elongation": max(x1 - x0, y1 - y0) / max(1, min(x1 - x0, y1 - y0)),
        "lit_rgb": WHITE,
        "in_frame": 1.0,
        "occluded": 0.0,
    }
    return MeasuredObject(**{**base, **kw})


def landmark(iid: int, cls: str, box: list[int]) -> MeasuredObject:
    """A landmark as the survey measures it: not a target (no colour, no in-frame share)."""
    return measured(iid, cls, box, category="building", lit_rgb=[], in_frame=-1.0, occluded=-1.0)


def reviewed(rendered_id: int, text: str) -> ValidInstance:
    """A reviewed landmark the family names by ``text``, rendered with ``rendered_id``."""
    # only what the family reads of a review; the rest of the record is not needed
    fields: dict[str, Any] = {
        "instance_id": f"10_{rendered_id}",
        "instance_numeric_id": rendered_id,
        "class_name": "residential_building",
        "landmark_description": text,
        "main_view": "",
        "rgb_views": [],
    }
    return ValidInstance.model_construct(**fields)


# the landmarks of random_layout: one per region, the same ids in every view
LANDMARK_NAMES = {
    1001: "gray water tower",
    1002: "teal fountain",
    1003: "red house",
    1004: "white office tower",
}
REVIEWED = [reviewed(i, t) for i, t in LANDMARK_NAMES.items()]


def survey(objects: list[MeasuredObject]) -> SurveyTask:
    return SurveyTask(
        scene_id="s",
        survey_id="s_survey_000",
        center=[0, 0, 0],
        gsd_m=0.05,
        width=W,
        height=H,
        fov_deg=90,
        views=[SurveyView(view="nadir", pose=[0, 0, 25, 90, -90, 0])],
        seed=1,
        measured=[MeasuredView(image="survey/view_00.jpg", objects=objects)],
    )


def random_layout(rng: np.random.Generator, w: int = 8192, h: int = 6144) -> list[MeasuredObject]:
    """Objects of every small class, each clear, in a random orientation and colour, about
    half scattered and half close to one of four reviewed landmarks, one in each region."""
    sizes = {"car": (60, 24), "truck": (110, 36), "bus": (160, 40), "tree": (60, 60),
             "shipping_container": (90, 36), "storage_tank": (120, 120)}  # fmt: skip
    colours = [RED, WHITE, [0.15, 0.3, 0.8], [0.1, 0.1, 0.1]]
    out: list[MeasuredObject] = []
    spots = []
    for k in range(len(LANDMARK_NAMES)):
        lw, lh = (int(v) for v in rng.integers(150, 400, 2))
        x = int(rng.integers(400, w // 2 - 400 - lw)) + (w // 2) * (k % 2)
        y = int(rng.integers(400, h // 2 - 400 - lh)) + (h // 2) * (k // 2)
        spots.append((x, y, x + lw, y + lh))
    for cls, (a, b) in sizes.items():
        for _ in range(int(rng.integers(0, 12 if cls == "car" else 5))):
            bw, bh = (a, b) if rng.random() < 0.5 or a == b else (b, a)
            x, y = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
            if rng.random() < 0.5:  # close to a landmark (the near ones and those in doubt)
                x0, y0, x1, y1 = spots[int(rng.integers(len(spots)))]
                x = int(np.clip(rng.integers(x0 - 280, x1 + 280), 0, w - bw))
                y = int(np.clip(rng.integers(y0 - 280, y1 + 280), 0, h - bh))
            lit = GREEN if cls == "tree" else colours[int(rng.integers(len(colours)))]
            box = [x, y, x + bw, y + bh]
            out.append(measured(len(out) + 1, cls, box, lit_rgb=lit, elongation=max(bw, bh) / min(bw, bh)))
    out += [
        landmark(iid, "residential_building", list(box))
        for iid, box in zip(LANDMARK_NAMES, spots, strict=True)
    ]
    return out
