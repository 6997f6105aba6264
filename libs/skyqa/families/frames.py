"""Reading stored segmentation frames for a check, several at a time.

The QA stage reads the segmentation frame of every video frame a row asks about (every frame
of every mission for UAV-DualCog's visibility rows). Store reads and PNG decoding release the
GIL, so a few threads overlap them; each thread reduces its frame to what the check needs
before the next, so memory stays at a few frames whatever the video's length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from skyqa import media
from skyqa.blob import BlobStore
from skyqa.errors import BlobNotFound

T = TypeVar("T")
READERS = 4
# the largest video frame a render job may ask for (services/renderer/video.py): a stored frame
# claiming more is refused before it is decoded, so four readers stay within a few hundred MB
MAX_FRAME_PIXELS = 4096 * 3072
_MISSING = object()


def per_frame(
    store: BlobStore, frame_keys: Sequence[str], reduce: Callable[[NDArray[np.uint32]], T]
) -> list[T] | None:
    """``reduce`` of each stored segmentation frame's instance map, in the keys' order, or None
    when any frame is missing or unreadable (the check then fails its row)."""

    def one(key: str) -> object:
        try:
            return reduce(media.decode_segmentation(store.get(key), MAX_FRAME_PIXELS)[1])
        except (BlobNotFound, OSError, ValueError):
            return _MISSING

    if len(frame_keys) <= 1:
        out = [one(k) for k in frame_keys]
    else:
        with ThreadPoolExecutor(min(READERS, len(frame_keys)), thread_name_prefix="frames") as pool:
            out = list(pool.map(one, frame_keys))
    if any(o is _MISSING for o in out):
        return None
    return out  # type: ignore[return-value]
