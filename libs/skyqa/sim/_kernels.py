"""Compiled per-pixel kernels of the built-in simulator (numba, parallel over pixels).

The ray cast itself is Embree's; everything around it (rotating the cached camera rays,
Lambert + shadow + haze shading, procedural textures, label and depth images) is one pass
per pixel here instead of a dozen numpy passes with temporaries, which is what kept the
renderer at a sixth of the ray-cast ceiling. Each pixel is independent, so results do not
depend on the thread count.
"""

from __future__ import annotations

import math
import os
import threading

import numba
import numpy as np
from numba import njit, prange
from numpy.typing import NDArray

from skyqa.sim.mesh import ASPHALT, FACADE, FOLIAGE, GRASS

SUN = (np.array([0.45, -0.35, 0.82]) / np.linalg.norm([0.45, -0.35, 0.82])).astype(np.float32)
AMBIENT = np.array([0.40, 0.42, 0.47], dtype=np.float32)
SUNLIGHT = np.array([0.68, 0.65, 0.58], dtype=np.float32)
SKY_HORIZON = np.array([0.80, 0.86, 0.92], dtype=np.float32)
SKY_ZENITH = np.array([0.42, 0.60, 0.86], dtype=np.float32)
WINDOW = np.array([0.20, 0.27, 0.35], dtype=np.float32)
# rows in the order ``shade`` reads them
PALETTE = np.stack([AMBIENT, SUNLIGHT, SKY_HORIZON, SKY_ZENITH, WINDOW])
HAZE_M = 1800.0
SHADOW_BIAS_M = 0.05
MISS = np.uint32(0xFFFFFFFF)  # Open3D's invalid geometry id

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
def _direction(dirs: NDArray[np.float32], rot: NDArray[np.float32], i: int) -> tuple[float, float, float]:
    """World direction of pixel ``i``, recomputed from the cached camera-frame directions: cheaper
    than reading it back from the ray buffer, and bit-identical to what was cast."""
    return (
        rot[0, 0] * dirs[i, 0] + rot[0, 1] * dirs[i, 1] + rot[0, 2] * dirs[i, 2],
        rot[1, 0] * dirs[i, 0] + rot[1, 1] * dirs[i, 1] + rot[1, 2] * dirs[i, 2],
        rot[2, 0] * dirs[i, 0] + rot[2, 1] * dirs[i, 1] + rot[2, 2] * dirs[i, 2],
    )


@_compiled
def rotate_rays(
    dirs: NDArray[np.float32], rot: NDArray[np.float32], origin: NDArray[np.float32], out: NDArray[np.float32]
) -> None:
    """Rays ``(N, 6)`` into ``out``: ``origin`` plus camera-frame ``dirs`` rotated by ``rot``."""
    for i in prange(dirs.shape[0]):
        out[i, 0] = origin[0]
        out[i, 1] = origin[1]
        out[i, 2] = origin[2]
        out[i, 3], out[i, 4], out[i, 5] = _direction(dirs, rot, i)


@njit(inline="always")
def _facing(
    normals: NDArray[np.float32], i: int, dx: float, dy: float, dz: float
) -> tuple[float, float, float]:
    """The hit normal turned towards the camera (scene meshes are not consistently wound)."""
    nx, ny, nz = normals[i, 0], normals[i, 1], normals[i, 2]
    if nx * dx + ny * dy + nz * dz > 0:
        return -nx, -ny, -nz
    return nx, ny, nz


_CHUNKS = 256  # work items of the compaction passes: enough to balance any thread count


@_compiled
def sunlight(
    dirs: NDArray[np.float32],
    rot: NDArray[np.float32],
    origin: NDArray[np.float32],
    t: NDArray[np.float32],
    normals: NDArray[np.float32],
    sun: NDArray[np.float32],
    bias: float,
    out: NDArray[np.float32],
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Lambert term ``max(n . sun, 0)`` per pixel (0 for sky) and one shadow ray per sunlit
    pixel from its surface point lifted off along the normal, with that pixel's index.

    The rays fill the head of ``out`` (``len(out) == 0``: no shadow rays), in pixel order, by a
    count pass and a write pass over chunks.
    """
    n = t.shape[0]
    lam = np.zeros(n, dtype=np.float32)
    size = (n + _CHUNKS - 1) // _CHUNKS
    counts = np.zeros(_CHUNKS, dtype=np.int64)
    for c in prange(_CHUNKS):
        lit = 0
        for i in range(c * size, min(n, (c + 1) * size)):
            if math.isfinite(t[i]):
                dx, dy, dz = _direction(dirs, rot, i)
                nx, ny, nz = _facing(normals, i, dx, dy, dz)
                lam[i] = max(nx * sun[0] + ny * sun[1] + nz * sun[2], 0.0)
                lit += lam[i] > 0.0
        counts[c] = lit
    starts = np.zeros(_CHUNKS + 1, dtype=np.int64)
    if out.shape[0]:
        starts[1:] = np.cumsum(counts)
    index = np.empty(starts[-1], dtype=np.int64)
    if out.shape[0]:
        for c in prange(_CHUNKS):
            j = starts[c]
            for i in range(c * size, min(n, (c + 1) * size)):
                if lam[i] > 0.0:
                    dx, dy, dz = _direction(dirs, rot, i)
                    nx, ny, nz = _facing(normals, i, dx, dy, dz)
                    index[j] = i
                    out[j, 0] = origin[0] + dx * t[i] + nx * bias
                    out[j, 1] = origin[1] + dy * t[i] + ny * bias
                    out[j, 2] = origin[2] + dz * t[i] + nz * bias
                    out[j, 3] = sun[0]
                    out[j, 4] = sun[1]
                    out[j, 5] = sun[2]
                    j += 1
    return lam, index


@njit(inline="always")
def _hash01(cx: np.int64, cy: np.int64, cz: np.int64) -> float:
    """Deterministic value noise in [0, 1) from an integer cell (wrapping int64 arithmetic)."""
    h = (cx * np.int64(73856093)) ^ (cy * np.int64(19349663)) ^ (cz * np.int64(83492791))
    h = (h ^ (h >> np.int64(13))) * np.int64(1274126177)
    return float(h & np.int64(0xFFFF)) / 65536.0


@_compiled
def shade(
    dirs: NDArray[np.float32],
    rot: NDArray[np.float32],
    origin: NDArray[np.float32],
    t: NDArray[np.float32],
    gid: NDArray[np.uint32],
    prim: NDArray[np.uint32],
    normals: NDArray[np.float32],
    lam: NDArray[np.float32],
    offsets: NDArray[np.int64],
    colors: NDArray[np.float32],
    materials: NDArray[np.uint8],
    instances: NDArray[np.uint32],
    semantics: NDArray[np.uint16],
    noise: NDArray[np.float32],
    palette: NDArray[np.float32],
    haze_m: float,
) -> tuple[NDArray[np.uint8], NDArray[np.float32], NDArray[np.uint32], NDArray[np.uint16]]:
    """RGB, planar depth, instance and semantic images from one cast and the shadowed Lambert.

    ``palette`` rows (``PALETTE``): ambient, sunlight, sky horizon, sky zenith, window.
    """
    n = t.shape[0]
    rgb = np.empty((n, 3), dtype=np.uint8)
    depth = np.empty(n, dtype=np.float32)
    inst = np.zeros(n, dtype=np.uint32)
    sem = np.zeros(n, dtype=np.uint16)
    for i in prange(n):
        dx, dy, dz = _direction(dirs, rot, i)
        dnorm = math.sqrt(dx * dx + dy * dy + dz * dz)
        if not math.isfinite(t[i]) or gid[i] == MISS:
            depth[i] = np.inf
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
            fog = 1.0 - math.exp(-th * dnorm / haze_m)
            keep = 1.0 - fog
            r = r * (palette[0, 0] + palette[1, 0] * lam[i]) * keep + palette[2, 0] * fog
            g = g * (palette[0, 1] + palette[1, 1] * lam[i]) * keep + palette[2, 1] * fog
            b = b * (palette[0, 2] + palette[1, 2] * lam[i]) * keep + palette[2, 2] * fog
        rgb[i, 0] = np.uint8(min(max(r * 255.0 + 0.5, 0.0), 255.0))
        rgb[i, 1] = np.uint8(min(max(g * 255.0 + 0.5, 0.0), 255.0))
        rgb[i, 2] = np.uint8(min(max(b * 255.0 + 0.5, 0.0), 255.0))
    return rgb, depth, inst, sem


def set_threads(threads: int) -> None:
    """Use ``threads`` kernel threads in the calling thread (0: every configured one)."""
    limit: int = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    numba.set_num_threads(limit if threads <= 0 else min(threads, limit))
