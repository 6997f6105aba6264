"""What the release keeps around the blind gate: a fact asked once (whatever its answer), the
rows of withheld tasks and units with their reasons, and each task's shortfall against the
quota."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from skyqa.families import Item

from services.qa_generator import gate
from services.qa_generator.release import REPEATED_FACT, WITHHELD, repeated_facts, shortfall, withheld_rows

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
