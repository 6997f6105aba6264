"""The sun's shadow map of a static scene: one orthographic Embree cast along the sunlight.

Scene and sun do not move, so which surfaces the sun reaches belongs to the scene, not to the
view. Casting it once per simulator replaces one shadow ray per sunlit pixel (a third of each
frame's ray casting) with four texel reads per pixel: the shadow map of rasterising engines,
as one cascade of fixed texel size, filtered over 2x2 texels (percentage-closer filtering)
so shadow edges are smooth instead of stair-stepped.

The map stores, per texel of a plane perpendicular to the sun, the height along the sun axis
of the first surface the sunlight meets. A point is in shadow where that surface lies above it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import open3d as o3d
from numpy.typing import NDArray

TEXEL_M = 0.1  # finer than a pixel of a 1440-wide frame 100 m away
MAX_TEXELS = 16_000_000  # 64 MB; larger scenes get coarser texels
NORMAL_OFFSET_TEXELS = 1.5  # lifts the lookup off its own surface across the 2x2 filter
DEPTH_BIAS_TEXELS = 0.5
BLOCK_SHIFT = 5  # the kernels index blocks with shifts and masks
BLOCK = 1 << BLOCK_SHIFT  # texels per side of a map block: 32x32 float32, one 4 KB page
_BAND = 1 << 20  # rays per cast while building: bounded memory


@dataclass(frozen=True)
class ShadowMap:
    depth: NDArray[np.float32]  # blocks of texels: sun-axis height of the lit surface; -inf: none
    basis: NDArray[np.float32]  # rows: u, v (the map plane) and the unit direction to the sun
    params: NDArray[np.float32]  # u0, v0, 1 / texel, normal offset (m), depth bias (m)

    @property
    def texel_m(self) -> float:
        return float(1.0 / self.params[2])

    @classmethod
    def empty(cls) -> ShadowMap:
        """No shadows: the kernels skip the lookup for a map without texels."""
        return cls(
            np.zeros((0, 0, BLOCK, BLOCK), np.float32), np.eye(3, dtype=np.float32), np.ones(5, np.float32)
        )


def light_basis(sun: NDArray[np.floating]) -> NDArray[np.float64]:
    w = np.asarray(sun, dtype=np.float64) / np.linalg.norm(sun)
    helper = np.array([0.0, 0.0, 1.0]) if abs(w[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    u = np.cross(helper, w)
    u /= np.linalg.norm(u)
    return np.stack([u, np.cross(w, u), w])


def build_shadow_map(
    raycaster: o3d.t.geometry.RaycastingScene,
    points: NDArray[np.floating],
    sun: NDArray[np.floating],
    *,
    threads: int = 0,
    texel_m: float = TEXEL_M,
    max_texels: int = MAX_TEXELS,
) -> ShadowMap:
    """Cast one ray per texel against the sun over the bounds of ``points`` (the scene's vertices)."""
    basis = light_basis(sun)
    local = np.asarray(points, dtype=np.float64) @ basis.T
    lo, hi = local.min(axis=0), local.max(axis=0)
    span_u, span_v = hi[0] - lo[0], hi[1] - lo[1]
    texel = max(texel_m, math.sqrt(span_u * span_v / max_texels))
    # one texel of margin on each side keeps the 2x2 filter of edge points inside the map
    u0, v0 = lo[0] - texel, lo[1] - texel
    cols, rows = math.ceil(span_u / texel) + 2, math.ceil(span_v / texel) + 2
    top = hi[2] + 1.0
    depth = np.empty(rows * cols, dtype=np.float32)
    u_axis = u0 + (np.arange(cols) + 0.5) * texel
    band_rows = max(1, _BAND // cols)
    for r0 in range(0, rows, band_rows):
        v_axis = v0 + (np.arange(r0, min(rows, r0 + band_rows)) + 0.5) * texel
        uu, vv = np.meshgrid(u_axis, v_axis)
        origin = uu.reshape(-1, 1) * basis[0] + vv.reshape(-1, 1) * basis[1] + top * basis[2]
        rays = np.hstack([origin, np.broadcast_to(-basis[2], origin.shape)]).astype(np.float32)
        t = raycaster.cast_rays(o3d.core.Tensor(rays), nthreads=threads)["t_hit"].numpy()
        depth[r0 * cols : r0 * cols + len(t)] = np.where(np.isfinite(t), top - t, -np.inf)
    params = [u0, v0, 1.0 / texel, NORMAL_OFFSET_TEXELS * texel, DEPTH_BIAS_TEXELS * texel]
    return ShadowMap(
        _blocked(depth.reshape(rows, cols)), basis.astype(np.float32), np.asarray(params, np.float32)
    )


def _blocked(depth: NDArray[np.float32]) -> NDArray[np.float32]:
    """``(rows, cols)`` as ``(rows / B, cols / B, B, B)`` blocks of one 4 KB page each, padded
    with -inf: a view's pixels read the map along slanted lines, which in row-major order
    touch a new page (and TLB entry) at almost every pixel."""
    rows, cols = depth.shape
    br, bc = -(-rows // BLOCK), -(-cols // BLOCK)
    padded = np.full((br * BLOCK, bc * BLOCK), -np.inf, dtype=np.float32)
    padded[:rows, :cols] = depth
    return np.ascontiguousarray(padded.reshape(br, BLOCK, bc, BLOCK).transpose(0, 2, 1, 3))
