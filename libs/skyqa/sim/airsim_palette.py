"""Segmentation palettes: the colour an object id gets in an AirSim Segmentation image.

AirSim-family simulators disagree: Microsoft AirSim 1.x paints ids 0..255 with the fixed table
its docs ship as ``seg_rgbs.txt``; Cosys-AirSim paints each object's id with the colour map its
Python client bundles (``simGetSegmentationColorMap``). Scripts look colours up in the table of
the simulator they were written for, so the server paints with the table the client expects:

- ``ids``: the id itself as ``(id & 255, id >> 8 & 255, id >> 16)`` (no table; 2**24 ids);
- ``cosys``: the installed ``cosysairsim`` client's colour map;
- a file: AirSim's ``seg_rgbs.txt`` (``<id>\\t[r, g, b]`` per line) or an ``(N, 3)`` ``.npy``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skyqa.errors import InvalidInput

ID_COLOURS = 1 << 24
MAX_PALETTE_BYTES = 64 << 20
_LINE = re.compile(r"\s*(\d+)\s*\[\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\]\s*")


class Palette:
    """Colours of ids ``0..size-1``; ``table`` None means an id's colour is its own bytes."""

    def __init__(self, name: str, table: NDArray[np.uint8] | None = None) -> None:
        self.name, self.table = name, table
        self.size = ID_COLOURS if table is None else len(table)

    def rgb(self, ids: NDArray[np.integer[Any]]) -> NDArray[np.uint8]:
        """``(..., 3)`` colours of ``ids`` (each in ``0..size-1``)."""
        if self.table is not None:
            painted: NDArray[np.uint8] = self.table[ids]
            return painted
        ids = ids.astype(np.int64)
        return np.stack([ids & 255, (ids >> 8) & 255, (ids >> 16) & 255], -1).astype(np.uint8)

    def default_id(self, wanted: int) -> int:
        """An id in range for an object that would get ``wanted``: beyond a short table (AirSim's
        256 colours) ids wrap around ``1..size-1`` and objects share colours, as they do there."""
        return wanted if wanted < self.size else 1 + (wanted - 1) % (self.size - 1)


def load_palette(spec: str) -> Palette:
    """``ids``, ``cosys`` or a palette file (see the module docstring)."""
    if spec == "ids":
        return Palette("ids")
    if spec == "cosys":
        try:
            import cosysairsim
        except ImportError:
            raise InvalidInput(
                "--palette cosys reads the colour map of the cosysairsim client: pip install 'skyqa[airsim]'"
            ) from None
        return Palette(
            "cosys", _checked(np.asarray(cosysairsim.MultirotorClient.simGetSegmentationColorMap()), spec)
        )
    path = Path(spec)
    try:
        if path.stat().st_size > MAX_PALETTE_BYTES:
            raise InvalidInput(f"palette {path} is larger than {MAX_PALETTE_BYTES} bytes")
        if path.suffix == ".npy":
            return Palette(path.name, _checked(np.load(path, allow_pickle=False), spec))
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"--palette is ids, cosys or a palette file; {path}: {exc.strerror}") from None
    except UnicodeDecodeError:  # before ValueError, its base
        raise InvalidInput(f"palette {path} is not text (AirSim's seg_rgbs.txt) nor a .npy file") from None
    except ValueError as exc:
        raise InvalidInput(f"palette {path} is not a numpy array file: {exc}") from None
    return Palette(path.name, _checked(_parse_table(text, path), spec))


def _parse_table(text: str, path: Path) -> NDArray[np.int64]:
    rows: dict[int, tuple[int, int, int]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.fullmatch(line)
        if m is None:
            raise InvalidInput(f"palette {path} line {number}: expected '<id> [r, g, b]', got {line[:60]!r}")
        rows[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    if sorted(rows) != list(range(len(rows))):
        raise InvalidInput(f"palette {path} must list ids 0..N-1 once each")
    return np.array([rows[i] for i in range(len(rows))], dtype=np.int64).reshape(-1, 3)


def _checked(table: NDArray[Any], spec: str) -> NDArray[np.uint8]:
    if table.ndim != 2 or table.shape[1] < 3 or not 2 <= len(table) <= ID_COLOURS:
        raise InvalidInput(
            f"palette {spec}: expected 2..{ID_COLOURS} rows of r, g, b, got shape {table.shape}"
        )
    if not np.issubdtype(table.dtype, np.integer) or table.min() < 0 or table.max() > 255:
        raise InvalidInput(f"palette {spec}: colours are integers 0..255")
    return np.ascontiguousarray(table[:, :3], dtype=np.uint8)
