"""Option sets that do not point at their gold: the draws every choice family builds its
distractors with, and the gold-blind check of what an option set shows.

A text-only solver reads the option set, never the pixels. It learns nothing about the gold from
the set when the set is *exchangeable*: drawn with the same probability whichever of its
members were the gold. Then, given the set, every member is the gold with the probability its
label has in the task (the label prior the blind gate tests), and no structure (the rank among
numbers, the cell all others neighbour, the odd one out in form) singles the gold out.

- :func:`exchangeable` draws any family of candidate sets that way: one of the sets holding the
  gold, uniformly, kept with a probability that makes every set equally likely for each of its
  members (a gold that few sets hold is asked less often, never placed differently).
- :func:`window` is the numeric case: ``k`` consecutive values with the gold at a uniformly drawn
  rank (never "gold-1 … gold+2", where the second-smallest is always right).
- :func:`from_pool` draws distractors uniformly from a pool that does not depend on the gold
  (never the gold's neighbours, which the gold is the one option adjacent to all of).
- :func:`singled_out` is the net for wording: a feature (first word, length, words shared with
  the question) on which one option stands apart from all others. It never reads which option is
  the gold, so skipping the sets it flags keeps every gold's place as random as it was; a check
  that skipped only sets whose *gold* stands apart would teach "avoid the odd one out".
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

from skyqa.contracts.qa import Option

T = TypeVar("T", bound=Hashable)
WORD = re.compile(r"[a-z0-9]+")
# words that carry no content: shared by a question and its options without saying anything
_STOP_WORDS = (
    "a an the of to in on at by for from with and or is are was were be been it its this that "
    "these those which what who whom where when why how do does did has have had can could "
    "should would will than then as into onto over under about your you their there here not no yes"
)
STOP = frozenset(_STOP_WORDS.split())
LONG = 1.5  # an option this many times longer than every other stands out (and its inverse)


def exchangeable(
    gold: T, sets: Callable[[T], Sequence[Sequence[T]]], most: int, rng: np.random.Generator
) -> list[T] | None:
    """One of ``sets(gold)`` (each holding the gold) drawn uniformly, and kept with probability
    ``len(sets(gold)) / most``; None: the question is not asked with this gold.

    ``sets(x)`` must list, for any value ``x``, every candidate set holding ``x`` (the same set
    under each of its members), and ``most`` bound their number. Every candidate set is then
    drawn with probability ``1 / most`` whichever member is the gold.
    """
    mine = list(sets(gold))
    if not mine:
        return None
    if len(mine) > most:
        raise ValueError(f"{len(mine)} candidate sets hold {gold!r}, more than the bound {most}")
    keep = rng.random() < len(mine) / most
    pick = mine[int(rng.integers(len(mine)))]
    if gold not in pick:
        raise ValueError(f"a candidate set for {gold!r} does not hold it: {pick!r}")
    return list(pick) if keep else None


def window(
    gold: int, k: int, rng: np.random.Generator, *, lo: int, hi: int | None, step: int = 1
) -> list[int] | None:
    """``k`` values ``step`` apart holding ``gold`` at a uniformly drawn rank, all within
    ``[lo, hi]``, ascending; None when the drawn window leaves the range (a gold near an end is
    asked less often, so that given the window every rank is equally likely).

    Given the window, each member is the gold as often as golds of its value are asked: the
    rank says nothing only where the golds are about uniform over ``[lo, hi]``. So ``hi`` is
    the largest gold the task can ask (a window reaching past it offers values that are never
    the gold, which puts the gold low); None only where one value is shown (a claim to judge),
    never as options."""

    def windows(x: int) -> list[list[int]]:
        out = []
        for r in range(k):
            values = [x + (i - r) * step for i in range(k)]
            if values[0] >= lo and (hi is None or values[-1] <= hi):
                out.append(values)
        return out

    return exchangeable(gold, windows, k, rng)


def from_pool(gold: T, pool: Sequence[T], k: int, rng: np.random.Generator) -> list[T] | None:
    """The gold and ``k - 1`` others drawn uniformly from ``pool`` (which must not be chosen by
    the gold: the same pool whichever of its members is asked), gold first; None when the pool
    has fewer than ``k - 1`` others, or lacks the gold (which would be the one member from
    outside it)."""
    others = [x for x in dict.fromkeys(pool) if x != gold]
    if gold not in pool or len(others) < k - 1:
        return None
    picked = rng.choice(len(others), size=k - 1, replace=False)
    return [gold, *(others[int(i)] for i in picked)]


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def content(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOP}


def singled_out(question: str, labels: Sequence[str]) -> str | None:
    """The feature on which exactly one of three or more options stands apart from all the
    others, or None: a different first word (form: "it had …" among "to …"), a length more than
    ``LONG`` times every other's (or less than its inverse), or being the only option that
    shares (or the only one that does not share) a content word with the question. Lengths
    are compared only where every label has two words or more (numbers, single words)."""
    if len(labels) < 3:
        return None
    toks = [words(lab) for lab in labels]
    firsts = Counter(t[0] if t else "" for t in toks)
    if len(firsts) == 2 and min(firsts.values()) == 1:
        odd = min(firsts, key=lambda w: firsts[w])
        return f"one option starts with {odd!r}, the others do not"
    if all(len(t) >= 2 for t in toks):
        sizes = sorted(len(lab) for lab in labels)
        if sizes[-1] > LONG * sizes[-2]:
            return "one option is much longer than the others"
        if sizes[0] * LONG < sizes[1]:
            return "one option is much shorter than the others"
    common = set.intersection(*[content(lab) for lab in labels])
    asked = content(question) - common
    shares = [bool(content(lab) & asked) for lab in labels]
    if sum(shares) == 1:
        return "one option repeats words of the question, the others do not"
    if sum(shares) == len(shares) - 1:
        return "every option but one repeats words of the question"
    return None


def lettered(
    gold_first: Sequence[str], slot: int, letters: str, rng: np.random.Generator
) -> tuple[list[Option], str]:
    """The options on letters with the gold at ``slot`` (taken modulo their number) and the
    distractors in a random order around it; returns them and the gold's letter."""
    gold, rest = gold_first[0], list(gold_first[1:])
    others = [rest[int(i)] for i in rng.permutation(len(rest))]
    at = slot % len(gold_first)
    labels = [*others[:at], gold, *others[at:]]
    if len(labels) > len(letters):
        raise ValueError(f"{len(labels)} options but only the letters {letters!r}")
    return [Option(option_id=letters[i], label=lab) for i, lab in enumerate(labels)], letters[at]


__all__ = ["content", "exchangeable", "from_pool", "lettered", "singled_out", "window", "words"]
