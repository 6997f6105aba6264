import json
import shutil
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


def test_a_run_folder_holds_only_the_run_files(tmp_path: Path) -> None:
    """Issue #41.13: a hidden .<name>.skyqa-meta beside every object made a zipped release
    folder carry one metadata file per file. The metadata lives outside the data tree now."""
    store = LocalBlobStore(tmp_path)
    written = {"runs/r1/README.md": b"# card", "runs/r1/image_tasks/a.json": b"{}", "runs/r1/v/x.mp4": b"mp4"}
    for key, data in written.items():
        store.put(key, data, "application/x-test")
    store.put("runs/r1/image_tasks/a.json", b'{"again": 1}')  # an overwrite leaves nothing behind
    found = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "runs").rglob("*") if p.is_file())
    assert found == sorted(written)
    assert store.list("runs/r1/") == sorted(written)
    assert store.list("") == sorted(written)  # the metadata tree is no object
    head = store.head("runs/r1/v/x.mp4")
    assert (
        head is not None and head.sha256 == sha256_hex(b"mp4") and head.content_type == "application/x-test"
    )
    store.delete("runs/r1/v/x.mp4")
    assert not (tmp_path / ".skyqa-meta" / "runs/r1/v/x.mp4").exists()


def test_a_store_of_the_old_layout_keeps_its_metadata(tmp_path: Path) -> None:
    """Objects written with the sidecar beside them still report the recorded sha and type,
    are listed without it, and drop it when rewritten or deleted."""
    folder = tmp_path / "runs" / "old"
    folder.mkdir(parents=True)
    for name, data in (("a.json", b"{}"), ("b.bin", b"bytes")):
        (folder / name).write_bytes(data)
        meta = {"sha256": f"recorded-{name}", "size": len(data), "content_type": "application/x-old"}
        (folder / f".{name}.skyqa-meta").write_text(json.dumps(meta))
    store = LocalBlobStore(tmp_path)
    head = store.head("runs/old/a.json")
    assert head is not None and (head.sha256, head.content_type) == ("recorded-a.json", "application/x-old")
    assert store.list("runs/old") == ["runs/old/a.json", "runs/old/b.bin"]
    store.put("runs/old/a.json", b"[1]", "application/json")
    assert not (folder / ".a.json.skyqa-meta").exists()
    head = store.head("runs/old/a.json")
    assert head is not None and (head.sha256, head.content_type) == (sha256_hex(b"[1]"), "application/json")
    store.delete("runs/old/b.bin")
    assert sorted(p.name for p in folder.iterdir()) == ["a.json"]


def test_metadata_that_no_longer_matches_its_file_is_not_trusted(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    store.put("runs/r/x.bin", b"first")
    (tmp_path / "runs/r/x.bin").write_bytes(b"replaced by hand")
    head = store.head("runs/r/x.bin")
    assert head is not None and head.sha256 == sha256_hex(b"replaced by hand") and head.size == 16


def test_metadata_left_by_files_deleted_by_hand_does_not_block_writes(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    store.put("runs/r/a", b"file where a folder goes next")
    store.put("runs/s/b/c", b"in a folder where a file goes next")
    shutil.rmtree(tmp_path / "runs")
    store.put("runs/r/a/inner", b"1")
    store.put("runs/s/b", b"2")
    assert store.get("runs/r/a/inner") == b"1" and store.get("runs/s/b") == b"2"
    for key, data in (("runs/r/a/inner", b"1"), ("runs/s/b", b"2")):
        head = store.head(key)
        assert head is not None and head.sha256 == sha256_hex(data)


@pytest.mark.parametrize("key", [".skyqa-meta/runs/r/a.json", ".skyqa-meta"])
def test_keys_cannot_reach_the_metadata_tree(tmp_path: Path, key: str) -> None:
    store = LocalBlobStore(tmp_path)
    store.put("runs/r/a.json", b"{}")
    for op in (store.get, store.head, store.exists, store.delete, store.list, store.open_range):
        with pytest.raises(InvalidKey, match="metadata"):
            op(key)
    with pytest.raises(InvalidKey):
        store.put(key, b"forged")
    # nor through a link inside the data tree
    (tmp_path / "runs/r/meta").symlink_to(tmp_path / ".skyqa-meta/runs/r/a.json")
    with pytest.raises(BlobNotFound):
        store.get("runs/r/meta")
    assert store.list("runs/r") == ["runs/r/a.json"]


def test_names_longer_than_a_file_name_are_refused_not_crashed_on(tmp_path: Path) -> None:
    """Issue #41.8: a 300-character segment made the OS answer ENAMETOOLONG (an OSError, a 500)."""
    store = LocalBlobStore(tmp_path)
    long = "f" * 300
    for op in (store.get, store.head, store.exists, store.open_range, store.list):
        with pytest.raises(InvalidKey, match="at most 255"):
            op(f"runs/r/{long}")
    with pytest.raises(InvalidKey):
        store.put(f"runs/{long}/x", b"x")
    name = "n" * 255  # the longest name there is, metadata and all
    store.put(f"runs/r/{name}", b"ok")
    info = store.head(f"runs/r/{name}")
    assert info is not None and info.sha256 == sha256_hex(b"ok")


def test_open_range_reads_a_span_in_pieces(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    data = bytes(range(256)) * 4
    store.put("runs/r/v.bin", data)
    reader = store.open_range("runs/r/v.bin", 10, 100)
    try:
        pieces = [reader.read(30) for _ in range(5)]
    finally:
        reader.close()
    assert [len(p) for p in pieces] == [30, 30, 30, 10, 0] and b"".join(pieces) == data[10:110]
    whole = store.open_range("runs/r/v.bin")
    assert whole.read(10_000) == data
    whole.close()
    assert store.get_range("runs/r/v.bin", 1000, 100) == data[1000:]
    assert store.get_range("runs/r/v.bin", 5000, 10) == b""
    with pytest.raises(BlobNotFound):
        store.open_range("runs/r/nothing.bin")
    with pytest.raises(BlobNotFound):
        store.open_range("runs/r")  # a folder is no object
