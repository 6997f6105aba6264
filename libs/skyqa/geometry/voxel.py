"""Voxel-hash fusion with majority-vote labels (numpy ``unique`` + ``bincount``).

Measured faster than Open3D's ``voxel_down_sample`` on surface clouds (see
shared/reference/simulator-and-performance.md 4.2), and it keeps labels, which Open3D drops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass
class Fused:
    points: NDArray[np.float32]  # (M, 3) voxel centroids
    semantic: NDArray[np.uint16]  # (M,) majority label
    instance: NDArray[np.uint32]  # (M,)
    observed: NDArray[np.uint32]  # (M,) raw points merged into the voxel


def voxel_keys(points: NDArray[np.floating], voxel: float) -> NDArray[np.int64]:
    """Pack integer voxel coordinates (21 bits each, about +-1e6 voxels) into one int64."""
    idx = np.floor(np.asarray(points, dtype=np.float64) / voxel).astype(np.int64) + (1 << 20)
    if idx.min(initial=0) < 0 or idx.max(initial=0) >= (1 << 21):
        raise ValueError(f"cloud extent too large for voxel size {voxel} m")
    return (idx[:, 0] << 42) | (idx[:, 1] << 21) | idx[:, 2]


def _majority(inv: NDArray[np.int64], labels: NDArray[np.uint64], n: int) -> NDArray[np.uint64]:
    """Most frequent label per voxel; ties go to the smallest label so results are deterministic."""
    order = np.lexsort((labels, inv))
    inv_s, lab_s = inv[order], labels[order]
    change = np.empty(len(order), dtype=bool)
    change[0] = True
    change[1:] = (inv_s[1:] != inv_s[:-1]) | (lab_s[1:] != lab_s[:-1])
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, len(order)))
    pair_vox, pair_lab = inv_s[starts], lab_s[starts]
    o2 = np.lexsort((pair_lab, -counts, pair_vox))
    first = np.empty(len(o2), dtype=bool)
    first[0] = True
    first[1:] = pair_vox[o2][1:] != pair_vox[o2][:-1]
    best = o2[first]
    out = np.zeros(n, dtype=np.uint64)
    out[pair_vox[best]] = pair_lab[best]
    return out


def voxel_fuse(
    points: NDArray[np.floating],
    semantic: NDArray[np.integer],
    instance: NDArray[np.integer],
    voxel: float,
) -> Fused:
    """Merge points falling in the same voxel: centroid position, majority (class, instance)."""
    if voxel <= 0:
        raise ValueError("voxel size must be positive")
    if len(points) == 0:
        return Fused(
            np.zeros((0, 3), np.float32),
            np.zeros(0, np.uint16),
            np.zeros(0, np.uint32),
            np.zeros(0, np.uint32),
        )
    keys = voxel_keys(points, voxel)
    uniq, inv = np.unique(keys, return_inverse=True)
    inv = inv.astype(np.int64)
    n = len(uniq)
    counts = np.bincount(inv, minlength=n)
    pts = np.asarray(points, dtype=np.float64)
    sums = np.stack([np.bincount(inv, weights=pts[:, i], minlength=n) for i in range(3)], axis=1)
    centroid = sums.astype(np.float64) / counts[:, None]
    label = (np.asarray(semantic, dtype=np.uint64) << np.uint64(32)) | np.asarray(instance, dtype=np.uint64)
    best = _majority(inv, label, n)
    return Fused(
        centroid.astype(np.float32),
        (best >> np.uint64(32)).astype(np.uint16),
        (best & np.uint64(0xFFFFFFFF)).astype(np.uint32),
        counts.astype(np.uint32),
    )


def coverage_ratio(points: NDArray[np.floating], grid: float) -> float:
    """Occupied XY cells over the cells of the cloud's XY bounding box (UAV-DualCog's metric)."""
    if len(points) == 0:
        return 0.0
    xy = np.floor(np.asarray(points, dtype=np.float64)[:, :2] / grid).astype(np.int64)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    total = int(np.prod(hi - lo + 1))
    occupied = len(np.unique((xy[:, 0] - lo[0]) * (hi[1] - lo[1] + 1) + (xy[:, 1] - lo[1])))
    return occupied / total
