"""Honest baselines that need no weights, answering through the same JSON contract as models.

- ``random``: a seeded uniform choice among the listed options (and a random box, a random
  option subset with the whole video as interval, a random count); the chance level.
- ``text_prior``: never looks at pixels. For each row it uses only the answers of *other*
  landmarks in the same manifest (leave-one-landmark-out): the most frequent gold label of the
  same task and difficulty, their mean box, the most common option count, the median count.
  Its gap to a model is the visual gap; rows it gets right are candidates for blind filtering.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Protocol

import numpy as np


class Responder(Protocol):
    name: str

    async def answer(self, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The reply text and request metadata (status, latency, tokens, error class)."""
        ...


def _rng(seed: int, sample_id: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{sample_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


class RandomBaseline:
    def __init__(self, seed: int = 0) -> None:
        self.name = "random"
        self.seed = seed

    async def answer(self, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
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
        self.rows = rows

    def _others(self, row: dict[str, Any], same: tuple[str, ...]) -> list[dict[str, Any]]:
        return [
            r
            for r in self.rows
            if r["landmark_id"] != row["landmark_id"] and all(r.get(k) == row.get(k) for k in same)
        ]

    async def answer(self, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
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
