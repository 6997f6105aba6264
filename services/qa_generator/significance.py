"""The tests the blind gate runs, and how their errors are controlled over a release.

Each gated unit of the release (a task, or a family's pooled rows) runs several tests; its
p-value is the smallest of them times their number (Bonferroni within it, since one leaking
feature is enough to withhold it). Those p-values are then adjusted together with
Benjamini-Hochberg (:mod:`services.qa_generator.gate` says in which stages): a sound release (no
leak anywhere) withholds nothing with probability at least ``1 - alpha``, and among what is
withheld the expected share withheld wrongly is at most ``alpha``. A unit whose test could not
see a leak of ``MIN_LEAK`` with ``POWER`` at the level it would have to meet is *unverified*,
never passed.

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


def offered_chi2(rows: Sequence[tuple[Sequence[str], str]]) -> float:
    """Are the golds spread over what the rows offer? Each row offers some cells (labels, or
    letters) and its gold is, under no leak, any of them with equal chance. The observed gold
    counts are compared with their expectation by the quadratic form in the inverse of their
    covariance (each row a multinomial draw of one), chi-square with its rank as the degrees of
    freedom; cells expected less than once are pooled into one (which stands alone once it is
    expected once, else joins the smallest cell). Pearson's statistic ignores that each row
    offers only some cells and under-rejects several-fold. 1.0 when fewer than two cells."""
    import numpy as np
    from scipy.stats import chi2

    expected: dict[str, float] = {}
    for offered, _ in rows:
        for cell in offered:
            expected[cell] = expected.get(cell, 0.0) + 1 / len(offered)
    big = sorted(c for c, e in expected.items() if e >= 1.0)
    rest = sum(e for c, e in expected.items() if e < 1.0)
    if rest >= 1.0:
        index = {c: i for i, c in enumerate(big)} | {c: len(big) for c in expected if expected[c] < 1.0}
        size = len(big) + 1
    else:
        smallest = min(big, key=lambda c: expected[c]) if big else None
        index = {c: i for i, c in enumerate(big)}
        index |= {c: index[smallest] for c in expected if expected[c] < 1.0 and smallest is not None}
        size = len(big)
    if size < 2:
        return 1.0
    observed, mean, cov = np.zeros(size), np.zeros(size), np.zeros((size, size))
    for offered, gold in rows:
        share = np.zeros(size)
        for cell in offered:
            share[index[cell]] += 1 / len(offered)
        mean += share
        cov += np.diag(share) - np.outer(share, share)
        observed[index[gold]] += 1
    gap = observed - mean
    rank = int(np.linalg.matrix_rank(cov, tol=1e-9))
    if rank < 1:
        return 1.0
    stat = float(gap @ np.linalg.pinv(cov, rcond=1e-9, hermitian=True) @ gap)
    return float(chi2.sf(stat, rank))


def hits_upper(draws: Sequence[tuple[int, int, int]], hits: int) -> float:
    """P(S >= hits) for S the golds caught by random picks: each row picks ``k`` of its ``n``
    options, ``g`` of them golds (a hypergeometric count); rows independent. Exact, by
    convolving the rows' distributions."""
    import numpy as np
    from scipy.stats import hypergeom

    total = np.ones(1)
    for n, g, k in draws:
        top = min(g, k)
        total = np.convolve(total, hypergeom.pmf(np.arange(top + 1), n, g, k))
    return float(total[hits:].sum()) if hits < len(total) else 0.0


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
