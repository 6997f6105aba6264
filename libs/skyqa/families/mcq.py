"""How a single-answer multiple-choice row is asked and scored, for every family whose rows are
plain MCQs (a question, lettered options, one gold letter and its label): accuracy; CircularEval
copies rotate the labels over the letters; the chance level picks an option uniformly; the
text-only prior picks the option whose words were most often the gold answer of the same task
in other units' rows (a unit: what a family releases rows by, e.g. a mission or a UAV group)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, Self, TypeVar

import numpy as np

from skyqa.answers import Parsed, parse_choice
from skyqa.contracts.qa import Option
from skyqa.families.structure import Verdict, check_options

METRICS = ("option_correct", "option_correct_strict")


class ChoiceRow(Protocol):
    # read-only here, so rows whose fields are narrower (a Literal task) still qualify
    @property
    def sample_id(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def options(self) -> list[Option]: ...
    @property
    def answer_option_id(self) -> str: ...
    @property
    def answer_label(self) -> str: ...

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Self: ...


R = TypeVar("R", bound=ChoiceRow)


def user_prompt(question: str, options: Sequence[Option]) -> str:
    lines = "\n".join(f"{o.option_id}. {o.label}" for o in options)
    return f"{question}\nOptions:\n{lines}"


def parse(row: ChoiceRow, text: str) -> Parsed:
    return parse_choice(text, [o.option_id for o in row.options], [o.label for o in row.options])


def score(row: ChoiceRow, p: Parsed) -> dict[str, Any]:
    right = p.kind == "choice" and p.option == row.answer_option_id
    return {"option_correct": float(right), "option_correct_strict": float(right and p.strict)}


def rotations(row: R) -> list[R]:
    """One copy per rotation of the labels over the letters (the gold moves with its label)."""
    out = []
    labels = [o.label for o in row.options]
    for k in range(1, len(labels)):
        turned = labels[k:] + labels[:k]
        options = [
            Option(option_id=o.option_id, label=lab) for o, lab in zip(row.options, turned, strict=True)
        ]
        gold = next(o.option_id for o in options if o.label == row.answer_label)
        user = user_prompt(row.question, options)
        update = {
            "sample_id": f"{row.sample_id}_rot{k}",
            "options": options,
            "answer_option_id": gold,
            "user_prompt": user,
            "prompt_text": user,
        }
        out.append(row.model_copy(update=update))
    return out


def guess(row: ChoiceRow, rng: np.random.Generator) -> dict[str, Any]:
    return {"answer_option_id": row.options[int(rng.integers(len(row.options)))].option_id}


def prior(row: R, rows: Sequence[R], unit: Callable[[R], str]) -> dict[str, Any]:
    golds = Counter(r.answer_label for r in rows if r.task == row.task and unit(r) != unit(row))
    best = max(row.options, key=lambda o: (golds[o.label], -ord(o.option_id[0])))
    return {"answer_option_id": best.option_id}


def check_structure(row: ChoiceRow, v: Verdict) -> None:
    """Option ids and labels unique, none too similar, the gold among them with its own label."""
    ids = [o.option_id for o in row.options]
    check_options(row.sample_id, [o.label for o in row.options], ids, [row.answer_option_id], v)
    if row.answer_label != next((o.label for o in row.options if o.option_id == row.answer_option_id), None):
        v.fail(row.sample_id, "answer label is not the answer option's")


def balance(rows: Sequence[ChoiceRow], difficulty: Callable[[Any], str], reason: str) -> dict[str, str]:
    """Per task and difficulty (both public in a row), no gold answer more than once above the
    next most common one (rows kept in manifest order): planning balances across units, but a
    task whose units offer one answer only would let a text-only solver learn it."""
    out: dict[str, str] = {}
    for kind, level in sorted({(r.task, difficulty(r)) for r in rows}):
        mine = [r for r in rows if r.task == kind and difficulty(r) == level]
        ranked = Counter(r.answer_label for r in mine).most_common()
        cap = ranked[1][1] + 1 if len(ranked) > 1 else 1
        kept: Counter[str] = Counter()
        for r in mine:
            kept[r.answer_label] += 1
            if kept[r.answer_label] > cap:
                out[r.sample_id] = reason
    return out
