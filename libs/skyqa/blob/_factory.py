from __future__ import annotations

from typing import TYPE_CHECKING

from skyqa.blob._base import BlobStore
from skyqa.blob._local import LocalBlobStore
from skyqa.blob._s3 import S3BlobStore

if TYPE_CHECKING:
    from skyqa.settings import StoreSettings


def open_store(settings: StoreSettings) -> BlobStore:
    """Build the configured backend."""
    if settings.backend == "local":
        return LocalBlobStore(settings.local_root)
    return S3BlobStore(
        settings.s3_endpoint,
        settings.s3_access_key,
        settings.s3_secret_key.get_secret_value(),
        settings.s3_bucket,
        secure=settings.s3_secure,
        region=settings.s3_region,
        create_bucket=settings.s3_create_bucket,
    )
