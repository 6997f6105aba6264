"""Which visibility rows a release keeps, so that no count is more likely than another, while a
landmark's rows stay or go together."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter, deque

OUTSIDE = "visible count not shown by every mission kind"
SURPLUS = "visible count over-represented"
ONE_COUNT = "one visible count shown by every mission kind: the answer is known without looking"

Row = tuple[str, str, str, int]  # (sample id, landmark, mission kind, visible count)


def count_surplus(rows: list[Row]) -> dict[str, str]:
    """Ids of visibility-count rows to leave out, with the reason, so that per mission kind
    every count is as frequent as every other, over one count space shared by the kinds.

    What renders clusters (a short atomic mission tracking its landmark is in view once,
    whatever the landmark), so a blind "most frequent count" (per mission kind, which the row
    states) or the median beats one over the number of counts. Kept: counts every mission kind
    shows, each as often as every other in a kind; a count only one kind shows could be ruled
    out for the other. When the kinds share one count only, nothing is kept: every row would
    have the same answer. Which rows of a count are kept is decided by a hash, so it is stable
    across refreshes.

    A landmark's rows stay or go together. When every landmark has one row (a landmark of one
    mission), each kind keeps as many rows of a count as its rarest shared count has. When every
    landmark has one row of each of two kinds (UAV-DualCog: an atomic and a composite mission),
    both kinds keep ``k`` rows of each count of a space ``S``, and ``S`` and ``k`` are those that
    keep the most landmarks (then the most counts): a transportation problem between the two
    kinds' counts, solved by max flow.
    """
    units: dict[str, list[tuple[str, str, int]]] = {}
    for sample_id, unit, kind, count in rows:
        units.setdefault(unit, []).append((sample_id, kind, count))
    kinds = sorted({kind for _, _, kind, _ in rows})
    by_kind = [{c for _, _, k, c in rows if k == kind} for kind in kinds]
    shared = set.intersection(*by_kind) if by_kind else set()
    if len(shared) <= 1:
        return {s: ONE_COUNT if c in shared else OUTSIDE for s, _, _, c in sorted(rows)}
    if all(len(members) == 1 for members in units.values()):
        kept = _single(rows, shared)
    elif len(kinds) == 2 and all(sorted(k for _, k, _ in m) == kinds for m in units.values()):
        kept = _paired(units, kinds, shared)
    else:
        raise ValueError("each landmark needs one visibility row, or one of each of two mission kinds")
    space = {c for u in kept for _, _, c in units[u]}
    out = {}
    for unit, members in units.items():
        if unit not in kept:
            for sample_id, _, count in members:
                out[sample_id] = SURPLUS if count in space else OUTSIDE
    return dict(sorted(out.items()))


def _rank(key: str) -> str:
    return hashlib.sha256(f"count:{key}".encode()).hexdigest()


def _single(rows: list[Row], shared: set[int]) -> set[str]:
    """Landmarks of one row: per kind, as many of each shared count as its rarest has."""
    kept: set[str] = set()
    for kind in sorted({k for _, _, k, _ in rows}):
        mine = [(s, u, c) for s, u, k, c in rows if k == kind and c in shared]
        cap = min(Counter(c for _, _, c in mine).values())
        for count in shared:
            ranked = sorted((u for s, u, c in mine if c == count), key=lambda u: _rank(u))
            kept.update(ranked[:cap])
    return kept


def _paired(units: dict[str, list[tuple[str, str, int]]], kinds: list[str], shared: set[int]) -> set[str]:
    """Landmarks of one row of each of two kinds: the count space and the per-count number that
    keep the most landmarks, the landmarks of each count pair taken by hash."""
    pairs: dict[tuple[int, int], list[str]] = {}
    for unit, members in units.items():
        count = {k: c for _, k, c in members}
        pairs.setdefault((count[kinds[0]], count[kinds[1]]), []).append(unit)
    best: tuple[int, int, dict[tuple[int, int], int]] = (0, 0, {})
    counts = sorted(shared)
    for size in range(len(counts), 1, -1):
        for space in itertools.combinations(counts, size):
            top = min(
                min(sum(len(v) for (a, _), v in pairs.items() if a == x) for x in space),
                min(sum(len(v) for (_, b), v in pairs.items() if b == x) for x in space),
            )
            for k in range(top, 0, -1):
                if k * size < best[0]:
                    break
                flow = _transport(pairs, space, k)
                if flow is not None:
                    if (k * size, size) > best[:2]:
                        best = (k * size, size, flow)
                    break
    kept: set[str] = set()
    for pair, n in best[2].items():
        kept.update(sorted(pairs[pair], key=_rank)[:n])
    return kept


def _transport(
    pairs: dict[tuple[int, int], list[str]], space: tuple[int, ...], k: int
) -> dict[tuple[int, int], int] | None:
    """How many landmarks of each (first kind's count, second kind's count) pair to keep so that
    each kind shows every count of ``space`` exactly ``k`` times, or None when none does."""
    cap: dict[tuple[str, str], int] = {}
    for x in space:
        cap[("src", f"a{x}")] = k
        cap[(f"b{x}", "snk")] = k
    for (a, b), members in pairs.items():
        if a in space and b in space:
            cap[(f"a{a}", f"b{b}")] = len(members)
    nodes = {n for edge in cap for n in edge}
    flow = dict.fromkeys(cap, 0)
    total = 0
    while True:
        parent: dict[str, tuple[str, str, int]] = {}  # node -> (from, to, +1 forward / -1 back)
        queue = deque(["src"])
        seen = {"src"}
        while queue and "snk" not in seen:
            u = queue.popleft()
            for v in sorted(nodes - seen):
                if cap.get((u, v), 0) - flow.get((u, v), 0) > 0:
                    parent[v] = (u, v, 1)
                elif flow.get((v, u), 0) > 0:
                    parent[v] = (v, u, -1)
                else:
                    continue
                seen.add(v)
                queue.append(v)
        if "snk" not in seen:
            break
        node = "snk"
        while node != "src":
            tail, head, sign = parent[node]
            flow[(tail, head)] += sign
            node = tail if sign == 1 else head
        total += 1
    if total != k * len(space):
        return None
    return {(int(a[1:]), int(b[1:])): f for (a, b), f in flow.items() if a != "src" and b != "snk" and f}
