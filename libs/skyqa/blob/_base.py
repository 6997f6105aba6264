from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skyqa.v1 import common_pb2


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
        """``length`` bytes from offset ``start`` (fewer past the end): how a video is streamed
        to a browser that seeks, without reading the whole object."""
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
