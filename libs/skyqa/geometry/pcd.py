"""PCD v0.7 reading and writing with the semantic fields UAV-DualCog's Stage 2 expects.

Written as ``DATA binary`` (an ASCII PCD of a city is tens of MB and slow to parse); the reader
accepts ASCII too.
"""

from __future__ import annotations

import io

import numpy as np
from numpy.typing import NDArray

from skyqa.errors import InvalidInput

CLOUD_DTYPE = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("class_id", "<u4"),
        ("instance_id", "<u4"),
        ("semantic_raw", "<u4"),
        ("observed", "<u4"),
    ]
)


def decode_cloud(data: bytes) -> NDArray[np.void]:
    """Stage 1's compact cloud (``*.semantic_lidar_compact.npy``) as later stages read it: a stored
    file of another layout is refused with a message instead of misread field by field."""
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InvalidInput(f"fused cloud is not a valid .npy file: {exc}") from None
    if arr.dtype != CLOUD_DTYPE or arr.ndim != 1:
        raise InvalidInput(
            f"fused cloud has dtype {arr.dtype} and {arr.ndim} dimensions, expected {CLOUD_DTYPE}"
        )
    out: NDArray[np.void] = arr
    return out


def write_pcd(cloud: NDArray[np.void]) -> bytes:
    names = cloud.dtype.names or ()
    types = ["F" if cloud.dtype[n].kind == "f" else "U" for n in names]
    sizes = [str(cloud.dtype[n].itemsize) for n in names]
    header = (
        "# .PCD v0.7 - skyqa semantic lidar\n"
        "VERSION 0.7\n"
        f"FIELDS {' '.join(names)}\n"
        f"SIZE {' '.join(sizes)}\n"
        f"TYPE {' '.join(types)}\n"
        f"COUNT {' '.join('1' for _ in names)}\n"
        f"WIDTH {len(cloud)}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n"
        f"POINTS {len(cloud)}\nDATA binary\n"
    )
    return header.encode("ascii") + np.ascontiguousarray(cloud).tobytes()


def read_pcd(data: bytes) -> NDArray[np.void]:
    header: dict[str, list[str]] = {}
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            raise InvalidInput("PCD header ends before its DATA line")
        line = data[pos:end].decode("ascii", "replace").strip()
        pos = end + 1
        if not line or line.startswith("#"):
            continue
        key, *values = line.split()
        header[key.upper()] = values
        if key.upper() == "DATA":
            break
    try:
        names = header["FIELDS"]
        sizes = [int(s) for s in header["SIZE"]]
        types = header["TYPE"]
        n = int(header["POINTS"][0])
    except (KeyError, ValueError, IndexError) as exc:
        raise InvalidInput(f"PCD header is missing or malformed: {exc}") from None
    kinds = {"F": "f", "U": "u", "I": "i"}
    dtype = np.dtype([(name, f"<{kinds[t]}{s}") for name, s, t in zip(names, sizes, types, strict=True)])
    mode = header["DATA"][0].lower()
    if mode == "binary":
        if len(data) - pos < n * dtype.itemsize:
            raise InvalidInput("PCD body is shorter than POINTS says")
        return np.frombuffer(data, dtype=dtype, count=n, offset=pos).copy()
    if mode == "ascii":
        rows = np.loadtxt(data[pos:].decode("ascii").splitlines(), ndmin=2)
        out = np.zeros(n, dtype=dtype)
        for i, name in enumerate(names):
            out[name] = rows[:n, i]
        return out
    raise InvalidInput(f"PCD DATA mode {mode!r} is not supported (binary or ascii)")
