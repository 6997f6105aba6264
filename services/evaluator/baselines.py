"""Honest baselines that need no weights, answering through the same JSON contract as models.

- ``random``: a seeded uniform choice among the listed options (and a random box, a random
  option subset with the whole video as interval, a random count); the chance level.
- ``text_prior``: never looks at pixels. For each row it uses only the answers of *other*
  landmarks in the same manifest (leave-one-landmark-out): the most frequent gold label of the
  same task and difficulty, their mean box, the most common option count, the median count.
  Its gap to a model is the visual gap; rows it gets right are candidates for blind filtering.

Under ``schema_cot`` both also answer the reasoning steps from the same sources: ``random``
picks uniformly among the distinct gold answers of that task's step across the manifest,
``text_prior`` takes the most frequent one among other landmarks. Baselines never look at
pixels, so they run only in the conditions that do not change the pixels (``BASELINE``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Protocol

import numpy as np

BASELINE = frozenset({"full", "circular", "schema_cot"})


class Responder(Protocol):
    name: str
    conditions: frozenset[str]  # the conditions it can be evaluated in

    async def answer(self, row: dict[str, Any], condition: str) -> tuple[str, dict[str, Any]]:
        """The reply text and request metadata (status, latency, tokens, error class)."""
        ...


def _step_pool(rows: list[dict[str, Any]]) -> dict[tuple[str, int], list[tuple[str, str]]]:
    """(task, step index) -> [(landmark, gold step answer)] over the manifest."""
    pool: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for r in rows:
        for i, st in enumerate(r.get("reasoning_steps") or []):
            pool.setdefault((r["task_type"], i), []).append((r["landmark_id"], st["answer"]))
    return pool


def _rng(seed: int, sample_id: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class RandomBaseline:
    def __init__(self, rows: list[dict[str, Any]], seed: int = 0) -> None:
        self.name = "random"
        # part of the cache key: bump ``implementation`` whenever this code's answers change
        self.params = {"implementation": 1, "seed": seed}
        self.conditions = BASELINE
        self.seed = seed
        self.steps = _step_pool(rows)

    async def answer(self, row: dict[str, Any], condition: str = "full") -> tuple[str, dict[str, Any]]:
        rng = _rng(self.seed, row["sample_id"])
        if "label_options" in row:
            opts = [o["option_id"] for o in row["label_options"]]
            x0, y0 = rng.uniform(0, 0.8, 2)
            w, h = rng.uniform(0.05, 0.4, 2)
            box = [
                round(float(x0), 3),
                round(float(y0), 3),
                round(float(min(1, x0 + w)), 3),
                round(float(min(1, y0 + h)), 3),
            ]
            body: dict[str, Any] = {
                "answer_option_id": opts[int(rng.integers(len(opts)))],
                "bbox_xyxy_norm": box,
            }
            if condition == "schema_cot":
                pools = [
                    sorted({a for _, a in self.steps[(row["task_type"], i)]})
                    for i in range(len(row["reasoning_steps"]))
                ]
                body["steps"] = [p[int(rng.integers(len(p)))] for p in pools]
        elif row["form"] == "self_instance_recognition_joint":
            opts = [o["option_id"] for o in row["choice_options"]]
            k = int(rng.integers(1, len(opts) + 1))
            picked = sorted(opts[i] for i in rng.permutation(len(opts))[:k])
            body = {
                "answers": [{"option_id": o, "intervals_sec": [[0.0, row["duration_sec"]]]} for o in picked]
            }
        else:
            count = int(rng.integers(0, 4))
            edges = np.sort(rng.uniform(0, row["duration_sec"], 2 * count)).round(1).tolist()
            body = {
                "visible_count": count,
                "visible_intervals_sec": [edges[i : i + 2] for i in range(0, 2 * count, 2)],
            }
        return json.dumps(body), {"status": "ok"}


class TextPrior:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.name = "text_prior"
        self.params = {"implementation": 1}  # part of the cache key, as for the random baseline
        self.conditions = BASELINE
        self.rows = rows
        self.steps = _step_pool(rows)

    def _others(self, row: dict[str, Any], same: tuple[str, ...]) -> list[dict[str, Any]]:
        return [
            r
            for r in self.rows
            if r["landmark_id"] != row["landmark_id"] and all(r.get(k) == row.get(k) for k in same)
        ]

    def step_answers(self, row: dict[str, Any]) -> list[str]:
        out = []
        for i in range(len(row["reasoning_steps"])):
            freq = Counter(a for lm, a in self.steps[(row["task_type"], i)] if lm != row["landmark_id"])
            out.append(min(freq, key=lambda a: (-freq[a], a)) if freq else "")
        return out

    async def answer(self, row: dict[str, Any], condition: str = "full") -> tuple[str, dict[str, Any]]:
        if "label_options" in row:
            others = self._others(row, ("task_type", "difficulty"))
            freq = Counter(r["answer_label"] for r in others)
            ranked = sorted(row["label_options"], key=lambda o: (-freq.get(o["label"], 0), o["option_id"]))
            boxes = (
                np.array([r["answer_bbox_xyxy_norm"] for r in others])
                if others
                else np.array([[0.3, 0.3, 0.7, 0.7]])
            )
            body: dict[str, Any] = {
                "answer_option_id": ranked[0]["option_id"],
                "bbox_xyxy_norm": [round(float(v), 3) for v in boxes.mean(axis=0)],
            }
            if condition == "schema_cot":
                body["steps"] = self.step_answers(row)
        elif row["form"] == "self_instance_recognition_joint":
            others = self._others(row, ("form", "mission_kind"))
            k = round(float(np.median([len(r["answer_option_ids"]) for r in others]))) if others else 1
            picked = sorted(o["option_id"] for o in row["choice_options"])[: max(1, k)]
            body = {
                "answers": [{"option_id": o, "intervals_sec": [[0.0, row["duration_sec"]]]} for o in picked]
            }
        else:
            others = self._others(row, ("form",))
            counts = [int(r["gold_environment_answer"]["visible_count"]) for r in others]
            count = round(float(np.median(counts))) if counts else 1
            body = {
                "visible_count": count,
                "visible_intervals_sec": [[0.0, row["duration_sec"]]] if count else [],
            }
        return json.dumps(body), {"status": "ok"}
