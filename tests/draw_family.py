"""A task family written for the tests whose first draw leaks: its rows of ``leaky`` put the
gold at letter A (a balance a fresh draw deals anew), and with ``stubborn`` every draw also
names the gold's word in the question (how the family builds its rows: no draw mends it). Its
rows release one by one, twelve units per reviewed landmark, no media: what the blind gate
and its redraws need to be tested against a real run."""

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
WORDS = ("harbour", "meadow", "quarry", "orchard", "viaduct", "lighthouse", "windmill", "granary")
PER_LANDMARK = 12


class DrawRow(Contract):
    sample_id: str
    unit: str
    task: str
    prompt_text: str
    options: list[Option]
    answer_option_id: str


class DrawProbe:
    name = "draw_probe"
    noun = "probe"
    media_policy = MediaPolicy()
    manifest = "probe_qa"
    files: Mapping[str, str] = MappingProxyType({"probe_qa": "probe_tasks/{scene}.probe_qa.jsonl"})
    row_model = DrawRow
    unit_kind = "probe_unit"
    unit_rows: int | None = None
    rows_field: str | None = None
    funnel: Mapping[str, str] = MappingProxyType({})
    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType(
        {"probe_leaky": ("option_correct",), "probe_fair": ("option_correct",)}
    )
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType({})

    def __init__(self, stubborn: bool = False) -> None:
        self.stubborn = stubborn

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}

    def plan(self, inputs: PlanInputs) -> Planned[DrawRow]:
        out = Planned[DrawRow](rows=[])
        for i, vi in enumerate(inputs.landmarks):
            for k in range(PER_LANDMARK):
                unit = f"probe-{vi.instance_id}-{k}"
                for task in ("probe_leaky", "probe_fair"):
                    rng = np.random.default_rng([inputs.seed, i, k, len(task), inputs.draw])
                    picked = [WORDS[int(j)] for j in rng.permutation(len(WORDS))[:4]]
                    leaky = task == "probe_leaky"
                    gold = 0 if leaky and inputs.draw == 0 else int(rng.integers(4))
                    # stubborn: the question names the gold's word, in every draw
                    asked = picked[gold] if leaky and self.stubborn else WORDS[(i + k) % len(WORDS)]
                    out.rows.append(
                        DrawRow(
                            sample_id=f"{unit}_{task}",
                            unit=unit,
                            task=task,
                            prompt_text=f"Which place did the drone pass, near the {asked}?",
                            options=[
                                Option(option_id=LETTERS[j], label=f"the {w}") for j, w in enumerate(picked)
                            ],
                            answer_option_id=LETTERS[gold],
                        )
                    )
        return out

    def check(self, rows: list[DrawRow], rendered: Rendered) -> Checked[DrawRow]:
        return Checked(rows)

    def balance(self, rows: list[DrawRow]) -> dict[str, str]:
        return {}

    def item(self, row: DrawRow) -> Item:
        options = tuple((o.option_id, o.label) for o in row.options)
        prompt = row.prompt_text + "\nOptions:\n" + "\n".join(f"{o}. {lab}" for o, lab in options)
        return Item(
            row.sample_id,
            row.task,
            row.unit,
            "4way",
            "choice",
            prompt,
            options,
            frozenset([row.answer_option_id]),
            family=self.name,
            texts=tuple(label for _, label in options),
        )

    def exports(self, rows: list[DrawRow]) -> dict[str, bytes]:
        return {}

    def difficulty(self, row: DrawRow) -> str:
        return "4way"

    def prompts(self, row: DrawRow) -> tuple[str, str]:
        return ('Reply with one JSON object: {"answer_option_id": "A"}', self.item(row).prompt)

    def media(self, row: DrawRow) -> list[MediaRef]:
        return []

    def marks(self, row: DrawRow) -> list[Mark]:
        return []

    def steps(self, row: DrawRow) -> list[ReasoningStep]:
        return []

    def parse(self, row: DrawRow, text: str) -> Parsed:
        return parse_choice(text, [o.option_id for o in row.options], [o.label for o in row.options])

    def score(self, row: DrawRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        return {"option_correct": float(parsed.kind == "choice" and parsed.option == row.answer_option_id)}

    def rotations(self, row: DrawRow) -> list[DrawRow]:
        return []

    def with_steps(self, row: DrawRow) -> DrawRow | None:
        return None

    def guess(self, row: DrawRow, rng: np.random.Generator) -> dict[str, Any]:
        return {"answer_option_id": row.options[int(rng.integers(len(row.options)))].option_id}

    def prior(self, row: DrawRow, rows: Sequence[DrawRow]) -> dict[str, Any]:
        return {"answer_option_id": row.options[0].option_id}

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| probe rows | {funnel.family_rows.get(self.name, 0)} |"],
            drops=[],
            files=[("probe_qa", f"- `{rel['probe_qa']}`: rows whose first draw leaks.")],
        )
