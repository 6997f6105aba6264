"""Honest baselines that need no weights, answering through the same JSON contract as models.

- ``random``: a seeded uniform choice among the listed options (and a random box, a random
  option subset with the whole video as interval, a random count); the chance level.
- ``text_prior``: never looks at pixels. For each row it uses only the answers of *other*
  landmarks in the same manifest (leave-one-landmark-out): the most frequent gold label of the
  same task and difficulty, their mean box, the most common option count, the median count.
  Its gap to a model is the visual gap; rows it gets right are candidates for blind filtering.

Under the step protocols both also answer the reasoning steps from the same sources: ``random``
picks uniformly among the distinct gold answers of that task's step across the manifest,
``text_prior`` takes the most frequent one among other landmarks (in ``pred_step`` and
``gt_prefix`` one step per request, ignoring the transcript). Baselines never look at pixels,
so they run only in the conditions that do not change the pixels (``BASELINE``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Protocol

import numpy as np

from services.evaluator.questions import Question

BASELINE = frozenset(
    {"full", "circular", "generic_cot", "schema_cot", "fewshot_cot", "pred_step", "gt_prefix"}
)
SCHEMA = frozenset({"schema_cot", "fewshot_cot"})  # every step answered in one reply


class Responder(Protocol):
    name: str
    conditions: frozenset[str]  # the conditions it can be evaluated in

    async def answer(self, q: Question, condition: str) -> tuple[str, dict[str, Any]]:
        """The reply text and request metadata (status, latency, tokens, error class)."""
        ...


def _step_pool(questions: list[Question]) -> dict[tuple[str, int], list[tuple[str, str]]]:
    """(task, step index) -> [(landmark, gold step answer)] over the manifest."""
    pool: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for q in questions:
        item = q.item()
        for i, st in enumerate(q.family.steps(q.row)):
            pool.setdefault((item.task, i), []).append((item.unit, st.answer))
    return pool


def _rng(seed: int, sample_id: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class RandomBaseline:
    def __init__(self, questions: list[Question], seed: int = 0) -> None:
        self.name = "random"
        # part of the cache key: bump ``implementation`` whenever this code's answers change
        self.params = {"implementation": 1, "seed": seed}
        self.conditions = BASELINE
        self.seed = seed
        self.steps = _step_pool(questions)

    async def answer(self, q: Question, condition: str = "full") -> tuple[str, dict[str, Any]]:
        rng = _rng(self.seed, q.sample_id if q.step is None else f"{q.sample_id}:{q.step}")
        task = q.item().task
        pools = [sorted({a for _, a in self.steps[(task, i)]}) for i in range(len(q.family.steps(q.row)))]
        if q.step is not None and q.step < len(pools):
            return json.dumps({"answer": pools[q.step][int(rng.integers(len(pools[q.step])))]}), {
                "status": "ok"
            }
        body = q.family.guess(q.row, rng)
        if condition in SCHEMA:
            body["steps"] = [p[int(rng.integers(len(p)))] for p in pools]
        return json.dumps(body), {"status": "ok"}


class TextPrior:
    def __init__(self, questions: list[Question]) -> None:
        self.name = "text_prior"
        self.params = {"implementation": 1}  # part of the cache key, as for the random baseline
        self.conditions = BASELINE
        self.rows: dict[str, list[Any]] = {}
        for q in questions:
            self.rows.setdefault(q.family.name, []).append(q.row)
        self.steps = _step_pool(questions)

    def step_answers(self, q: Question) -> list[str]:
        item = q.item()
        out = []
        for i in range(len(q.family.steps(q.row))):
            freq = Counter(a for lm, a in self.steps[(item.task, i)] if lm != item.unit)
            out.append(min(freq, key=lambda a: (-freq[a], a)) if freq else "")
        return out

    async def answer(self, q: Question, condition: str = "full") -> tuple[str, dict[str, Any]]:
        if q.step is not None and q.step < len(q.family.steps(q.row)):
            return json.dumps({"answer": self.step_answers(q)[q.step]}), {"status": "ok"}
        body = q.family.prior(q.row, self.rows.get(q.family.name, []))
        if condition in SCHEMA:
            body["steps"] = self.step_answers(q)
        return json.dumps(body), {"status": "ok"}
