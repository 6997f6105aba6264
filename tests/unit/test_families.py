"""The task-family registry and the release-wide rules every family's rows go through: no two
families overwrite each other, malformed golds are caught, letters are balanced per family
alphabet, plans name the families that made them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from category_family import LandmarkCategory
from rows import image_row, plan_fields
from skyqa.blob import LocalBlobStore
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO, FAMILIES, Item, check_registry, release_files

from services.evaluator.questions import load_questions
from services.qa_generator import gate
from services.qa_generator.pipeline import QAPlan
from services.qa_generator.qc import letter_balance


class Renamed(LandmarkCategory):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(without="")
        for k, v in attrs.items():
            setattr(self, k, v)


def test_the_registry_refuses_families_that_overwrite_each_other() -> None:
    check_registry([*FAMILIES, LandmarkCategory(without="")])  # a well-behaved newcomer
    clashes = {
        "family 'dualcog_image'": Renamed(name="dualcog_image"),
        "file 'qc_report' is already used by every release": Renamed(
            files={"qc_report": "x.json", "category_qa": "c.jsonl"}
        ),
        "file 'image_qa' is already used by family 'dualcog_image'": Renamed(
            files={"image_qa": "elsewhere.jsonl", "category_qa": "c.jsonl"}
        ),
        "task 'env_where'": Renamed(metrics={"env_where": ("option_correct",)}),
        "manifest 'category_qa' is not among its files": Renamed(files={"other": "o.jsonl"}),
    }
    for message, family in clashes.items():
        with pytest.raises(ValueError, match=message):
            check_registry([*FAMILIES, family])
        with pytest.raises(ValueError, match=message):
            release_files("run", "scene", [*FAMILIES, family])


def choice(sample_id: str, gold: set[str], ids: str = "ABCD", kind: str = "choice") -> Item:
    options = tuple((x, x.lower()) for x in ids)
    return Item(sample_id, "t", "lm", "4way", kind, "", options, frozenset(gold))


def test_a_gold_that_is_not_one_of_the_options_is_a_problem() -> None:
    assert choice("ok", {"B"}).problem() is None
    assert choice("none", set()).problem() == "answer not among the options"
    assert choice("two", {"A", "B"}).problem() == "answer not among the options"
    assert choice("outside", {"E"}).problem() == "answer not among the options"
    assert choice("multi", {"A", "C"}, kind="multi").problem() is None
    assert choice("multi-outside", {"A", "Z"}, kind="multi").problem() == "answer not among the options"
    count = Item("c", "t", "lm", "atomic", "count", "", (), frozenset({"2"}))
    assert count.problem() is None
    assert Item("c", "t", "lm", "atomic", "count", "", (), frozenset()).problem() == "answer is not one count"
    assert (
        Item("c", "t", "lm", "atomic", "count", "", (), frozenset({""})).problem()
        == "answer is not one count"
    )


def test_letters_are_balanced_over_each_familys_own_alphabet() -> None:
    dualcog = [
        DUALCOG_IMAGE.item(image_row(sample_id=f"i{k}", task_type="env_how", answer_option_id="ABC"[k % 3]))
        for k in range(6)
    ]
    three = [
        DUALCOG_IMAGE.item(
            image_row(
                sample_id=f"w{k}",
                task_type="env_where",
                label_options=[
                    {"option_id": x, "label": lab}
                    for x, lab in zip("ABC", ("Front", "Left", "Right"), strict=True)
                ],
                answer_option_id="ABC"[k % 3],
                answer_label=("Front", "Left", "Right")[k % 3],
            )
        )
        for k in range(6)
    ]
    numbered = [
        Item(
            f"n{k}",
            "count_cars",
            f"g{k}",
            "easy",
            "choice",
            "",
            (("1", "a"), ("2", "b"), ("3", "c")),
            frozenset({"123"[k % 3]}),
            family="other",
        )
        for k in range(6)
    ]
    report = letter_balance([*dualcog, *three, *numbered])
    assert set(report["count_cars"]) >= {"1", "2", "3"} and "A" not in report["count_cars"]
    assert report["count_cars"]["chi2_p"] == 1.0
    # the 3-option task reports D too: its family's rows elsewhere offer four letters
    assert report["env_where"]["D"] == 0 and report["env_where"]["A"] == 2


def test_units_without_a_description_are_not_ambiguous() -> None:
    items = [Item(f"s{k}", "t", f"u{k}", "d", "count", "", (), frozenset({"1"})) for k in range(4)]
    assert not gate.run_gate(items).withheld_units
    named = [
        Item(f"s{k}", "t", f"u{k}", "d", "count", "", (), frozenset({"1"}), description="same")
        for k in range(2)
    ]
    assert set(gate.run_gate(named).withheld_units) == {"u0", "u1"}


def test_a_plan_names_the_families_that_made_it() -> None:
    row = image_row().model_dump(mode="json")
    old = QAPlan.model_validate(plan_fields(image_rows=[row], video_rows=[], mission_instance_ids={"m": 3}))
    assert old.families(FAMILIES) == [DUALCOG_IMAGE, DUALCOG_VIDEO]  # an older plan still refreshes
    assert old.rows_of(DUALCOG_IMAGE) == [image_row()]
    newer = QAPlan.model_validate(plan_fields({"dualcog_image": [row], "dualcog_video": []}))
    # a family registered after the plan was made has no rows in it and takes no part
    assert newer.families([*FAMILIES, LandmarkCategory(without="")]) == [DUALCOG_IMAGE, DUALCOG_VIDEO]
    with pytest.raises(InvalidInput, match="unregistered task families: gone"):
        QAPlan.model_validate(plan_fields({"gone": []})).families(FAMILIES)
    broken = QAPlan.model_validate(plan_fields({"dualcog_image": [{**row, "answer_option_id": 7}]}))
    with pytest.raises(InvalidInput, match="qa plan row 0 of dualcog_image is invalid at answer_option_id"):
        broken.rows_of(DUALCOG_IMAGE)


def test_the_evaluator_reads_manifests_through_the_family_contracts(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    files = release_files("r", "s")
    with pytest.raises(BlobNotFound, match="has no QA manifests"):
        load_questions(store, "r", "s")
    good = image_row().model_dump(mode="json")
    store.put(files["image_qa"], json.dumps(good).encode() + b"\n")
    (q,) = load_questions(store, "r", "s")  # a family without a manifest has no rows
    assert q.family is DUALCOG_IMAGE and q.row == image_row()
    bad = {
        "answer not among the options": {**good, "label_options": []},
        "invalid at extra": {**good, "extra": 1},
        "invalid at top level": "not a row",
    }
    for message, row in bad.items():
        store.put(files["image_qa"], json.dumps(row).encode() + b"\n")
        with pytest.raises(InvalidInput, match=message):
            load_questions(store, "r", "s")
    lost = {**good, "answer_label": "Nowhere"}
    with pytest.raises(InvalidInput, match="answer label is not one of its options"):
        DUALCOG_IMAGE.rotations(image_row(**{k: lost[k] for k in ("answer_label",)}))
