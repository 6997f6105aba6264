"""What the release keeps around the blind gate: a fact asked once (whatever its answer), the
rows of withheld tasks and units with their reasons, and each task's shortfall against the
quota."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType, SimpleNamespace
from typing import Any, cast

import pytest
from pydantic import BaseModel
from skyqa.families import Checked, Item
from skyqa.families.base import TOGETHER

from services.qa_generator import gate
from services.qa_generator.release import (
    REPEATED_FACT,
    WITHHELD,
    repeated_facts,
    select,
    shortfall,
    withheld_rows,
)

pytestmark = pytest.mark.unit


def item(sample: str, task: str = "recall", unit: str = "m1", fact: str = "", gold: str = "A") -> Item:
    options = (("A", "the tower"), ("B", "the bridge"), ("C", "the tank"))
    return Item(
        sample, task, unit, "easy", "choice", "Which is nearest?", options, frozenset([gold]), fact=fact
    )


def test_a_fact_is_asked_once_whatever_its_answer() -> None:
    rows = [
        item("a", unit="m1", fact="near:7", gold="A"),
        item("b", unit="m2", fact="near:7", gold="B"),  # the same fact, another gold: still a repeat
        item("c", unit="m3", fact="near:7", gold="A"),
        item("d", unit="m3", fact="near:9"),
        item("e", unit="m4"),  # no fact: its answer belongs to its own media
        item("f", unit="m5"),
    ]
    asked: set[str] = set()
    assert repeated_facts(rows, asked) == {"b": REPEATED_FACT, "c": REPEATED_FACT}
    # later families see what earlier ones asked
    assert repeated_facts([item("g", task="other", fact="near:9")], asked) == {"g": REPEATED_FACT}


def test_withheld_rows_name_their_task_or_unit() -> None:
    rows = [item("a", task="leaky"), item("b", task="fair", unit="twin"), item("c", task="fair", unit="m9")]
    blind = gate.GateResult(
        tasks={},
        families={},
        withheld={"leaky": ["text_model scores 0.9; leaking feature: question and option wording"]},
        withheld_units={
            "twin": "units m1, twin share the description 'x'; leaking feature: ambiguous reference"
        },
        tests=2,
    )
    out = withheld_rows(rows, blind)
    assert set(out) == {"a", "b"} and all(why.startswith(WITHHELD) for why in out.values())
    assert "task leaky leaks" in out["a"] and "ambiguous reference" in out["b"]


def test_the_shortfall_says_why_a_task_has_fewer_rows_than_the_quota() -> None:
    planned = {f"r{k}": item(f"r{k}", task="t" if k < 40 else "u") for k in range(50)}
    released = [planned[f"r{k}"] for k in range(30)] + [planned[f"r{k}"] for k in range(40, 45)]
    withheld = {f"r{k}": WITHHELD for k in range(45, 50)}
    out = shortfall(planned, released, withheld, quota=30)
    assert out["task_rows"] == {"t": 30, "u": 5}
    assert out["shortfall"] == {"u": "5 of 30 rows (5 withheld by the blind gate)"}
    assert (
        shortfall(planned, released, {}, quota=40)["shortfall"]["t"] == "30 of 40 rows (too few candidates)"
    )
    # a task its family found no candidates for is short too; a family that asked nothing is not
    asked = SimpleNamespace(name="", metrics={"t": (), "u": (), "v": ()})
    idle = SimpleNamespace(name="idle", metrics={"w": ()})
    out = shortfall(planned, released, withheld, 30, cast(Any, [asked, idle]))
    assert out["task_rows"] == {"t": 30, "u": 5, "v": 0}
    assert out["shortfall"]["v"] == "0 of 30 rows (too few candidates)" and "w" not in out["shortfall"]


def test_a_group_released_together_is_withheld_together() -> None:
    """UAV-DualCog's video rows of a landmark go as one when the gate withholds one of them;
    rows of families that release one by one (no group) are untouched."""
    rows = [
        replace(item("v1", task="count", unit="lm1"), together="video:lm1"),
        replace(item("v2", task="joint", unit="lm1"), together="video:lm1"),
        replace(item("v3", task="joint", unit="lm2"), together="video:lm2"),
        item("n1", task="count", unit="m1"),
        item("n2", task="recall", unit="m1"),
    ]
    blind = gate.GateResult(tasks={}, families={}, withheld={"count": ["leaks"]}, withheld_units={}, tests=1)
    out = withheld_rows(rows, blind)
    assert set(out) == {"v1", "v2", "n1"} and out["v2"] == f"{WITHHELD}: {TOGETHER}"


def test_select_leaves_out_a_landmarks_video_rows_together() -> None:
    """An uncertain visibility row takes its landmark's other video rows along; another
    landmark's rows and a family without groups keep their rows."""

    class Row(BaseModel):
        sample_id: str

    class Fam:
        name = "video"
        funnel = MappingProxyType({TOGETHER: "video_share_dropped", "unsure": "count_margin_dropped"})

        def balance(self, rows: list[Row]) -> dict[str, str]:
            return {}

    class Other(Fam):
        name = "nav"
        funnel = MappingProxyType({})

    items = {
        "a1": replace(item("a1", unit="lm1"), together="video:lm1"),
        "a2": replace(item("a2", unit="lm1"), together="video:lm1"),
        "b1": replace(item("b1", unit="lm2"), together="video:lm2"),
        "n1": item("n1", unit="m1"),
        "n2": item("n2", unit="m1"),
    }
    checked = {
        "video": Checked(
            [Row(sample_id="a1"), Row(sample_id="a2"), Row(sample_id="b1")], uncertain={"a1": "unsure"}
        ),
        "nav": Checked([Row(sample_id="n1"), Row(sample_id="n2")], uncertain={"n1": "unsure"}),
    }
    final, alone, counts = select(
        cast(Any, [Fam(), Other()]), checked, items, {}, {"video": {}, "nav": {}}, {}
    )
    assert [r.sample_id for r in final["video"]] == ["b1"] and alone["a2"] == TOGETHER
    assert [r.sample_id for r in final["nav"]] == ["n2"]  # one by one, as before
    assert counts["video_share_dropped"] == 1 and counts["count_margin_dropped"] == 1
