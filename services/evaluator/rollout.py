"""UltraVR's sequential process-level protocols: each ground-truth reasoning step is asked in a
call of its own, then the final question.

- ``pred_step`` (S4): a step sees the earlier steps with the model's own answers, so an early
  error propagates; the first wrong step locates where the trajectory breaks.
- ``gt_prefix`` (S5): a step sees the earlier steps answered by the ground truth, so each step
  is scored on its own, and the final question is asked after the true trajectory, except for a
  step whose answer is the gold answer itself (a trace's last step usually is), where the
  model's own answer to it is shown instead.

A step request carries the row's system prompt followed by the step's reply format.

Prompts are the row's own question followed by a transcript (``S1. question`` / ``A1: answer``)
and the step asked; a step's reply is ``{"answer": ...}`` (a bare reply counts as the answer).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from skyqa.contracts.qa import ReasoningStep
from skyqa.families import Item

STEP_REPLY = 'Reply with one JSON object and nothing else: {"answer": "<your answer to this step>"}'


def transcript(steps: Sequence[ReasoningStep], answers: Sequence[str]) -> list[str]:
    return [f"S{k}. {s.question}\nA{k}: {a}" for k, (s, a) in enumerate(zip(steps, answers, strict=False), 1)]


def step_prompt(user: str, steps: Sequence[ReasoningStep], prior: Sequence[str], i: int) -> str:
    lines = [user, "", "Work through the question one step at a time."]
    if prior:
        lines += ["Steps answered so far:", *transcript(steps, prior)]
    lines += [f"Now answer only step S{i + 1}: {steps[i].question}", STEP_REPLY]
    return "\n".join(lines)


def final_prompt(user: str, steps: Sequence[ReasoningStep], answers: Sequence[str]) -> str:
    return "\n".join(
        [user, "", "Steps answered so far:", *transcript(steps, answers), "Now answer the question above."]
    )


def step_answer(text: str) -> Any:
    """The ``answer`` of a JSON reply (inside a code fence or not); otherwise the stripped text."""
    body = text.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return body
    return value.get("answer", body) if isinstance(value, dict) else value


def as_text(value: Any) -> str:
    """A step answer as the transcript shows it."""
    return value if isinstance(value, str) else json.dumps(value)


STEP_SYSTEM = (
    "For this request answer only the step asked, not the question: reply with one JSON object "
    'and nothing else, {"answer": ...}. A box is [x1, y1, x2, y2] normalized to [0, 1] on the '
    "image; a list of boxes is a JSON list of them ([] for none); a count is an integer."
)


def step_system(system: str) -> str:
    """The row's own system prompt (what the images are, the rules its answers follow) with the
    step's reply format after it, which overrides the row's."""
    return f"{system}\n\n{STEP_SYSTEM}"


def gt_prefix(steps: Sequence[ReasoningStep], own: Sequence[str], item: Item) -> list[str]:
    """The ground-truth steps S5 shows before the final question, except any whose answer is
    the gold answer itself: there the model's own answer stands, or S5 would hand it the gold."""
    gold = {_norm(label) for oid, label in item.options if oid in item.gold} | {_norm(g) for g in item.gold}
    return [mine if _norm(s.answer) in gold else s.answer for s, mine in zip(steps, own, strict=True)]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())
