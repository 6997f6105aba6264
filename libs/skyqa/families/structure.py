"""Option-structure checks every family's QC shares (AirCopBench / UrbanVideo-Bench style):
unique option ids and labels, the answer among the options, no two options more similar than
0.85 (difflib)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from skyqa.vocab import directions as L

MAX_SIMILARITY = 0.85


@dataclass
class Verdict:
    reasons: dict[str, str] = field(default_factory=dict)  # sample_id -> reason

    def fail(self, sample_id: str, reason: str) -> None:
        self.reasons.setdefault(sample_id, reason)


def check_options(
    sample_id: str, labels: list[str], ids: list[str], answers: list[str], v: Verdict, text: bool = True
) -> None:
    """Similarity is checked for every pair that involves a distractor (two correct options of
    a multi-select row may share wording, e.g. one orbit with two camera modes); ``text`` is
    False when the labels name pictures ("Image 2"), not answers."""
    if len(set(ids)) != len(ids) or len(set(labels)) != len(labels):
        v.fail(sample_id, "duplicate option ids or labels")
    if not answers or any(a not in ids for a in answers):
        v.fail(sample_id, "answer not among the options")
    if not text:
        return
    correct = {lab for lab, i in zip(labels, ids, strict=True) if i in answers}
    for a, b in itertools.combinations(labels, 2):
        if {a, b} <= correct:
            continue
        if L.similarity(a, b) > MAX_SIMILARITY:
            v.fail(sample_id, "two options more similar than 0.85")


def max_similarity(rows: list[tuple[str, ...]]) -> float:
    best = 0.0
    for labels in rows:
        for a, b in itertools.combinations(labels, 2):
            best = max(best, L.similarity(a, b))
    return round(best, 4)
