"""Option sets that do not point at their gold (skyqa.families.options): over many seeded
draws, the set says nothing about which member is the gold beyond how often each value is
asked, and the wording check never looks at the gold."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from skyqa.families import options

pytestmark = pytest.mark.unit


def test_a_window_puts_the_gold_at_every_rank_equally_often() -> None:
    """Golds uniform over [lo, hi]: given the window, and over all windows, each rank is the
    gold's a quarter of the time (a gold near an end is asked less, never placed elsewhere)."""
    rng = np.random.default_rng(0)
    by_window: dict[tuple[int, ...], Counter[int]] = {}
    ranks: Counter[int] = Counter()
    for _ in range(40_000):
        gold = int(rng.integers(1, 9))
        values = options.window(gold, 4, rng, lo=1, hi=8)
        if values is not None:
            assert values == sorted(values) and gold in values and values[0] >= 1 and values[-1] <= 8
            by_window.setdefault(tuple(values), Counter())[values.index(gold)] += 1
            ranks[values.index(gold)] += 1
    n = sum(ranks.values())
    assert all(abs(c / n - 0.25) < 0.015 for c in ranks.values()), ranks
    for window, at in by_window.items():
        m = sum(at.values())
        assert set(at) == {0, 1, 2, 3} and all(abs(c / m - 0.25) < 0.04 for c in at.values()), (window, at)


def test_a_window_without_its_ceiling_puts_the_gold_low() -> None:
    """The same golds with windows free to reach past 8: values above it are offered and never
    the gold, so the smallest option is the gold more often than a quarter (what `hi` is for)."""
    rng = np.random.default_rng(0)
    ranks: Counter[int] = Counter()
    for _ in range(40_000):
        gold = int(rng.integers(1, 9))
        values = options.window(gold, 4, rng, lo=1, hi=None)
        if values is not None:
            ranks[values.index(gold)] += 1
    assert ranks[0] / sum(ranks.values()) > 0.3


def test_pool_distractors_leave_every_member_equally_likely_to_be_the_gold() -> None:
    rng = np.random.default_rng(1)
    pool = [f"{r} {c}" for r in ("top", "middle", "bottom") for c in ("left", "centre", "right")]
    seen: dict[frozenset[str], Counter[str]] = {}
    for _ in range(60_000):
        gold = pool[int(rng.integers(9))]
        picked = options.from_pool(gold, pool, 3, rng)
        assert picked is not None and picked[0] == gold and len(set(picked)) == 3
        seen.setdefault(frozenset(picked), Counter())[gold] += 1
    for members, golds in seen.items():
        n = sum(golds.values())
        assert set(golds) == set(members)
        assert all(abs(c / n - 1 / 3) < 0.08 for c in golds.values())


def test_a_gold_outside_the_pool_is_not_asked() -> None:
    assert options.from_pool("a", ["b", "c", "d"], 3, np.random.default_rng(0)) is None


def test_exchangeable_draws_keep_each_set_as_likely_whoever_is_the_gold() -> None:
    """Neighbourhood sets (2x2 blocks of a 3x3 grid): drawn plainly, a corner's only block
    points at the corner 4x as often as at the centre; kept with the exchangeable rule, every
    member of a block is its gold equally often."""
    cells = [(r, c) for r in range(3) for c in range(3)]
    blocks = [[(r, c), (r, c + 1), (r + 1, c), (r + 1, c + 1)] for r in range(2) for c in range(2)]

    def holding(x: tuple[int, int]) -> list[list[tuple[int, int]]]:
        return [b for b in blocks if x in b]

    rng = np.random.default_rng(2)
    golds: dict[tuple[tuple[int, int], ...], Counter[tuple[int, int]]] = {}
    for _ in range(80_000):
        gold = cells[int(rng.integers(9))]
        picked = options.exchangeable(gold, holding, 4, rng)
        if picked is not None:
            golds.setdefault(tuple(sorted(picked)), Counter())[gold] += 1
    for block, counts in golds.items():
        n = sum(counts.values())
        assert all(abs(c / n - 0.25) < 0.03 for c in counts.values()), (block, counts)


def test_singled_out_names_the_feature_and_never_reads_the_gold() -> None:
    q = "Why did you turn left at the gray billboard?"
    assert "starts with" in (
        options.singled_out(q, ["it had arrived", "to avoid it", "to see it", "to pass it"]) or ""
    )
    assert "longer" in (
        options.singled_out(
            "What next?", ["fly up", "go on", "turn back", "circle the tall mast twice and land on the roof"]
        )
        or ""
    )
    assert "repeats words" in (
        options.singled_out(q, ["a gray billboard", "a red tower", "a blue tank", "a white mast"]) or ""
    )
    assert "every option but one" in (
        options.singled_out(
            q, ["near the billboard", "past the billboard", "over the billboard", "by a red water tower"]
        )
        or ""
    )
    assert options.singled_out(q, ["a red tower", "a blue tank", "a white mast", "a green kiosk"]) is None
    # numbers and single words are compared by form only
    assert options.singled_out("How many cars?", ["3", "4", "5", "12"]) is None


def test_lettered_puts_the_gold_at_its_slot() -> None:
    rng = np.random.default_rng(3)
    for slot in range(6):
        opts, letter = options.lettered(["gold", "a", "b", "c"], slot, "ABCD", rng)
        assert letter == "ABCD"[slot % 4] and next(o.label for o in opts if o.option_id == letter) == "gold"
