"""Candidate aggregation from the fused cloud (UAV-DualCog ``collect_instances``).

UAV-DualCog keeps every candidate; with a cap (``max_instances``) the most observed ones would
all be the largest buildings, and a benchmark whose landmarks are all buildings asks one kind
of question. The cap therefore takes candidates round-robin over categories (the segmentation
class's category; an unknown class is its own), and within a category spreads over sizes:
the largest, then the median, then the quartiles, and so on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from skyqa.contracts import InstanceTable
from skyqa.geometry import oriented_extent, pca_yaw_deg
from skyqa.sim.classes import BY_NAME

from services.landmark.config import CollectConfig


@dataclass
class Candidate:
    key: str  # "<class_id>_<instance_numeric_id>"
    class_id: int
    class_name: str
    instance_numeric_id: int
    points: NDArray[np.float64]
    center: NDArray[np.float64]
    aabb_min: NDArray[np.float64]
    aabb_max: NDArray[np.float64]
    yaw_deg: float
    # length and width along and across yaw, and height above the local ground (the points
    # start above the ground cut, so their own height is short by it)
    extent: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def size(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.aabb_max - self.aabb_min
        return out


@dataclass
class Collected:
    candidates: list[Candidate]
    input_points: int
    valid_points: int
    candidate_pairs: int
    dropped_small_instances: int


def collect(cloud: NDArray[np.void], table: InstanceTable, cfg: CollectConfig) -> Collected:
    xyz = np.stack([cloud["x"], cloud["y"], cloud["z"]], -1).astype(np.float64)
    cls = cloud["class_id"].astype(np.int64)
    inst = cloud["instance_id"].astype(np.int64)
    keep = ~np.isin(cls, cfg.exclude_class_ids) & (inst > 0)
    ground = None
    if len(xyz):
        ground = float(np.percentile(xyz[:, 2], cfg.ground_percentile))
        keep &= xyz[:, 2] > ground + cfg.ground_margin_m
    names = {c.class_id: c.name for c in table.classes}
    pairs = np.unique(np.stack([cls[keep], inst[keep]], -1), axis=0) if keep.any() else np.zeros((0, 2), int)
    out: list[Candidate] = []
    dropped = 0
    for class_id, iid in pairs:
        sel = keep & (cls == class_id) & (inst == iid)
        pts = xyz[sel]
        if len(pts) < cfg.min_points:
            dropped += 1
            continue
        yaw = pca_yaw_deg(pts[:, :2])
        length, width, height = oriented_extent(pts, yaw)
        if ground is not None:
            height = max(height, float(pts[:, 2].max()) - ground)
        out.append(
            Candidate(
                key=f"{int(class_id)}_{int(iid)}",
                class_id=int(class_id),
                class_name=names.get(int(class_id), ""),
                instance_numeric_id=int(iid),
                points=pts,
                center=pts.mean(axis=0),
                aabb_min=pts.min(axis=0),
                aabb_max=pts.max(axis=0),
                yaw_deg=yaw,
                extent=(length, width, height),
            )
        )
    # most observed first, ties by key, so the order (and the cap) is deterministic
    out.sort(key=lambda c: (-len(c.points), c.key))
    if cfg.max_instances > 0:
        out = stratified(out, cfg.max_instances)
    return Collected(out, len(xyz), int(keep.sum()), len(pairs), dropped)


def spread_order(n: int) -> list[int]:
    """0, n/2, n/4, 3n/4, ...: indices that cover a sorted list evenly at every prefix."""
    order: list[int] = []
    step = 1.0
    while len(order) < n:
        for k in range(int(1 / step) + 1):
            i = min(n - 1, int(k * step * n))
            if i not in order and k * step < 1.0:
                order.append(i)
        step /= 2
    return order[:n]


def stratified(ranked: list[Candidate], limit: int) -> list[Candidate]:
    """``limit`` candidates round-robin over categories, each category spread over its sizes;
    ``ranked`` is most observed first, and categories take turns in that order."""
    groups: dict[str, list[Candidate]] = {}
    for c in ranked:
        sem = BY_NAME.get(c.class_name)
        groups.setdefault(sem.category if sem else c.class_name, []).append(c)
    queues = [[g[i] for i in spread_order(len(g))] for g in groups.values()]
    out: list[Candidate] = []
    while len(out) < limit and any(queues):
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0))
    return out
