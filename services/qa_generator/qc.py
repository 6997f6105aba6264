"""Release-wide QC over every family's rows seen as :class:`~skyqa.families.Item`: answer-letter
balance per task and difficulty, and letter x difficulty independence (chi-square). Each
family checks its own rows' structure and answers (``TaskFamily.check``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from skyqa.families import Item


def _alphabets(items: list[Item]) -> dict[str, list[str]]:
    """Each family's letters: the option ids of its widest row, in order. A row's gold counts
    as the letter at its position among the row's own options (3-option rows have no D)."""
    out: dict[str, list[str]] = {}
    for it in items:
        if len(it.options) > len(out.get(it.family, [])):
            out[it.family] = [oid for oid, _ in it.options]
    return out


def _position(it: Item) -> int:
    (gold,) = it.gold  # Item.problem keeps malformed golds out of a release
    return [oid for oid, _ in it.options].index(gold)


def letter_balance(items: list[Item]) -> dict[str, dict[str, float]]:
    """Per task: gold-letter counts, chi-square uniformity p-values (pooled and per difficulty,
    ``<difficulty>_chi2_p``) and letter x difficulty independence (``difficulty_independence_p``).

    Pooling alone hides a letter that depends on the difficulty (4-way always A or C, 8-way
    always B or D is uniform in total); the per-difficulty tests and the independence test
    catch it. A difficulty's letters are those its rows offer (3-option rows have no D); the
    pooled test expects each difficulty's rows spread over its own letters, and independence
    is tested only when every difficulty offers the same letters.
    """
    # imported here, as in the blind gate: scipy.stats is about 70 MB resident for tests run
    # once per release
    from scipy.stats import chisquare

    rows = [it for it in items if it.kind == "choice"]
    alphabets = _alphabets(rows)
    out: dict[str, dict[str, float]] = {}
    for task in sorted({r.task for r in rows}):
        of_task = [r for r in rows if r.task == task]
        letters = alphabets[of_task[0].family]
        counts = Counter(letters[_position(r)] for r in of_task)
        report = {x: float(counts.get(x, 0)) for x in letters}
        expected = np.zeros(len(letters))
        table, widths = [], set()
        for d in sorted({r.difficulty for r in of_task}):
            of_d = [r for r in of_task if r.difficulty == d]
            k = max(len(r.options) for r in of_d)
            widths.add(k)
            by_d = Counter(letters[_position(r)] for r in of_d)
            table.append([by_d.get(x, 0) for x in letters[:k]])
            expected[:k] += len(of_d) / k
            report[f"{d}_chi2_p"] = _uniform_p(table[-1])
        used = expected > 0
        observed = [counts.get(x, 0) for x in letters]
        report["chi2_p"] = (
            round(float(chisquare(np.array(observed)[used], expected[used]).pvalue), 4)
            if len(of_task) >= used.sum()
            else 1.0
        )
        report["difficulty_independence_p"] = _independence_p(table) if len(widths) == 1 else 1.0
        out[task] = report
    return out


def _uniform_p(observed: list[int]) -> float:
    from scipy.stats import chisquare

    return round(float(chisquare(observed).pvalue), 4) if sum(observed) >= len(observed) else 1.0


def _independence_p(table: list[list[int]]) -> float:
    """Chi-square test of independence over the letters any row uses; 1.0 with one difficulty."""
    used = [j for j in range(len(table[0])) if any(row[j] for row in table)]
    if len(table) < 2 or len(used) < 2:
        return 1.0
    from scipy.stats import chi2_contingency

    return round(float(chi2_contingency([[row[j] for j in used] for row in table]).pvalue), 6)
