"""How a navigation row is asked and scored: one multiple-choice answer, accuracy; CircularEval
copies rotate the options; the chance level picks an option uniformly; the text-only prior picks
the option whose words were most often the gold answer in other missions' rows of the task."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from skyqa.answers import Parsed, parse_choice
from skyqa.contracts.qa import Option
from skyqa.contracts.urbanvideo import NavRow
from skyqa.families.base import MediaRef

METRICS = ("option_correct", "option_correct_strict")
SYSTEM = (
    "You are an aerial agent (a drone). The video is your own first-person view, from the start "
    "of your flight up to now. Answer the multiple-choice question about it. Reply with one JSON "
    'object and nothing else: {"answer_option_id": "<letter>"}'
)


def user_prompt(question: str, options: list[Option]) -> str:
    lines = "\n".join(f"{o.option_id}. {o.label}" for o in options)
    return f"{question}\nOptions:\n{lines}"


def media(row: NavRow) -> list[MediaRef]:
    return [MediaRef("video", row.video_path, row.fps)]


def parse(row: NavRow, text: str) -> Parsed:
    return parse_choice(text, [o.option_id for o in row.options], [o.label for o in row.options])


def score(row: NavRow, p: Parsed) -> dict[str, Any]:
    right = p.kind == "choice" and p.option == row.answer_option_id
    return {"option_correct": float(right), "option_correct_strict": float(right and p.strict)}


def rotations(row: NavRow) -> list[NavRow]:
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
        out.append(
            row.model_copy(
                update={
                    "sample_id": f"{row.sample_id}_rot{k}",
                    "options": options,
                    "answer_option_id": gold,
                    "user_prompt": user,
                    "prompt_text": user,
                }
            )
        )
    return out


def guess(row: NavRow, rng: np.random.Generator) -> dict[str, Any]:
    return {"answer_option_id": row.options[int(rng.integers(len(row.options)))].option_id}


def prior(row: NavRow, rows: Sequence[NavRow]) -> dict[str, Any]:
    golds = Counter(r.answer_label for r in rows if r.task == row.task and r.mission_id != row.mission_id)
    best = max(row.options, key=lambda o: (golds[o.label], -ord(o.option_id[0])))
    return {"answer_option_id": best.option_id}
