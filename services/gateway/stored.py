"""Parsed release files kept in memory by content: a file is read and parsed once per version.

The workbench pages ask for the same ledger, manifest and evaluation items page after page; a
release of ten thousand rows would otherwise be re-read and re-parsed on every click. An entry
is keyed by the object's sha256 (from ``head``), so a refreshed release is picked up at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from skyqa.blob import BlobStore
from skyqa.contracts.base import load_json
from skyqa.errors import BlobNotFound, InvalidInput

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
# the most a page parses of one file: a release's largest JSON files (the QA plan, the
# scored replies of a large evaluation) stay well under it
MAX_PARSED_BYTES = 512 * 1024 * 1024


def contract(kind: type[M], what: str) -> Callable[[bytes], M]:
    """A parser of a stored file into its contract (:func:`load_json`, which names the file,
    the field and what is wrong with it)."""
    return lambda data: load_json(kind, data, what)


class ParsedCache:
    """The last ``capacity`` parsed files, by key and content hash."""

    def __init__(self, store: BlobStore, capacity: int = 16) -> None:
        self.store = store
        self.capacity = capacity
        self._items: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, parse: Callable[[bytes], T], kind: str = "") -> T:
        """``parse`` of the object at ``key`` (BlobNotFound when there is none). ``kind`` tells
        two parses of one file apart."""
        info = self.store.head(key)
        if info is None:
            raise BlobNotFound(f"no object at {key!r}")
        slot = (key, info.sha256, kind)
        with self._lock:
            if slot in self._items:
                self._items.move_to_end(slot)
                return self._items[slot]  # type: ignore[no-any-return]
        if info.size > MAX_PARSED_BYTES:
            raise InvalidInput(
                f"{key} is {info.size} bytes, more than the {MAX_PARSED_BYTES} this page reads"
            )
        value = parse(self.store.get(key))
        with self._lock:
            self._items[slot] = value
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return value
