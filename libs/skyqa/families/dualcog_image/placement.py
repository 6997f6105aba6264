"""Which answer each image row gets, and where it sits among the row's options.

Per (task, difficulty), the gold positions of all rows are one seeded shuffle of a balanced
sequence (every letter n/k times for k options, the remainder letters drawn at random), so a
letter tells nothing about the difficulty, the landmark or the row's place in the manifest,
and the rows that share a landmark and a slot do not share a letter. Positions are fixed
before any row is built, from the landmarks' difficulty slots; the plan stores every row, so
``skyqa refresh`` replays them exactly.

:class:`LabelBalance` does the same for the gold *labels*: rows are planned in order, and each
asks for the labels of its space least used so far, so every label of a task's space is the
answer about equally often whatever the landmarks make available.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable

import numpy as np

from skyqa.contracts.qa import IMAGE_TASKS

LETTERS = "ABCD"


def _rng(seed: int, task: str, difficulty: str) -> np.random.Generator:
    key = hashlib.sha256(f"placement:{seed}:{task}:{difficulty}".encode()).digest()
    return np.random.default_rng(int.from_bytes(key[:8], "big"))


def balanced(n: int, k: int, rng: np.random.Generator) -> list[int]:
    """``n`` positions, each of the ``k`` ``n // k`` times plus distinct random ones, shuffled."""
    seq = np.concatenate([np.tile(np.arange(k), n // k), rng.choice(k, n % k, replace=False)])
    return [int(x) for x in rng.permutation(seq)]


class Placement:
    """Gold positions for every (landmark, slot, task) of a run, from each landmark's slots."""

    def __init__(self, seed: int, slots: list[list[str]], choices: Callable[[str, str], int]) -> None:
        """``slots[i]``: the difficulties of landmark ``i``'s slots, in slot order;
        ``choices(task, difficulty)``: how many options such a row has."""
        ordinal: dict[tuple[int, int], int] = {}
        sizes: Counter[str] = Counter()
        for i, difficulties in enumerate(slots):
            for s, difficulty in enumerate(difficulties):
                ordinal[(i, s)] = sizes[difficulty]
                sizes[difficulty] += 1
        self._slots = slots
        self._ordinal = ordinal
        self._positions: dict[tuple[str, str], list[int]] = {
            (task, d): balanced(n, choices(task, d), _rng(seed, task, d))
            for task in IMAGE_TASKS
            for d, n in sizes.items()
        }

    def position(self, landmark: int, slot: int, task: str) -> int:
        difficulty = self._slots[landmark][slot]
        return self._positions[(task, difficulty)][self._ordinal[(landmark, slot)]]


class LabelBalance:
    """Gold-label counts per (task, difficulty) over the rows planned so far."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._counts: Counter[tuple[str, str, str]] = Counter()

    def order(self, task: str, difficulty: str, labels: list[str], salt: str) -> list[str]:
        """``labels`` least used first; ties in a seeded order that ``salt`` (the row) varies."""

        def key(lab: str) -> bytes:
            return hashlib.sha256(f"{self._seed}:{salt}:{lab}".encode()).digest()

        return sorted(labels, key=lambda lab: (self._counts[(task, difficulty, lab)], key(lab)))

    def take(self, task: str, difficulty: str, label: str) -> None:
        self._counts[(task, difficulty, label)] += 1
