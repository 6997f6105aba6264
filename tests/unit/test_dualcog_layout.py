"""UAV-DualCog's manifests as its loaders and metric code read them (field lists in
``tests/dualcog_fields.py``)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from dualcog_fields import COMPOSITE_WORDS, IMAGE_READ, IMAGE_REQUIRED, VIDEO_READ, VIDEO_REQUIRED
from rows import image_row, video_row
from skyqa.families.dualcog_image.export import dualcog_manifest as image_manifest
from skyqa.families.dualcog_video.export import dualcog_manifest as video_manifest
from skyqa.vocab.behaviors import composite_label, element_label, load_library

pytestmark = pytest.mark.unit


def test_image_samples_carry_every_field_the_reference_reads() -> None:
    rows = [
        image_row(sample_id="w", task_type="self_where", metadata={"reference_label": "Back"}),
        image_row(sample_id="e"),
    ]
    doc = json.loads(image_manifest(rows))
    assert isinstance(doc["samples"], list) and doc["sample_count"] == 2
    for s in doc["samples"]:
        assert set(s) >= IMAGE_REQUIRED | IMAGE_READ, IMAGE_REQUIRED | IMAGE_READ - set(s)
        assert s["answer_option_ids"] == [s["answer_option_id"]]
        assert re.fullmatch(r"[A-D]", s["answer_option_id"])
        x0, y0, x1, y1 = s["answer_bbox_xyxy_norm"]
        assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1
    assert doc["samples"][0]["reference_view"] == "Back"


def test_video_samples_carry_every_field_and_intervals_as_objects() -> None:
    joint = video_row(
        sample_id="j",
        form="self_instance_recognition_joint",
        task_group="self-state",
        task_name="self_instance_recognition_joint",
        choice_options=[{"option_id": "A", "label": "circle cw 90°"}],
        answer_option_ids=["A"],
        answer_items=[{"option_id": "A", "label": "circle cw 90°", "intervals_sec": [[0.0, 3.0]]}],
        gold_environment_answer={},
    )
    doc = json.loads(video_manifest([video_row(), joint]))
    visibility, self_row = doc["samples"]
    for s in (visibility, self_row):
        assert set(s) >= VIDEO_REQUIRED | VIDEO_READ, VIDEO_REQUIRED | VIDEO_READ - set(s)
        assert s["mode"] == "single-landmark"
    assert visibility["visible_count"] == 1
    assert visibility["visible_intervals_sec"] == [{"start_sec": 0.0, "end_sec": 2.0}]
    # a self-state row's count and intervals exist too: the reference reads them from every row
    assert self_row["visible_count"] == 0 and self_row["visible_intervals_sec"] == []
    assert self_row["include_temporal_localization"] is True
    labels = {o["option_id"]: o["label"] for o in self_row["choice_options"]}
    assert all(labels[a["option_id"]] == a["label"] for a in self_row["answer_items"])


def test_only_composite_labels_use_the_words_the_reference_reads_as_composite() -> None:
    lib = load_library()
    rng = np.random.default_rng(0)
    for name in lib.set_names("atomic"):
        step = lib.sets[name].steps[0]
        for mode in ("look_forward", "landmark_track"):
            label = element_label(step.element, mode, lib.sample_step(step, rng))
            assert not COMPOSITE_WORDS.search(label), label
    for name in lib.set_names("composite"):
        assert COMPOSITE_WORDS.search(composite_label(lib, name))
