"""Candidate aggregation from the fused cloud (UAV-DualCog ``collect_instances``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from skyqa.contracts import InstanceTable
from skyqa.geometry import pca_yaw_deg

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
    if len(xyz):
        ground = float(np.percentile(xyz[:, 2], cfg.ground_percentile)) + cfg.ground_margin_m
        keep &= xyz[:, 2] > ground
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
                yaw_deg=pca_yaw_deg(pts[:, :2]),
            )
        )
    # most observed first, ties by key, so the order (and the cap) is deterministic
    out.sort(key=lambda c: (-len(c.points), c.key))
    if cfg.max_instances > 0:
        out = out[: cfg.max_instances]
    return Collected(out, len(xyz), int(keep.sum()), len(pairs), dropped)
