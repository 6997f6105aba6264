"""Where each image row's gold answer sits among its four options.

Per (task, difficulty), the gold positions of all rows are one seeded shuffle of a balanced
sequence (every letter n/4 times, the remainder letters drawn at random), so a letter tells
nothing about the difficulty, the landmark or the row's place in the manifest, and the rows
that share a landmark and a slot do not share a letter. Positions are fixed before any row is
built, from the landmarks' difficulty slots, so ``skyqa refresh`` replays them exactly.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
from skyqa.contracts.qa import IMAGE_TASKS

LETTERS = "ABCD"
CHOICES = len(LETTERS)


def _rng(seed: int, task: str, difficulty: str) -> np.random.Generator:
    key = hashlib.sha256(f"placement:{seed}:{task}:{difficulty}".encode()).digest()
    return np.random.default_rng(int.from_bytes(key[:8], "big"))


def balanced(n: int, rng: np.random.Generator) -> list[int]:
    """``n`` positions, each of the four ``n // 4`` times plus distinct random ones, shuffled."""
    seq = np.concatenate(
        [np.tile(np.arange(CHOICES), n // CHOICES), rng.choice(CHOICES, n % CHOICES, replace=False)]
    )
    return [int(x) for x in rng.permutation(seq)]


class Placement:
    """Gold positions for every (landmark, slot, task) of a run, from each landmark's slots."""

    def __init__(self, seed: int, slots: list[list[str]]) -> None:
        """``slots[i]``: the difficulties of landmark ``i``'s slots, in slot order."""
        ordinal: dict[tuple[int, int], int] = {}
        sizes: Counter[str] = Counter()
        for i, difficulties in enumerate(slots):
            for s, difficulty in enumerate(difficulties):
                ordinal[(i, s)] = sizes[difficulty]
                sizes[difficulty] += 1
        self._slots = slots
        self._ordinal = ordinal
        self._positions = {
            (task, d): balanced(n, _rng(seed, task, d)) for task in IMAGE_TASKS for d, n in sizes.items()
        }

    def position(self, landmark: int, slot: int, task: str) -> int:
        difficulty = self._slots[landmark][slot]
        return self._positions[(task, difficulty)][self._ordinal[(landmark, slot)]]
