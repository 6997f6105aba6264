"""Stored segmentation frames read several at a time for a check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from skyqa import media
from skyqa.blob import LocalBlobStore
from skyqa.families.frames import per_frame

pytestmark = pytest.mark.unit


def stored_frames(tmp_path: Path, count: int) -> tuple[LocalBlobStore, list[str]]:
    store = LocalBlobStore(tmp_path)
    keys = []
    for i in range(count):
        instance = np.zeros((6, 8), np.uint32)
        instance[: i % 6, :] = 300 + i % 2  # frame i shows i % 6 rows of instance 300 or 301
        keys.append(f"seg/frame_{i:06d}.png")
        store.put(keys[-1], media.encode_segmentation(np.zeros((6, 8), np.uint16), instance), "image/png")
    return store, keys


def test_each_frame_is_reduced_in_the_order_of_its_key(tmp_path: Path) -> None:
    store, keys = stored_frames(tmp_path, 23)
    shares = per_frame(store, keys, lambda inst: float((inst == 300).mean()))
    assert shares == [(i % 6) / 6 if i % 2 == 0 else 0.0 for i in range(23)]
    assert per_frame(store, keys[:1], lambda inst: int(inst.max())) == [0]
    assert per_frame(store, [], lambda inst: 0) == []


def test_a_missing_or_unreadable_frame_fails_the_whole_read(tmp_path: Path) -> None:
    store, keys = stored_frames(tmp_path, 9)
    assert per_frame(store, [*keys, "seg/frame_000099.png"], lambda inst: 1) is None
    store.put(keys[4], b"not a png", "image/png")
    assert per_frame(store, keys, lambda inst: 1) is None


def test_a_frame_claiming_more_pixels_than_any_video_is_refused(tmp_path: Path) -> None:
    store, keys = stored_frames(tmp_path, 2)
    png = store.get(keys[1])
    store.put(
        keys[1], png[:16] + (4097).to_bytes(4, "big") + (3072).to_bytes(4, "big") + png[24:], "image/png"
    )
    assert per_frame(store, keys, lambda inst: 1) is None
