"""Blob store: one interface, a local-directory backend and a MinIO/S3 backend."""

from skyqa.blob._base import (
    CHUNK_BYTES,
    BlobInfo,
    BlobReader,
    BlobStore,
    RangeNotSatisfiable,
    sha256_hex,
    sha256_stream,
)
from skyqa.blob._factory import open_store
from skyqa.blob._local import LocalBlobStore
from skyqa.blob._s3 import S3BlobStore

__all__ = [
    "CHUNK_BYTES",
    "BlobInfo",
    "BlobReader",
    "BlobStore",
    "LocalBlobStore",
    "RangeNotSatisfiable",
    "S3BlobStore",
    "open_store",
    "sha256_hex",
    "sha256_stream",
]
