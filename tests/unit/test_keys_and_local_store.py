import threading
from pathlib import Path

import pytest
from skyqa.blob import LocalBlobStore, sha256_hex
from skyqa.errors import BlobNotFound, InvalidInput, InvalidKey
from skyqa.keys import chunk_prefix, validate_id, validate_key


@pytest.mark.parametrize(
    "key",
    ["", "/etc/passwd", "a/../b", "../x", "a//b", "a/./b", "a\\b", "a/b c", "a/b\x00", "x" * 2000],
)
def test_validate_key_rejects_unsafe_keys(key: str) -> None:
    with pytest.raises(InvalidKey):
        validate_key(key)


def test_validate_key_accepts_layout_keys() -> None:
    key = chunk_prefix("run-1", "demo_city", "builtin") + "/chunk_000001.rgb.jpg"
    assert validate_key(key) == key
    assert key == "runs/run-1/scene_data/demo_city/pcd_map/raw/builtin/chunk_000001.rgb.jpg"


@pytest.mark.parametrize("value", ["", "-x", "a b", "a/b", "a.b", "é", "x" * 97])
def test_validate_id_rejects(value: str) -> None:
    with pytest.raises(InvalidInput):
        validate_id(value, "run id")


def test_local_store_roundtrip_and_metadata(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    info = store.put("a/b/c.bin", b"payload", "application/x-test")
    assert info.sha256 == sha256_hex(b"payload")
    assert store.get("a/b/c.bin") == b"payload"
    head = store.head("a/b/c.bin")
    assert head is not None
    assert head.sha256 == info.sha256
    assert head.content_type == "application/x-test"
    assert store.list("a/") == ["a/b/c.bin"]
    assert store.exists("a/b/c.bin")
    assert not store.exists("a/b/d.bin")
    store.delete("a/b/c.bin")
    with pytest.raises(BlobNotFound):
        store.get("a/b/c.bin")


def test_local_store_refuses_traversal_and_keeps_data(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "root")
    store.put("keep.txt", b"safe")
    outside = tmp_path / "outside.txt"
    with pytest.raises(InvalidKey):
        store.put("../outside.txt", b"evil")
    assert not outside.exists()
    assert store.get("keep.txt") == b"safe"


def test_local_store_overwrite_is_atomic_under_concurrent_readers(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    a, b = b"a" * 200_000, b"b" * 300_000
    store.put("obj", a)
    seen: set[bytes] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            data = store.get("obj")
            seen.add(data[:1] + bytes([len(data) % 251]) + bytes([len(set(data))]))

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(30):
        store.put("obj", b)
        store.put("obj", a)
    stop.set()
    t.join()
    # every read saw one complete version, never a torn mix
    assert seen <= {b"a" + bytes([len(a) % 251, 1]), b"b" + bytes([len(b) % 251, 1])}
