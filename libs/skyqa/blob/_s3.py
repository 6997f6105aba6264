from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import urllib3
from minio import Minio
from minio.error import S3Error

from skyqa.blob._base import (
    BlobInfo,
    BlobReader,
    RangeNotSatisfiable,
    read_span,
    sha256_hex,
    sha256_stream,
)
from skyqa.errors import BlobNotFound, TransientError
from skyqa.keys import validate_key

_MISSING = {"NoSuchKey", "NoSuchObject", "ResourceNotFound"}


def _total_size(exc: S3Error) -> int | None:
    """The object's size from the ``Content-Range: bytes */<size>`` of a 416 answer, if any."""
    response = getattr(exc, "response", None)
    header = str(response.headers.get("content-range", "")) if response is not None else ""
    total = header.rpartition("/")[2]
    return int(total) if total.isdigit() else None


class _ResponseSpan:
    """The body of one GET, read as the caller asks for it; ``close`` gives the connection
    back to the pool (or drops it when the body was not read to its end)."""

    def __init__(self, response: Any, endpoint: str) -> None:
        self._response = response
        self._endpoint = endpoint

    def read(self, size: int) -> bytes:
        try:
            return bytes(self._response.read(size))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientError(f"S3 endpoint {self._endpoint} broke off a read: {exc}") from exc

    def close(self) -> None:
        self._response.close()
        self._response.release_conn()


class _Empty:
    def read(self, size: int) -> bytes:
        return b""

    def close(self) -> None:
        pass


class S3BlobStore:
    """MinIO / S3 backend through the ``minio`` SDK.

    S3 PUTs are atomic, so a reader never sees a partial object. The sha256 travels as
    user metadata. Connection failures become :class:`TransientError` so the bus retries the
    message with a delay instead of dropping it.
    """

    def __init__(
        self,
        endpoint: str,
        access_key: str,
        secret_key: str,
        bucket: str,
        *,
        secure: bool = False,
        region: str | None = None,
        create_bucket: bool = False,
    ) -> None:
        # Few quick retries here: the bus owns the long retry with back-off.
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=5, read=60),
            retries=urllib3.Retry(total=2, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
            # as many kept connections as the gateway streams files at once by default, so
            # concurrent reads reuse connections instead of opening and discarding them
            maxsize=64,
        )
        self.client = Minio(
            endpoint=endpoint,
            access_key=access_key,
            secret_key=secret_key,
            secure=secure,
            region=region,
            http_client=http,
        )
        self.endpoint = endpoint
        self.bucket = bucket
        if create_bucket:
            self._call(self._create_bucket)

    def _create_bucket(self) -> None:
        if not self.client.bucket_exists(bucket_name=self.bucket):
            self.client.make_bucket(bucket_name=self.bucket)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except S3Error:
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransientError(f"S3 endpoint {self.endpoint} unreachable: {exc}") from exc

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> BlobInfo:
        validate_key(key)
        digest = sha256_hex(data)
        self._call(
            self.client.put_object,
            bucket_name=self.bucket,
            object_name=key,
            data=io.BytesIO(data),
            length=len(data),
            content_type=content_type,
            metadata={"sha256": digest},
        )
        return BlobInfo(key=key, sha256=digest, size=len(data), content_type=content_type)

    def get(self, key: str) -> bytes:
        response = self._get_object(key, {})
        try:
            return bytes(response.read())
        finally:
            response.close()
            response.release_conn()

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return read_span(self.open_range, key, start, length)

    def open_range(self, key: str, start: int = 0, length: int | None = None) -> BlobReader:
        begin = max(0, start)
        if length is not None and length <= 0:
            # minio reads "length 0" as "to the end"; an empty span still needs the object
            info = self.head(key)
            if info is None:
                raise BlobNotFound(f"no object at {key!r}")
            if begin > 0 and begin >= info.size:
                raise RangeNotSatisfiable(key, begin, info.size)
            return _Empty()
        span = {"offset": begin} | ({} if length is None else {"length": length})
        try:
            return _ResponseSpan(self._get_object(key, span), self.endpoint)
        except S3Error as exc:
            if exc.code != "InvalidRange":
                raise
            if begin == 0:
                # a span from 0 of an empty object: S3 has no byte 0 to start at
                return _Empty()
            raise RangeNotSatisfiable(key, begin, _total_size(exc)) from None

    def _get_object(self, key: str, span: dict[str, int]) -> Any:
        """The unread response of a GET (its body still on the connection); a missing object
        is BlobNotFound, a span past its end an S3Error InvalidRange."""
        validate_key(key)
        try:
            return self._call(self.client.get_object, bucket_name=self.bucket, object_name=key, **span)
        except S3Error as exc:
            if exc.code in _MISSING:
                raise BlobNotFound(f"no object at {key!r}") from None
            raise

    def head(self, key: str) -> BlobInfo | None:
        validate_key(key)
        try:
            stat = self._call(self.client.stat_object, bucket_name=self.bucket, object_name=key)
        except S3Error as exc:
            if exc.code in _MISSING:
                return None
            raise
        meta = {k.lower(): v for k, v in (stat.metadata or {}).items()}
        digest = meta.get("x-amz-meta-sha256")
        if digest is None:
            digest = sha256_stream(self.open_range(key))[0]
        return BlobInfo(key, str(digest), int(stat.size or 0), str(stat.content_type or ""))

    def exists(self, key: str) -> bool:
        return self.head(key) is not None

    def list(self, prefix: str) -> list[str]:
        # S3 prefixes are plain string prefixes: without the '/' "runs/abc" matches runs/abcdef
        folder = f"{validate_key(prefix.rstrip('/'))}/" if prefix.strip("/") else ""
        objects = self._call(self.client.list_objects, bucket_name=self.bucket, prefix=folder, recursive=True)
        return sorted(str(o.object_name) for o in self._call(list, objects))

    def delete(self, key: str) -> None:
        validate_key(key)
        self._call(self.client.remove_object, bucket_name=self.bucket, object_name=key)

    def ping(self) -> bool:
        try:
            return bool(self.client.bucket_exists(bucket_name=self.bucket))
        except Exception:
            return False

    def describe(self) -> str:
        return f"s3://{self.endpoint}/{self.bucket}"

    def presigned_url(self, key: str, expires_s: int) -> str | None:
        validate_key(key)
        # signing is local (no request); the URL names the endpoint this store was configured with
        url: str = self.client.presigned_get_object(
            bucket_name=self.bucket, object_name=key, expires=timedelta(seconds=expires_s)
        )
        return url
