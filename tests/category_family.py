"""A task family written for the tests the way a new one is written: a row model, a plan from
the reviewed landmarks, a check against the review, a blind-gate view, a card share. Plugged
into the qa-generator by passing it with the registered families."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from skyqa.answers import Parsed, parse_choice
from skyqa.contracts import ValidInstance
from skyqa.contracts.base import Contract
from skyqa.contracts.qa import Funnel, Option, ReasoningStep
from skyqa.families import CardPart, Checked, Item, PlanInputs, Planned, Rendered
from skyqa.families.base import Mark, MediaRef
from skyqa.media_policy import MediaPolicy

LETTERS = "ABCD"


class CategoryRow(Contract):
    sample_id: str
    landmark_id: str
    landmark_description: str
    prompt_text: str
    options: list[Option]
    answer_option_id: str
    answer: str


class LandmarkCategory:
    """ "Which category is the landmark described as ...?", one row per landmark, except for
    ``without``, which therefore must not be released by any family."""

    name = "landmark_category"
    noun = "category"
    media_policy = MediaPolicy()
    manifest = "category_qa"
    files: Mapping[str, str] = MappingProxyType({"category_qa": "category_tasks/{scene}.category_qa.jsonl"})
    row_model = CategoryRow
    unit_kind = "landmark"
    unit_rows: int | None = 1
    rows_field: str | None = None
    funnel: Mapping[str, str] = MappingProxyType({})

    def __init__(self, without: str) -> None:
        self.without = without

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}  # every reviewed landmark has a category

    def plan(self, inputs: PlanInputs) -> Planned[CategoryRow]:
        cats = sorted({v.landmark_category or v.class_name for v in inputs.landmarks} | {"tree", "tower"})
        out = Planned[CategoryRow](rows=[])
        for i, vi in enumerate(inputs.landmarks):
            if vi.instance_id == self.without:
                continue
            gold = vi.landmark_category or vi.class_name
            labels = [c for c in cats if c != gold][:3]
            labels.insert(i % 4, gold)
            out.rows.append(
                CategoryRow(
                    sample_id=f"{vi.instance_id}_category",
                    landmark_id=vi.instance_id,
                    landmark_description=vi.landmark_description or vi.class_name,
                    prompt_text=f"Which category is the landmark described as '{vi.landmark_description}'?",
                    options=[Option(option_id=LETTERS[k], label=lab) for k, lab in enumerate(labels)],
                    answer_option_id=LETTERS[labels.index(gold)],
                    answer=gold,
                )
            )
        return out

    def check(self, rows: list[CategoryRow], rendered: Rendered) -> Checked[CategoryRow]:
        def reviewed(lm: str) -> str:
            vi = rendered.landmarks[lm]
            return vi.landmark_category or vi.class_name

        failed = {
            r.sample_id: "category is not the reviewed one"
            for r in rows
            if r.answer != reviewed(r.landmark_id)
        }
        return Checked(rows, failed)

    def balance(self, rows: list[CategoryRow]) -> dict[str, str]:
        return {}

    def item(self, row: CategoryRow) -> Item:
        options = tuple((o.option_id, o.label) for o in row.options)
        return Item(
            row.sample_id,
            self.name,
            row.landmark_id,
            "4way",
            "choice",
            row.prompt_text,
            options,
            frozenset([row.answer_option_id]),
            description=row.landmark_description,
            category=row.answer,
            family=self.name,
            texts=tuple(label for _, label in options),
        )

    def exports(self, rows: list[CategoryRow]) -> dict[str, bytes]:
        return {}

    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({"landmark_category": ("option_correct",)})
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType({})

    def difficulty(self, row: CategoryRow) -> str:
        return "4way"

    def prompts(self, row: CategoryRow) -> tuple[str, str]:
        options = "\n".join(f"{o.option_id}. {o.label}" for o in row.options)
        return (
            'Reply with one JSON object: {"answer_option_id": "A"}',
            f"{row.prompt_text}\nOptions:\n{options}",
        )

    def media(self, row: CategoryRow) -> list[MediaRef]:
        return []  # asked in words alone: a fine family for testing, a poor benchmark

    def marks(self, row: CategoryRow) -> list[Mark]:
        return []

    def steps(self, row: CategoryRow) -> list[ReasoningStep]:
        return []

    def parse(self, row: CategoryRow, text: str) -> Parsed:
        return parse_choice(text, [o.option_id for o in row.options], [o.label for o in row.options])

    def score(self, row: CategoryRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        return {"option_correct": float(parsed.kind == "choice" and parsed.option == row.answer_option_id)}

    def rotations(self, row: CategoryRow) -> list[CategoryRow]:
        return []

    def with_steps(self, row: CategoryRow) -> CategoryRow | None:
        return None

    def guess(self, row: CategoryRow, rng: np.random.Generator) -> dict[str, Any]:
        return {"answer_option_id": row.options[int(rng.integers(len(row.options)))].option_id}

    def prior(self, row: CategoryRow, rows: Sequence[CategoryRow]) -> dict[str, Any]:
        return {"answer_option_id": row.options[0].option_id}

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| category rows | {funnel.family_rows.get(self.name, 0)} |"],
            drops=[],
            files=[("category_qa", f"- `{rel['category_qa']}`: which category each landmark is.")],
        )
