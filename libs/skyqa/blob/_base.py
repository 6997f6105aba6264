from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skyqa.errors import InvalidInput
from skyqa.v1 import common_pb2

# what one read of a stream asks for: large enough that a 100 MB video is a few hundred reads,
# small enough that many readers at once hold little memory
CHUNK_BYTES = 256 * 1024


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class RangeNotSatisfiable(InvalidInput):
    """``open_range`` was asked for a span starting at or past the end of a non-empty object:
    it shrank (was replaced) since the caller read its size. ``size`` is its size now, when
    the backend says it (S3 may not)."""

    reason = "range_not_satisfiable"

    def __init__(self, key: str, start: int, size: int | None) -> None:
        now = "" if size is None else f" of {size} bytes"
        super().__init__(f"offset {start} is past the end of the object {key!r}{now}")
        self.key = key
        self.start = start
        self.size = size


class BlobReader(Protocol):
    """An open span of one object; ``read`` returns b"" at its end. Not shared between threads
    without a lock."""

    def read(self, size: int) -> bytes: ...

    def close(self) -> None: ...


def iter_reader(reader: BlobReader, chunk: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The reader's bytes in chunks of at most ``chunk``; closes it when done or abandoned."""
    try:
        while data := reader.read(chunk):
            yield data
    finally:
        reader.close()


def read_span(open_range: Callable[[str, int, int], BlobReader], key: str, start: int, length: int) -> bytes:
    """``get_range`` over a store's ``open_range``: at most ``length`` bytes from ``start``,
    fewer (none) past the end."""
    try:
        reader = open_range(key, start, length)
    except RangeNotSatisfiable:
        return b""
    try:
        return reader.read(max(0, length))
    finally:
        reader.close()


def sha256_stream(reader: BlobReader) -> tuple[str, int]:
    """The sha256 and length of what ``reader`` holds, without holding all of it."""
    digest, size = hashlib.sha256(), 0
    for data in iter_reader(reader):
        digest.update(data)
        size += len(data)
    return digest.hexdigest(), size


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What is known about a stored object; mirrors the ``BlobRef`` protobuf message."""

    key: str
    sha256: str
    size: int
    content_type: str = "application/octet-stream"

    def to_ref(self) -> common_pb2.BlobRef:
        """The wire form that events carry instead of the bytes."""
        return common_pb2.BlobRef(
            key=self.key, sha256=self.sha256, size=self.size, content_type=self.content_type
        )


@runtime_checkable
class BlobStore(Protocol):
    """Synchronous, thread-safe object store.

    Services run their CPU-bound work in worker threads, so a blocking interface keeps call
    sites simple; async code wraps calls in ``asyncio.to_thread``. Every ``put`` is atomic: a
    reader sees either the previous object or the complete new one, never a partial write.
    """

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> BlobInfo: ...

    def get(self, key: str) -> bytes: ...

    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start`` (fewer past the end, none from past it), in one
        piece."""
        ...

    def open_range(self, key: str, start: int = 0, length: int | None = None) -> BlobReader:
        """A reader of ``length`` bytes from offset ``start`` (to the end when None; fewer past
        the end): how a file is streamed to a client in bounded chunks, without reading the whole
        object. A missing object raises :class:`BlobNotFound` here, before the first read, and
        a ``start`` at or past the end of a non-empty object :class:`RangeNotSatisfiable` (an
        :class:`InvalidInput`); a span from 0 of an empty object is empty. The caller closes
        the reader."""
        ...

    def head(self, key: str) -> BlobInfo | None: ...

    def exists(self, key: str) -> bool: ...

    def list(self, prefix: str) -> list[str]:
        """Every key inside the folder ``prefix`` (a trailing '/' is implied; '' is the root)."""
        ...

    def delete(self, key: str) -> None: ...

    def ping(self) -> bool: ...

    def describe(self) -> str: ...

    def presigned_url(self, key: str, expires_s: int) -> str | None:
        """A time-limited URL that reads ``key`` without credentials, or None if the backend has none."""
        ...
