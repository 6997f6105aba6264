"""How many visibility rows of each count a release keeps."""

from __future__ import annotations

import hashlib


def count_surplus(rows: list[tuple[str, str, int]]) -> list[str]:
    """Ids of visibility-count rows to leave out so no count is over-represented.

    ``rows`` are (sample id, mission kind, visible count). The planner spreads counts with an
    occlusion-free estimate, yet what renders still clusters (short atomic missions are in view
    once whatever the camera does), and a blind "most frequent count" then beats chance. Per
    mission kind, each count keeps at most ceil(n / k) rows for n rows and k distinct counts;
    which ones is decided by a hash of the sample id, so it is stable across refreshes.
    """
    by_kind: dict[str, dict[int, list[str]]] = {}
    for sample_id, kind, count in rows:
        by_kind.setdefault(kind, {}).setdefault(count, []).append(sample_id)
    out: list[str] = []
    for counts in by_kind.values():
        n = sum(len(ids) for ids in counts.values())
        cap = -(-n // len(counts))
        for ids in counts.values():
            ranked = sorted(ids, key=lambda s: hashlib.sha256(f"count:{s}".encode()).hexdigest())
            out += ranked[cap:]
    return sorted(out)
