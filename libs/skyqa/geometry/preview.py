"""Preview images of a labelled cloud: top-down and oblique, coloured by class, shaded by height."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from skyqa.media import encode_png
from skyqa.sim.camera import Intrinsics, Pose, look_at, project


def class_palette(class_ids: NDArray[np.integer]) -> NDArray[np.float32]:
    """A fixed, well-spread colour per class id (golden-ratio hue walk)."""
    ids = np.asarray(class_ids, dtype=np.float64)
    hue = np.mod(ids * 0.618033988749895, 1.0)
    h6 = hue * 6.0
    c = np.full_like(hue, 0.75)
    x = c * (1 - np.abs(np.mod(h6, 2) - 1))
    zero = np.zeros_like(hue)
    sector = np.floor(h6).astype(int) % 6
    table = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    rgb = np.zeros((len(ids), 3))
    for s, (r, g, b) in enumerate(table):
        m = sector == s
        rgb[m] = np.stack([r[m], g[m], b[m]], -1)
    rgb += 0.2
    rgb[ids == 0] = 0.55
    out: NDArray[np.float32] = rgb.astype(np.float32)
    return out


def _shade(points: NDArray[np.floating], class_ids: NDArray[np.integer]) -> NDArray[np.float32]:
    z = np.asarray(points)[:, 2]
    span = max(1e-6, float(np.percentile(z, 99) - np.percentile(z, 1)))
    light = 0.55 + 0.45 * np.clip((z - np.percentile(z, 1)) / span, 0, 1)
    out: NDArray[np.float32] = class_palette(class_ids) * light[:, None].astype(np.float32)
    return out


def _resolution(lo: Sequence[float], hi: Sequence[float], max_px: int) -> float:
    return max(max(float(hi[0]) - float(lo[0]), float(hi[1]) - float(lo[1])) / max_px, 1e-3)


def topdown_size(lo: Sequence[float], hi: Sequence[float], max_px: int = 1024) -> tuple[int, int]:
    """Width and height of the top-down preview of points spanning ``lo``..``hi`` (x, y)."""
    res = _resolution(lo, hi, max_px)
    return int((float(hi[0]) - float(lo[0])) / res) + 1, int((float(hi[1]) - float(lo[1])) / res) + 1


def topdown_pixels(
    xy: NDArray[np.floating], lo: Sequence[float], hi: Sequence[float], max_px: int = 1024
) -> NDArray[np.float64]:
    """World (x, y) to (column, row) of the top-down preview, north up; what draws a flown path
    over the preview lands where the preview drew the ground under it."""
    res = _resolution(lo, hi, max_px)
    _, h = topdown_size(lo, hi, max_px)
    p = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    return np.stack([(p[:, 0] - float(lo[0])) / res, h - 1 - (p[:, 1] - float(lo[1])) / res], axis=1)


def render_topdown(points: NDArray[np.floating], class_ids: NDArray[np.integer], max_px: int = 1024) -> bytes:
    """Orthographic view from above: the highest point of each cell wins."""
    p = np.asarray(points, dtype=np.float64)
    if len(p) == 0:
        return encode_png(np.zeros((8, 8, 3), np.uint8))
    lo, hi = p[:, :2].min(axis=0), p[:, :2].max(axis=0)
    w, h = topdown_size(lo, hi, max_px)
    px = topdown_pixels(p[:, :2], lo, hi, max_px)
    col, row = px[:, 0].astype(int), px[:, 1].astype(int)
    order = np.argsort(p[:, 2], kind="stable")  # higher points written last
    img = np.full((h, w, 3), 0.1, dtype=np.float32)
    img[row[order], col[order]] = _shade(p, class_ids)[order]
    return encode_png((np.clip(img, 0, 1) * 255).astype(np.uint8))


def render_oblique(
    points: NDArray[np.floating],
    class_ids: NDArray[np.integer],
    width: int = 1024,
    height: int = 768,
) -> bytes:
    """Perspective view from the south-west at 35 degrees down, with a z-buffer (nearest wins)."""
    p = np.asarray(points, dtype=np.float64)
    if len(p) == 0:
        return encode_png(np.zeros((8, 8, 3), np.uint8))
    lo, hi = p.min(axis=0), p.max(axis=0)
    center = (lo + hi) / 2
    radius = float(np.linalg.norm(hi - lo)) / 2
    eye = center + np.array([-0.6, -0.6, 0.55]) / np.linalg.norm([-0.6, -0.6, 0.55]) * radius * 1.9
    yaw, pitch = look_at(eye, center)
    k = Intrinsics.from_fov(width, height, 60.0)
    px, depth = project(p, Pose(float(eye[0]), float(eye[1]), float(eye[2]), yaw, pitch), k)
    ok = (depth > 0.1) & (px[:, 0] >= 0) & (px[:, 0] < width) & (px[:, 1] >= 0) & (px[:, 1] < height)
    colors = _shade(p, class_ids)[ok]
    cols, rows, d = px[ok, 0].astype(int), px[ok, 1].astype(int), depth[ok]
    # 2x2 splats close small gaps; all splats are depth-sorted together so near wins.
    offsets = ((0, 0), (0, 1), (1, 0), (1, 1))
    rr = np.concatenate([np.clip(rows + dr, 0, height - 1) for dr, _ in offsets])
    cc = np.concatenate([np.clip(cols + dc, 0, width - 1) for _, dc in offsets])
    dd = np.tile(d, len(offsets))
    order = np.argsort(-dd, kind="stable")
    img = np.full((height, width, 3), 0.1, dtype=np.float32)
    img[rr[order], cc[order]] = np.tile(colors, (len(offsets), 1))[order]
    return encode_png((np.clip(img, 0, 1) * 255).astype(np.uint8))
