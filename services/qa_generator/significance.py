"""The tests the blind gate runs, and how their errors are controlled over a release.

Each gated unit of the release (a task, or a family's pooled rows) runs several tests; its
p-value is the smallest of them times their number (Bonferroni within it, since one leaking
feature is enough to withhold it). Those p-values are then adjusted together with
Benjamini-Hochberg: a sound release (no leak anywhere) passes with probability at least
``1 - alpha``, and among what is withheld the expected share withheld wrongly is at most
``alpha``. A unit whose test could not see a leak of ``MIN_LEAK`` with ``POWER`` at the level
it would have to meet is *unverified*, never passed.

scipy.stats is imported where used: it holds about 70 MB the qa-generator does not need while
it waits for missions, and the gate runs once per release.
"""

from __future__ import annotations

from collections.abc import Sequence

POWER = 0.8
MIN_LEAK = 0.10


def upper(hits: int, n: int, chance: float) -> float:
    """P(X >= hits) for X ~ Binomial(n, chance): a solver scoring above chance."""
    from scipy.stats import binom

    return float(binom.sf(hits - 1, n, min(max(chance, 1e-9), 1 - 1e-9))) if n else 1.0


def lower(hits: int, n: int, chance: float) -> float:
    """P(X <= hits): a solver scoring below chance (avoiding its pick beats chance)."""
    from scipy.stats import binom

    return float(binom.cdf(hits, n, min(max(chance, 1e-9), 1 - 1e-9))) if n else 1.0


def wilson(hits: int, n: int) -> tuple[float, float]:
    if not n:
        return 0.0, 1.0
    from scipy.stats import binomtest

    ci = binomtest(hits, n).proportion_ci(0.95, method="wilson")
    return round(float(ci.low), 4), round(float(ci.high), 4)


def normal_upper(observed: float, mean: float, sd: float) -> float:
    from scipy.stats import norm

    return float(norm.sf((observed - mean) / sd)) if sd > 0 else float(observed <= mean)


def detectable(n: int, chance: float, level: float) -> float:
    """The smallest leak (accuracy above chance) a one-sided exact binomial test at ``level``
    detects with probability ``POWER`` over ``n`` rows; 1.0 when none can be."""
    if n <= 0 or chance >= 1:
        return 1.0
    from scipy.stats import binom

    critical = int(binom.isf(level, n, chance)) + 1  # the fewest hits significant at ``level``
    while critical > 0 and binom.sf(critical - 2, n, chance) <= level:
        critical -= 1
    if critical > n:
        return 1.0
    leak = 0.0
    while chance + leak < 1.0:
        if binom.sf(critical - 1, n, chance + leak) >= POWER:
            return round(leak, 3)
        leak += 0.005
    return 1.0


def weighted_chi2(observed: Sequence[float], expected: Sequence[float]) -> float:
    """Chi-square goodness of fit against expected counts (those under one are pooled, so the
    approximation holds); 1.0 when fewer than two cells remain."""
    from scipy.stats import chi2

    cells: list[tuple[float, float]] = []
    pooled_o = pooled_e = 0.0
    for o, e in zip(observed, expected, strict=True):
        if e < 1.0:
            pooled_o, pooled_e = pooled_o + o, pooled_e + e
        else:
            cells.append((o, e))
    if pooled_e >= 1.0:
        cells.append((pooled_o, pooled_e))
    elif cells and pooled_e > 0:  # too little to stand alone: add it to the smallest cell
        i = min(range(len(cells)), key=lambda j: cells[j][1])
        cells[i] = (cells[i][0] + pooled_o, cells[i][1] + pooled_e)
    if len(cells) < 2:
        return 1.0
    stat = sum((o - e) ** 2 / e for o, e in cells)
    return float(chi2.sf(stat, len(cells) - 1))


def bonferroni(ps: Sequence[float]) -> float:
    return min(1.0, min(ps) * len(ps)) if ps else 1.0


def benjamini_hochberg(p: dict[str, float]) -> dict[str, float]:
    """Step-up adjusted p-values: reject a key at level alpha when its value is <= alpha."""
    order = sorted(p, key=lambda k: (p[k], k))
    m = len(order)
    out: dict[str, float] = {}
    running = 1.0
    for i in range(m - 1, -1, -1):
        k = order[i]
        running = min(running, p[k] * m / (i + 1))
        out[k] = min(1.0, running)
    return out
