"""Review 41 (items 5, 6, 10) and open_range's errors: old-layout sidecar names are no keys,
head never reports a sha that is not the sha of the bytes at the key, and symbolic links under
the root are no objects."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from skyqa.blob import LocalBlobStore, RangeNotSatisfiable, sha256_hex
from skyqa.errors import BlobNotFound, InvalidInput, InvalidKey

SIDECAR_KEYS = ["runs/r/.notes.skyqa-meta", "runs/r/.a.txt.skyqa-meta", "runs/r/.a.txt.skyqa-meta/inner"]


@pytest.mark.parametrize("key", SIDECAR_KEYS)
def test_old_sidecar_names_are_refused_by_every_operation(tmp_path: Path, key: str) -> None:
    store = LocalBlobStore(tmp_path)
    with pytest.raises(InvalidKey, match="metadata"):
        store.put(key, b"user data")
    for op in (store.get, store.head, store.exists, store.delete, store.list, store.open_range):
        with pytest.raises(InvalidKey, match="metadata"):
            op(key)
    assert store.list("") == []


def test_a_put_cannot_delete_an_object_through_its_sidecar_name(tmp_path: Path) -> None:
    """Repro 5a: put('runs/r/.notes.skyqa-meta') stored an object that put('runs/r/notes')
    then deleted as its sidecar."""
    store = LocalBlobStore(tmp_path)
    with pytest.raises(InvalidKey):
        store.put("runs/r/.notes.skyqa-meta", b"user data")
    store.put("runs/r/notes", b"x")
    assert store.get("runs/r/notes") == b"x"
    assert store.list("runs/r") == ["runs/r/notes"]


def test_sidecar_metadata_cannot_be_forged_through_a_put(tmp_path: Path) -> None:
    """Repro 5b: an object put at runs/r/.a.txt.skyqa-meta became the metadata head reported
    for runs/r/a.txt once the metadata tree's entry was gone."""
    store = LocalBlobStore(tmp_path)
    store.put("runs/r/a.txt", b"hello", "text/plain")
    forged = {"sha256": "0" * 64, "size": 5, "content_type": "text/html"}
    with pytest.raises(InvalidKey):
        store.put("runs/r/.a.txt.skyqa-meta", json.dumps(forged).encode())
    (tmp_path / ".skyqa-meta/runs/r/a.txt").unlink()
    head = store.head("runs/r/a.txt")
    assert head is not None and head.sha256 == sha256_hex(b"hello") and head.size == 5
    assert not (tmp_path / "runs/r/.a.txt.skyqa-meta").exists()


def test_an_old_sidecar_is_still_read_as_the_metadata_of_its_object_only(tmp_path: Path) -> None:
    folder = tmp_path / "runs/old"
    folder.mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"abc")
    meta = {"sha256": sha256_hex(b"abc"), "size": 3, "content_type": "application/x-old"}
    (folder / ".a.bin.skyqa-meta").write_text(json.dumps(meta))
    store = LocalBlobStore(tmp_path)
    head = store.head("runs/old/a.bin")
    assert head is not None and (head.sha256, head.content_type) == (meta["sha256"], "application/x-old")
    assert store.list("runs/old") == ["runs/old/a.bin"]
    with pytest.raises(InvalidKey):
        store.get("runs/old/.a.bin.skyqa-meta")


def test_head_during_a_put_reports_the_sha_of_the_bytes_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repro 6: the metadata of the new bytes is written before the file is renamed into place;
    a head between the two reported the new sha for the old bytes (same size)."""
    store = LocalBlobStore(tmp_path)
    old, new = b"A" * 1000, b"B" * 1000
    store.put("runs/r/race", old)
    replace = os.replace
    seen: list[tuple[str, str]] = []

    def check() -> None:
        head = store.head("runs/r/race")
        assert head is not None
        seen.append((head.sha256, sha256_hex((tmp_path / "runs/r/race").read_bytes())))

    def hooked(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        check()
        replace(src, dst, *args, **kwargs)
        check()

    monkeypatch.setattr(os, "replace", hooked)
    store.put("runs/r/race", new)
    monkeypatch.undo()
    # renames: the metadata, then the object; a head before each and after each
    assert len(seen) == 4
    assert all(reported == on_disk for reported, on_disk in seen), seen
    assert seen[2] == (sha256_hex(old), sha256_hex(old))  # metadata new, bytes still old
    head = store.head("runs/r/race")
    assert head is not None and head.sha256 == sha256_hex(new)
    # the heads in between hashed the old file but left the put's metadata alone
    recorded = json.loads((tmp_path / ".skyqa-meta/runs/r/race").read_text())
    assert recorded["sha256"] == sha256_hex(new)
    assert recorded["ino"] == (tmp_path / "runs/r/race").stat().st_ino


def test_metadata_names_the_file_it_describes(tmp_path: Path) -> None:
    """Same size, rewritten in place (the mtime changes): the file is hashed, not trusted, and
    the metadata then names the file it was hashed from."""
    store = LocalBlobStore(tmp_path)
    store.put("runs/r/x.bin", b"first", "text/plain")
    path = tmp_path / "runs/r/x.bin"
    recorded = json.loads((tmp_path / ".skyqa-meta/runs/r/x.bin").read_text())
    assert (recorded["ino"], recorded["mtime_ns"]) == (path.stat().st_ino, path.stat().st_mtime_ns)
    path.write_bytes(b"other")
    os.utime(path, ns=(recorded["mtime_ns"] + 1_000_000, recorded["mtime_ns"] + 1_000_000))
    head = store.head("runs/r/x.bin")
    assert head is not None and head.sha256 == sha256_hex(b"other") and head.content_type == "text/plain"
    again = json.loads((tmp_path / ".skyqa-meta/runs/r/x.bin").read_text())
    assert again["sha256"] == sha256_hex(b"other") and again["mtime_ns"] == path.stat().st_mtime_ns
    # a file of the same size put in its place by a rename (another inode) is not trusted either
    other = tmp_path / "elsewhere.bin"
    other.write_bytes(b"third")
    os.utime(other, ns=(again["mtime_ns"], again["mtime_ns"]))
    os.replace(other, path)
    head = store.head("runs/r/x.bin")
    assert head is not None and head.sha256 == sha256_hex(b"third")


def _plant_links(root: Path) -> LocalBlobStore:
    store = LocalBlobStore(root)
    store.put("runs/r1/a.txt", b"hello")
    store.put("runs/r3/keep.txt", b"kept")
    (root / "runs/r1/link.txt").symlink_to(root / "runs/r1/a.txt")
    (root / "runs/r1/rel.txt").symlink_to("a.txt")
    (root / "runs/r2").symlink_to(root / "runs/r1")
    (root / "runs/r1/sub").symlink_to(root / "runs/r3")
    return store


@pytest.mark.parametrize(
    "key", ["runs/r1/link.txt", "runs/r1/rel.txt", "runs/r2/a.txt", "runs/r1/sub/keep.txt"]
)
def test_symbolic_links_under_the_root_are_never_read(tmp_path: Path, key: str) -> None:
    """Repro 10: a link runs/r1/link.txt -> a.txt inside the root was served."""
    store = _plant_links(tmp_path)
    with pytest.raises(BlobNotFound):
        store.get(key)
    with pytest.raises(BlobNotFound):
        store.open_range(key)
    assert store.head(key) is None
    assert not store.exists(key)
    assert store.get_range("runs/r1/a.txt", 0, 5) == b"hello"


def test_symbolic_links_under_the_root_are_never_listed(tmp_path: Path) -> None:
    store = _plant_links(tmp_path)
    assert store.list("runs/r1") == ["runs/r1/a.txt"]
    assert store.list("runs/r2") == []
    assert store.list("runs/r1/sub") == []
    assert store.list("") == ["runs/r1/a.txt", "runs/r3/keep.txt"]


@pytest.mark.parametrize(
    "key", ["runs/r1/link.txt", "runs/r2/a.txt", "runs/r2/new.txt", "runs/r1/sub/keep.txt"]
)
def test_writes_never_follow_a_planted_link(tmp_path: Path, key: str) -> None:
    store = _plant_links(tmp_path)
    with pytest.raises(InvalidKey, match="link"):
        store.put(key, b"written through a link")
    store.delete(key)
    assert store.get("runs/r1/a.txt") == b"hello" and store.get("runs/r3/keep.txt") == b"kept"
    assert not (tmp_path / "runs/r1/new.txt").exists()
    assert (tmp_path / "runs/r1/link.txt").is_symlink()
    head = store.head("runs/r1/a.txt")
    assert head is not None and head.sha256 == sha256_hex(b"hello")


def test_a_linked_metadata_folder_is_never_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root/.skyqa-meta").symlink_to(outside)
    store = LocalBlobStore(tmp_path / "root")
    with pytest.raises(InvalidKey, match="metadata folder"):
        store.put("runs/r/a", b"1")
    assert list(outside.iterdir()) == []
    (tmp_path / "root/runs/r/b").write_bytes(b"zz")
    head = store.head("runs/r/b")
    assert head is not None and head.sha256 == sha256_hex(b"zz")
    assert list(outside.iterdir()) == []


def test_open_range_tells_a_vanished_object_from_one_that_shrank(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    store.put("runs/r/s.txt", b"0123456789")
    store.put("runs/r/s.txt", b"ab")  # shrank since a head said 10 bytes
    with pytest.raises(RangeNotSatisfiable) as caught:
        store.open_range("runs/r/s.txt", 5, 5)
    assert isinstance(caught.value, InvalidInput) and caught.value.size == 2 and caught.value.start == 5
    with pytest.raises(RangeNotSatisfiable):
        store.open_range("runs/r/s.txt", 2)
    reader = store.open_range("runs/r/s.txt", 1, 5)  # starts inside: fewer bytes
    assert reader.read(10) == b"b"
    reader.close()
    assert store.get_range("runs/r/s.txt", 5, 5) == b""  # get_range: "fewer past the end"
    store.put("runs/r/e.bin", b"")
    for length in (None, 0, 10):
        empty = store.open_range("runs/r/e.bin", 0, length)
        assert empty.read(10) == b""
        empty.close()
    store.delete("runs/r/s.txt")
    with pytest.raises(BlobNotFound):
        store.open_range("runs/r/s.txt", 5, 5)
