"""Option sets that do not point at their gold (skyqa.families.options): over many seeded
draws, the set says nothing about which member is the gold beyond how often each value is
asked, and the wording check never looks at the gold."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from skyqa.families import options

pytestmark = pytest.mark.unit


def test_a_window_puts_the_gold_at_every_rank_equally_often_given_the_window() -> None:
    rng = np.random.default_rng(0)
    by_window: dict[tuple[int, ...], Counter[int]] = {}
    for _ in range(40_000):
        gold = int(rng.integers(0, 8))  # counts near zero included
        values = options.window(gold, 4, rng, lo=0)
        if values is not None:
            assert values == sorted(values) and gold in values and values[0] >= 0
            by_window.setdefault(tuple(values), Counter())[values.index(gold)] += 1
    # {0,1,2,3} arises from golds 0..3 alike: a gold near zero is asked less, never placed lower
    for window, ranks in by_window.items():
        if window[-1] > 7:
            continue  # the golds drawn stop at 7: a window past it cannot hold its top value
        n = sum(ranks.values())
        assert set(ranks) == {0, 1, 2, 3}, window
        assert all(abs(c / n - 0.25) < 0.04 for c in ranks.values()), (window, ranks)


def test_the_old_window_gold_minus_one_to_plus_two_fails_the_same_check() -> None:
    """The check above catches the generator issue #42 found: gold-1 .. gold+2."""
    ranks = Counter([1] * 100)  # the gold is always the second-smallest
    assert set(ranks) != {0, 1, 2, 3}


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
