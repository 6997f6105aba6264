"""Which visibility rows a release keeps, so that no count is more likely than another."""

from __future__ import annotations

import hashlib

OUTSIDE = "visible count not shown by every mission kind"
SURPLUS = "visible count over-represented"
ONE_COUNT = "one visible count shown by every mission kind: the answer is known without looking"


def count_surplus(rows: list[tuple[str, str, int]]) -> dict[str, str]:
    """Ids of visibility-count rows to leave out, with the reason, so that per mission kind
    every count is as frequent as every other, over one count space shared by the kinds.

    ``rows`` are (sample id, mission kind, visible count). What renders clusters (a short
    atomic mission tracking its landmark is in view once, whatever the landmark), so a blind
    "most frequent count" (per mission kind, which the row states) or the median beats one
    over the number of counts. Kept: the counts every mission kind shows, and of each such
    count in a kind as many rows as the kind's rarest count of them has; a count only one kind
    shows could be ruled out for the other. When the kinds share one count only, nothing is
    kept: every row would have the same answer. Which rows of a count are kept is decided by a hash
    of the sample id, so it is stable across refreshes.
    """
    by_kind: dict[str, dict[int, list[str]]] = {}
    for sample_id, kind, count in rows:
        by_kind.setdefault(kind, {}).setdefault(count, []).append(sample_id)
    shared = set.intersection(*(set(counts) for counts in by_kind.values())) if by_kind else set()
    if len(shared) == 1:
        return {sample_id: ONE_COUNT for sample_id, _, count in sorted(rows) if count in shared} | {
            sample_id: OUTSIDE for sample_id, _, count in rows if count not in shared
        }
    out: dict[str, str] = {}
    for counts in by_kind.values():
        cap = min((len(counts[c]) for c in shared), default=0)
        for count, ids in counts.items():
            if count not in shared:
                out.update(dict.fromkeys(ids, OUTSIDE))
                continue
            ranked = sorted(ids, key=lambda s: hashlib.sha256(f"count:{s}".encode()).hexdigest())
            out.update(dict.fromkeys(ranked[cap:], SURPLUS))
    return dict(sorted(out.items()))
