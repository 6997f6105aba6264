"""Triangle-mesh primitives in numpy (deterministic, no scene-graph dependency)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
I32 = NDArray[np.int32]

# Surface materials that the shader patterns differently.
PLAIN, FACADE, GRASS, ASPHALT, FOLIAGE = 0, 1, 2, 3, 4
# the glass of the windows the shader draws on FACADE faces, instead of the wall's colour
WINDOW = np.array([0.20, 0.27, 0.35], dtype=np.float32)


@dataclass
class Part:
    vertices: F64
    triangles: I32
    color: tuple[float, float, float]
    material: int = PLAIN

    def transformed(self, yaw_deg: float, offset: tuple[float, float, float]) -> Part:
        c, s = np.cos(np.radians(yaw_deg)), np.sin(np.radians(yaw_deg))
        rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        return Part(self.vertices @ rot.T + np.asarray(offset), self.triangles, self.color, self.material)


def box(
    sx: float,
    sy: float,
    sz: float,
    center: tuple[float, float, float] = (0.0, 0.0, 0.0),
    *,
    color: tuple[float, float, float],
    material: int = PLAIN,
) -> Part:
    """Axis-aligned box; ``center`` is the centre of its bottom face."""
    x, y = sx / 2.0, sy / 2.0
    v = np.array(
        [
            [-x, -y, 0],
            [x, -y, 0],
            [x, y, 0],
            [-x, y, 0],
            [-x, -y, sz],
            [x, -y, sz],
            [x, y, sz],
            [-x, y, sz],
        ],
        dtype=np.float64,
    ) + np.asarray(center)
    t = np.array(
        [
            [0, 2, 1], [0, 3, 2],  # bottom
            [4, 5, 6], [4, 6, 7],  # top
            [0, 1, 5], [0, 5, 4],  # -y
            [1, 2, 6], [1, 6, 5],  # +x
            [2, 3, 7], [2, 7, 6],  # +y
            [3, 0, 4], [3, 4, 7],  # -x
        ],
        dtype=np.int32,
    )  # fmt: skip
    return Part(v, t, color, material)


def cylinder(
    radius: float,
    height: float,
    center: tuple[float, float, float] = (0.0, 0.0, 0.0),
    *,
    top_radius: float | None = None,
    segments: int = 16,
    color: tuple[float, float, float],
    material: int = PLAIN,
) -> Part:
    """Closed cylinder (or cone frustum with ``top_radius``) standing on ``center``."""
    top = radius if top_radius is None else top_radius
    a = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    ring = np.stack([np.cos(a), np.sin(a)], axis=-1)
    bottom = np.column_stack([ring * radius, np.zeros(segments)])
    upper = np.column_stack([ring * top, np.full(segments, height)])
    v = np.vstack([bottom, upper, [[0, 0, 0]], [[0, 0, height]]]) + np.asarray(center)
    i = np.arange(segments)
    j = (i + 1) % segments
    side = np.concatenate([np.stack([i, j, j + segments], -1), np.stack([i, j + segments, i + segments], -1)])
    cb, ct = 2 * segments, 2 * segments + 1
    caps = np.concatenate(
        [
            np.stack([np.full(segments, cb), j, i], -1),
            np.stack([np.full(segments, ct), i + segments, j + segments], -1),
        ]
    )
    return Part(v, np.concatenate([side, caps]).astype(np.int32), color, material)


def sphere(
    radius: float,
    center: tuple[float, float, float] = (0.0, 0.0, 0.0),
    *,
    rings: int = 8,
    segments: int = 12,
    scale_z: float = 1.0,
    color: tuple[float, float, float],
    material: int = PLAIN,
) -> Part:
    """UV sphere (optionally squashed) centred on ``center``."""
    theta = np.linspace(0.0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    tt, pp = np.meshgrid(theta, phi, indexing="ij")
    ring_pts = np.stack([np.sin(tt) * np.cos(pp), np.sin(tt) * np.sin(pp), np.cos(tt) * scale_z], -1).reshape(
        -1, 3
    )
    v = np.vstack([[[0, 0, scale_z]], ring_pts, [[0, 0, -scale_z]]]) * radius + np.asarray(center)
    tris: list[list[int]] = []
    n_top, n_bottom = 0, len(v) - 1
    for s in range(segments):
        s2 = (s + 1) % segments
        tris.append([n_top, 1 + s, 1 + s2])
        last = 1 + (rings - 2) * segments
        tris.append([n_bottom, last + s2, last + s])
        for r in range(rings - 2):
            a, b = 1 + r * segments + s, 1 + r * segments + s2
            c, d = a + segments, b + segments
            tris.extend([[a, c, b], [b, c, d]])
    return Part(v, np.asarray(tris, dtype=np.int32), color, material)


def gable_roof(
    sx: float, sy: float, height: float, base_z: float, *, color: tuple[float, float, float]
) -> Part:
    """Triangular prism roof along x, sitting on a ``sx`` by ``sy`` rectangle at ``base_z``."""
    x, y = sx / 2.0, sy / 2.0
    v = np.array(
        [[-x, -y, 0], [x, -y, 0], [x, y, 0], [-x, y, 0], [-x, 0, height], [x, 0, height]],
        dtype=np.float64,
    ) + np.array([0.0, 0.0, base_z])
    t = np.array([[0, 1, 5], [0, 5, 4], [2, 3, 4], [2, 4, 5], [0, 4, 3], [1, 2, 5], [0, 3, 2], [0, 2, 1]])
    return Part(v, t.astype(np.int32), color)


def merge(parts: list[Part]) -> tuple[F64, I32, NDArray[np.float32], NDArray[np.uint8]]:
    """Concatenate parts into one mesh with per-triangle colour and material."""
    verts, tris, colors, mats = [], [], [], []
    offset = 0
    for p in parts:
        verts.append(p.vertices)
        tris.append(p.triangles + offset)
        colors.append(np.tile(np.asarray(p.color, dtype=np.float32), (len(p.triangles), 1)))
        mats.append(np.full(len(p.triangles), p.material, dtype=np.uint8))
        offset += len(p.vertices)
    return (
        np.vstack(verts),
        np.vstack(tris).astype(np.int32),
        np.vstack(colors),
        np.concatenate(mats),
    )
