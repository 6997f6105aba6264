"""An LLM judge for free-form reasoning-step answers (off unless ``skyqa eval --judge`` names an
endpoint): a step whose rule match (:func:`skyqa.steps.step_correct`) failed is asked of the
judge only when its gold is free text, never when it is a box, a box list, a number or yes/no,
which the rules decide exactly. The judge sees the step question, the reference and the
candidate answer, no image, and answers ``{"equivalent": true|false}``; a reply that is not
that, or a failed request, leaves the rule's verdict. A judged step is marked in
``step_judged`` (1: the judge overturned the rule) and the step scores are recomputed, so the
leaderboard's per-operation errors count it. Judgements are cached like model replies.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from skyqa.contracts.qa import ReasoningStep
from skyqa.models.base import VisionModel
from skyqa.v1 import model_pb2

from services.evaluator.runner import Cache

SYSTEM = (
    "You grade one step of a worked solution. Decide whether the candidate answer means the same "
    "as the reference answer for the step's question. Reply with one JSON object and nothing "
    'else: {"equivalent": true} or {"equivalent": false}'
)
_EXACT = re.compile(r"^\s*(\[.*\]|-?\d+(\.\d+)?|yes\b.*|no\b.*|none)\s*$", re.I | re.S)


def free_form(gold: str) -> bool:
    """Whether the rules cannot decide the step exactly: not a box or box list, a number, yes/no."""
    return not _EXACT.match(gold)


def prompt(step: ReasoningStep, pred: str) -> str:
    return f"Step question: {step.question}\nReference answer: {step.answer}\nCandidate answer: {pred}"


def verdict(text: str) -> bool | None:
    try:
        value = json.loads(text.strip().strip("`").removeprefix("json").strip())
    except ValueError:
        return None
    if isinstance(value, dict) and isinstance(value.get("equivalent"), bool):
        return bool(value["equivalent"])
    return None


class Judge:
    def __init__(self, name: str, model: VisionModel, cache: Cache) -> None:
        self.name = name
        self.model = model
        self.cache = cache

    async def equivalent(self, step: ReasoningStep, pred: str) -> bool | None:
        text = prompt(step, pred)
        key = hashlib.sha256(json.dumps({"judge": self.name, "prompt": text}).encode()).hexdigest()
        cached = self.cache.get(key)
        if cached is None:
            req = model_pb2.GenerateRequest(system=SYSTEM, prompt=text, request_id=f"judge-{key[:12]}")
            req.params.temperature = 0.0
            req.params.max_tokens = 20
            try:
                resp = await self.model.generate(req)
            except Exception:  # a judge that fails leaves the rule's verdict, as an error reply does
                return None
            if resp.error_class != model_pb2.ERROR_CLASS_UNSPECIFIED:
                return None
            cached = resp.text
            self.cache.put(key, cached)
        return verdict(cached)


async def judge_item(item: dict[str, Any], gold: Sequence[ReasoningStep], judge: Judge) -> None:
    """Re-mark the item's free-form steps the rules failed; recompute its step scores."""
    preds, marks = item.get("pred_steps"), item.get("step_correct")
    if preds is None or marks is None:
        return
    judged = [0] * len(marks)
    for i, step in enumerate(gold):
        if marks[i] or i >= len(preds) or not free_form(step.answer):
            continue
        if await judge.equivalent(step, str(preds[i])):
            marks[i], judged[i] = 1, 1
    item["step_judged"] = judged
    item["step_accuracy"] = round(sum(marks) / len(marks), 4) if marks else 0.0
    item["first_error"] = next((op for op, ok in zip(item["step_ops"], marks, strict=True) if not ok), "none")
