"""Exact 2D boxes and pixel counts of every instance in a segmentation image."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class Box2D:
    """Pixel box ``[x0, x1) x [y0, y1)`` of one instance, with its visible pixel count."""

    instance_id: int
    class_id: int
    pixels: int
    x0: int
    y0: int
    x1: int
    y1: int

    @property
    def xyxy(self) -> list[int]:
        return [self.x0, self.y0, self.x1, self.y1]


def norm_xyxy(xyxy: Sequence[float], width: float, height: float) -> list[float]:
    """A pixel box as fractions of the image size, 4 decimals (the releases' ``*_norm`` boxes)."""
    x0, y0, x1, y1 = xyxy
    return [round(x0 / width, 4), round(y0 / height, 4), round(x1 / width, 4), round(y1 / height, 4)]


def instance_boxes(instance: NDArray[np.integer], semantic: NDArray[np.integer]) -> list[Box2D]:
    """One box per instance id > 0, sorted by id; vectorised with one sort and ``reduceat``."""
    w = instance.shape[1]
    flat = instance.ravel()
    pix = np.flatnonzero(flat)
    if pix.size == 0:
        return []
    ids = flat[pix]
    order = np.argsort(ids, kind="stable")
    ids, pix = ids[order], pix[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    rows, cols = np.divmod(pix, w)
    x0 = np.minimum.reduceat(cols, starts)
    x1 = np.maximum.reduceat(cols, starts) + 1
    y0 = np.minimum.reduceat(rows, starts)
    y1 = np.maximum.reduceat(rows, starts) + 1
    counts = np.diff(np.r_[starts, len(pix)])
    classes = semantic.ravel()[pix[starts]]
    return [
        Box2D(int(ids[s]), int(classes[i]), int(counts[i]), int(x0[i]), int(y0[i]), int(x1[i]), int(y1[i]))
        for i, s in enumerate(starts)
    ]
