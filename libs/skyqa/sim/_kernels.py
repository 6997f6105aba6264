"""Compiled per-pixel kernels of the built-in simulator (numba, parallel over pixels).

The ray cast itself is Embree's; everything around it (camera rays, Lambert + shadow-map +
haze shading, procedural textures, label and depth images) is one pass per pixel here instead
of a dozen numpy passes with temporaries, which is what kept the renderer at a sixth of the
ray-cast ceiling. Each pixel is independent, so results do not depend on the thread count.
"""

from __future__ import annotations

import math
import os
import threading

import numba
import numpy as np
from numba import njit, prange
from numpy.typing import NDArray

from skyqa.sim.daylight import AMBIENT, SUNLIGHT
from skyqa.sim.mesh import ASPHALT, FACADE, FOLIAGE, GRASS, WINDOW
from skyqa.sim.shadow import BLOCK_SHIFT

SKY_HORIZON = np.array([0.80, 0.86, 0.92], dtype=np.float32)
SKY_ZENITH = np.array([0.42, 0.60, 0.86], dtype=np.float32)
# rows in the order ``shade`` reads them
PALETTE = np.stack([AMBIENT, SUNLIGHT, SKY_HORIZON, SKY_ZENITH, WINDOW])
HAZE_M = 1800.0
MISS = np.uint32(0xFFFFFFFF)  # Open3D's invalid geometry id
_SHIFT, _MASK = np.int64(BLOCK_SHIFT), np.int64((1 << BLOCK_SHIFT) - 1)  # shadow-map blocks

# Grain of the value noise per material: (material, cell size m, amplitude).
NOISE = np.array([(GRASS, 2.0, 0.10), (ASPHALT, 0.7, 0.06), (FOLIAGE, 0.6, 0.18)], dtype=np.float32)

# The workqueue threading layer (the fallback where no OpenMP/TBB runtime is installed)
# aborts on concurrent launches from two threads; services render from worker threads.
launch_lock = threading.Lock()

# Kernels and Embree's TBB pool take turns on the same cores: OpenMP threads that spin after a
# kernel (libgomp's default) slow the next ray cast by a tenth. Read when libgomp loads, which
# is at the first kernel launch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# OpenMP first: it is thread-safe, and an older TBB bundled by other wheels only yields a warning.
numba.config.THREADING_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]  # type: ignore[attr-defined]

# cache=True keeps the compiled code next to the module (or in NUMBA_CACHE_DIR), so only the
# first process after an install pays the few seconds of compilation
_compiled = njit(parallel=True, cache=True, nogil=True, error_model="numpy")


@njit(inline="always")
def _direction(
    cam: NDArray[np.float32], rot: NDArray[np.float32], row: int, col: int
) -> tuple[float, float, float]:
    """World direction of pixel (``row``, ``col``), forward component 1 in the camera frame.

    ``cam`` is (width, cx, cy, 1/fx, 1/fy). Computed, not read from a cached direction image: that
    costs less than the memory traffic, and the cast and the shading get bit-identical rays.
    """
    u = (np.float32(col) + np.float32(0.5) - cam[1]) * cam[3]
    v = (np.float32(row) + np.float32(0.5) - cam[2]) * cam[4]
    # camera frame: x forward, y left, z up; the pixel's direction is (1, -u, -v)
    return (
        rot[0, 0] - rot[0, 1] * u - rot[0, 2] * v,
        rot[1, 0] - rot[1, 1] * u - rot[1, 2] * v,
        rot[2, 0] - rot[2, 1] * u - rot[2, 2] * v,
    )


@_compiled
def rotate_rays(
    cam: NDArray[np.float32],
    rot: NDArray[np.float32],
    origin: NDArray[np.float32],
    row0: int,
    out: NDArray[np.float32],
) -> None:
    """Rays ``(rows * width, 6)`` of image rows ``row0 ..`` into ``out``: ``origin`` plus direction.
    The width is the image's: ``len(out)`` is whole rows."""
    width = int(cam[0])
    for y in prange(out.shape[0] // width):
        for x in range(width):
            i = y * width + x
            out[i, 0] = origin[0]
            out[i, 1] = origin[1]
            out[i, 2] = origin[2]
            out[i, 3], out[i, 4], out[i, 5] = _direction(cam, rot, row0 + y, x)


@njit(inline="always")
def _facing(
    normals: NDArray[np.float32], i: int, dx: float, dy: float, dz: float
) -> tuple[float, float, float]:
    """The hit normal turned towards the camera (scene meshes are not consistently wound)."""
    nx, ny, nz = normals[i, 0], normals[i, 1], normals[i, 2]
    if nx * dx + ny * dy + nz * dz > 0:
        return -nx, -ny, -nz
    return nx, ny, nz


@njit(inline="always")
def _sunlit(
    smap: NDArray[np.float32],
    basis: NDArray[np.float32],
    sp: NDArray[np.float32],
    px: float,
    py: float,
    pz: float,
    nx: float,
    ny: float,
    nz: float,
) -> float:
    """Share of the sunlight reaching surface point ``p`` with normal ``n``: the 2x2 texels of the
    shadow map (``shadow.ShadowMap``) around it, weighted bilinearly, that have no surface above it."""
    qx, qy, qz = px + nx * sp[3], py + ny * sp[3], pz + nz * sp[3]
    fu = (basis[0, 0] * qx + basis[0, 1] * qy + basis[0, 2] * qz - sp[0]) * sp[2] - 0.5
    fv = (basis[1, 0] * qx + basis[1, 1] * qy + basis[1, 2] * qz - sp[1]) * sp[2] - 0.5
    wq = basis[2, 0] * qx + basis[2, 1] * qy + basis[2, 2] * qz + sp[4]
    iu, iv = math.floor(fu), math.floor(fv)
    au, av = fu - iu, fv - iv
    rows, cols = smap.shape[0] * smap.shape[2], smap.shape[1] * smap.shape[3]
    light = 0.0
    for dv in range(2):
        for du in range(2):
            r, c = np.int64(iv) + dv, np.int64(iu) + du
            if (
                r < 0
                or c < 0
                or r >= rows
                or c >= cols
                or smap[r >> _SHIFT, c >> _SHIFT, r & _MASK, c & _MASK] <= wq
            ):
                light += (au if du else 1.0 - au) * (av if dv else 1.0 - av)
    return light


@njit(inline="always")
def _hash01(cx: np.int64, cy: np.int64, cz: np.int64) -> float:
    """Deterministic value noise in [0, 1) from an integer cell (wrapping int64 arithmetic)."""
    h = (cx * np.int64(73856093)) ^ (cy * np.int64(19349663)) ^ (cz * np.int64(83492791))
    h = (h ^ (h >> np.int64(13))) * np.int64(1274126177)
    return float(h & np.int64(0xFFFF)) / 65536.0


@_compiled
def shade(
    cam: NDArray[np.float32],
    rot: NDArray[np.float32],
    origin: NDArray[np.float32],
    row0: int,
    t: NDArray[np.float32],
    gid: NDArray[np.uint32],
    prim: NDArray[np.uint32],
    normals: NDArray[np.float32],
    scene: tuple[
        NDArray[np.int64], NDArray[np.float32], NDArray[np.uint8], NDArray[np.uint32], NDArray[np.uint16]
    ],
    shadow: tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]],
    noise: NDArray[np.float32],
    palette: NDArray[np.float32],
    sun: NDArray[np.float32],
    haze_m: float,
    rgb: NDArray[np.uint8],
    depth: NDArray[np.float32],
    inst: NDArray[np.uint32],
    sem: NDArray[np.uint16],
) -> None:
    """RGB, planar depth, instance and semantic values of the pixels of whole image rows
    ``row0 ..`` from their cast (``rotate_rays``), written to the same rows of the outputs.

    ``scene``: per-geometry triangle offset, per-triangle colour and material, per-geometry
    instance and class. ``shadow``: a ``shadow.ShadowMap``'s depth, basis and params (no texels:
    no shadows). ``palette`` rows (``PALETTE``): ambient, sunlight, sky horizon, sky zenith, window.
    """
    offsets, colors, materials, instances, semantics = scene
    smap, basis, sp = shadow
    width = int(cam[0])
    for y in prange(t.shape[0] // width):
        for x in range(width):
            i = y * width + x
            dx, dy, dz = _direction(cam, rot, row0 + y, x)
            dnorm = math.sqrt(dx * dx + dy * dy + dz * dz)
            if not math.isfinite(t[i]) or gid[i] == MISS:
                depth[i] = np.inf
                inst[i] = 0
                sem[i] = 0
                e = min(max(dz / dnorm, 0.0), 1.0)
                r = palette[2, 0] + (palette[3, 0] - palette[2, 0]) * e
                g = palette[2, 1] + (palette[3, 1] - palette[2, 1]) * e
                b = palette[2, 2] + (palette[3, 2] - palette[2, 2]) * e
            else:
                obj = gid[i]
                inst[i] = instances[obj]
                sem[i] = semantics[obj]
                th = t[i]
                depth[i] = th
                tri = offsets[obj] + prim[i]
                mat = materials[tri]
                px = origin[0] + dx * th
                py = origin[1] + dy * th
                pz = origin[2] + dz * th
                r, g, b = colors[tri, 0], colors[tri, 1], colors[tri, 2]
                if mat == FACADE:
                    if abs(normals[i, 2]) < 0.3:
                        along = py if abs(normals[i, 0]) > abs(normals[i, 1]) else px
                        fz = (pz - math.floor(pz / 3.2) * 3.2) / 3.2
                        fa = (along - math.floor(along / 2.6) * 2.6) / 2.6
                        if 0.35 < fz < 0.8 and 0.2 < fa < 0.75 and pz > 1.0:
                            r, g, b = palette[4, 0], palette[4, 1], palette[4, 2]
                else:
                    for m in range(noise.shape[0]):
                        if mat == noise[m, 0]:
                            cell, amp = noise[m, 1], noise[m, 2]
                            # cells centred on the origin: the ground plane z=0 is no cell border,
                            # where float rounding would pick either cell pixel by pixel
                            v = _hash01(
                                np.int64(math.floor(px / cell + 0.5)),
                                np.int64(math.floor(py / cell + 0.5)),
                                np.int64(math.floor(pz / cell + 0.5)),
                            )
                            f = 1.0 - amp + 2.0 * amp * v
                            r, g, b = r * f, g * f, b * f
                nx, ny, nz = _facing(normals, i, dx, dy, dz)
                lam = max(nx * sun[0] + ny * sun[1] + nz * sun[2], 0.0)
                if lam > 0.0 and smap.size:
                    lam *= _sunlit(smap, basis, sp, px, py, pz, nx, ny, nz)
                fog = 1.0 - math.exp(-th * dnorm / haze_m)
                keep = 1.0 - fog
                r = r * (palette[0, 0] + palette[1, 0] * lam) * keep + palette[2, 0] * fog
                g = g * (palette[0, 1] + palette[1, 1] * lam) * keep + palette[2, 1] * fog
                b = b * (palette[0, 2] + palette[1, 2] * lam) * keep + palette[2, 2] * fog
            rgb[i, 0] = np.uint8(min(max(r * 255.0 + 0.5, 0.0), 255.0))
            rgb[i, 1] = np.uint8(min(max(g * 255.0 + 0.5, 0.0), 255.0))
            rgb[i, 2] = np.uint8(min(max(b * 255.0 + 0.5, 0.0), 255.0))


def set_threads(threads: int) -> None:
    """Use ``threads`` kernel threads in the calling thread (0: every configured one)."""
    limit: int = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    numba.set_num_threads(limit if threads <= 0 else min(threads, limit))
