"""The S3 backend against a real SeaweedFS S3 gateway (signatures checked, no auto buckets)."""

from __future__ import annotations

import io
import json
import urllib.request

import pytest
from minio.error import S3Error
from skyqa.blob import RangeNotSatisfiable, S3BlobStore, sha256_hex
from skyqa.errors import BlobNotFound, InvalidInput, InvalidKey
from skyqa.servers import SeaweedS3


def test_roundtrip_head_list_delete(s3_store: S3BlobStore) -> None:
    data = bytes(range(256)) * 1000
    info = s3_store.put("runs/r/a/b.bin", data, "application/octet-stream")
    assert info.sha256 == sha256_hex(data)
    assert s3_store.get("runs/r/a/b.bin") == data
    head = s3_store.head("runs/r/a/b.bin")
    assert head is not None
    assert head.sha256 == info.sha256
    assert head.size == len(data)
    s3_store.put("runs/r/a/c.txt", b"x")
    assert s3_store.list("runs/r/a/") == ["runs/r/a/b.bin", "runs/r/a/c.txt"]
    s3_store.delete("runs/r/a/c.txt")
    assert not s3_store.exists("runs/r/a/c.txt")
    assert s3_store.ping()


def test_missing_object(s3_store: S3BlobStore) -> None:
    assert s3_store.head("nope/x") is None
    with pytest.raises(BlobNotFound):
        s3_store.get("nope/x")


def test_keys_validated_before_any_request(s3_store: S3BlobStore) -> None:
    s3_store.put("safe.txt", b"kept")
    with pytest.raises(InvalidKey):
        s3_store.put("../escape.txt", b"x")
    with pytest.raises(InvalidKey):
        s3_store.get("/abs")
    assert s3_store.get("safe.txt") == b"kept"


def test_wrong_credentials_are_refused(s3_server: SeaweedS3, s3_store: S3BlobStore) -> None:
    bad = S3BlobStore(s3_server.endpoint, s3_server.access_key, "wrong-secret", s3_store.bucket)
    with pytest.raises(S3Error):
        bad.put("x.txt", b"x")
    assert not bad.ping()


def test_open_range_streams_a_span_and_gives_the_connection_back(s3_store: S3BlobStore) -> None:
    data = bytes(range(256)) * 1000
    s3_store.put("runs/r/v.bin", data)
    reader = s3_store.open_range("runs/r/v.bin", 1000, 100_000)
    try:
        pieces = [reader.read(40_000) for _ in range(4)]
    finally:
        reader.close()
    assert [len(p) for p in pieces] == [40_000, 40_000, 20_000, 0]
    assert b"".join(pieces) == data[1000:101_000]
    # abandoned half-way: closing it must not leave the next request a broken connection
    half = s3_store.open_range("runs/r/v.bin")
    assert half.read(10) == data[:10]
    half.close()
    assert s3_store.get_range("runs/r/v.bin", 255_990, 100) == data[255_990:]
    empty = s3_store.open_range("runs/r/v.bin", 5, 0)
    assert empty.read(10) == b""
    empty.close()
    for length in (None, 0, 10):
        with pytest.raises(BlobNotFound):
            s3_store.open_range("runs/r/nothing.bin", 0, length)


def test_head_hashes_an_object_without_recorded_sha_in_pieces(s3_store: S3BlobStore) -> None:
    data = b"x" * 600_000
    s3_store.client.put_object(
        bucket_name=s3_store.bucket, object_name="runs/r/foreign.bin", data=io.BytesIO(data), length=len(data)
    )
    head = s3_store.head("runs/r/foreign.bin")
    assert head is not None and head.sha256 == sha256_hex(data) and head.size == len(data)


def test_open_range_tells_a_vanished_object_from_one_that_shrank(s3_store: S3BlobStore) -> None:
    """What the gateway needs when an object changed since its head: S3's InvalidRange and
    NoSuchKey come out as the store's errors, as on the local backend."""
    s3_store.put("runs/r/s.txt", b"0123456789")
    s3_store.put("runs/r/s.txt", b"ab")  # shrank since a head said 10 bytes
    for start, length in ((5, 5), (2, None), (5, 0)):
        with pytest.raises(RangeNotSatisfiable) as caught:
            s3_store.open_range("runs/r/s.txt", start, length)
        assert isinstance(caught.value, InvalidInput) and caught.value.start == start
        assert caught.value.size in (2, None)
    reader = s3_store.open_range("runs/r/s.txt", 1, 5)  # starts inside: fewer bytes
    assert reader.read(10) == b"b"
    reader.close()
    assert s3_store.get_range("runs/r/s.txt", 5, 5) == b""
    s3_store.put("runs/r/e.bin", b"")
    for length in (None, 0, 10):
        empty = s3_store.open_range("runs/r/e.bin", 0, length)
        assert empty.read(10) == b""
        empty.close()
    s3_store.delete("runs/r/s.txt")
    for length in (None, 0, 5):
        with pytest.raises(BlobNotFound):
            s3_store.open_range("runs/r/s.txt", 5, length)


def test_the_session_server_has_volume_slots_for_a_bucket_per_test(s3_server: SeaweedS3) -> None:
    # every test takes a bucket and every bucket several volume slots; counted from free disk,
    # the slots ran out after ~26 buckets on a 27 GB-free disk and later tests got HTTP 500
    url = f"http://127.0.0.1:{s3_server.ports['master.port']}/dir/status"
    with urllib.request.urlopen(url, timeout=10) as resp:
        topology = json.load(resp)["Topology"]
    assert topology["Max"] >= 1000
