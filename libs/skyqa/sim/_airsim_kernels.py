"""Compiled per-pixel kernels of ``skyqa sim serve``: the work between a render and the wire.

A 1440x1080 response is 1.5M segmentation lookups and 1.5M msgpack floats; as numpy passes with
temporaries they cost a fifth of the render itself, as one pass each a few milliseconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import prange
from numpy.typing import NDArray

from skyqa.sim._kernels import _compiled, launch_lock


@_compiled
def _gather_slots(
    instance: NDArray[np.uint32],
    semantic: NDArray[np.uint16],
    n_inst: int,
    n_sem: int,
    table: NDArray[Any],
    out: NDArray[Any],
) -> None:
    for i in prange(instance.size):
        k = instance[i]
        out[i] = table[min(k, n_inst) if k > 0 else n_inst + 1 + min(semantic[i], n_sem)]


def gather_slots(
    instance: NDArray[np.integer[Any]],
    semantic: NDArray[np.integer[Any]],
    n_inst: int,
    n_sem: int,
    table: NDArray[Any],
) -> NDArray[Any]:
    """``table[slot]`` per pixel: slot ``min(instance, n_inst)`` for things, else
    ``n_inst + 1 + min(semantic, n_sem)``; the result has ``instance``'s shape plus ``table``'s
    trailing ones."""
    inst = np.ascontiguousarray(instance, dtype=np.uint32).ravel()
    sem = np.ascontiguousarray(semantic, dtype=np.uint16).ravel()
    out = np.empty((inst.size, *table.shape[1:]), dtype=table.dtype)
    with launch_lock:
        _gather_slots(inst, sem, n_inst, n_sem, table, out)
    return out.reshape(*instance.shape, *table.shape[1:])


@_compiled
def _msgpack_f32(values: NDArray[np.float32], out: NDArray[np.uint8]) -> None:
    raw = values.view(np.uint32)
    for i in prange(raw.size):
        bits = raw[i]
        j = 5 * i
        out[j] = 0xCA
        out[j + 1] = (bits >> 24) & 0xFF
        out[j + 2] = (bits >> 16) & 0xFF
        out[j + 3] = (bits >> 8) & 0xFF
        out[j + 4] = bits & 0xFF


def msgpack_f32_items(values: NDArray[np.floating[Any]]) -> NDArray[np.uint8]:
    """Each value as a msgpack float 32 (``0xCA`` + big-endian bytes), back to back."""
    flat = np.ascontiguousarray(values, dtype=np.float32).ravel()
    out = np.empty(5 * flat.size, dtype=np.uint8)
    with launch_lock:
        _msgpack_f32(flat, out)
    return out
