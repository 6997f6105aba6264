from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from stat import S_ISREG
from typing import BinaryIO

from skyqa.blob._base import BlobInfo, BlobReader, sha256_hex, sha256_stream
from skyqa.errors import BlobNotFound, InvalidKey
from skyqa.keys import validate_key

# <root>/.skyqa-meta/<key> holds the metadata of <root>/<key>: outside the data tree, so a
# release folder (runs/<run>/) copied or zipped out of the store holds only its files
META_DIR = ".skyqa-meta"
# stores written before the parallel tree kept it beside each object as .<name>.skyqa-meta
_LEGACY_SUFFIX = ".skyqa-meta"
# the longest file name common filesystems (ext4, xfs, btrfs, APFS, NTFS) hold; a longer key
# segment could never be stored, and asking the OS for it fails with ENAMETOOLONG
NAME_MAX = 255


class _FileSpan:
    """At most ``left`` bytes of an open file; the descriptor keeps the version that was open
    even if a put replaces the object meanwhile."""

    def __init__(self, fh: BinaryIO, left: int | None) -> None:
        self._fh = fh
        self._left = left

    def read(self, size: int) -> bytes:
        if self._left is not None:
            size = min(size, self._left)
        if size <= 0:
            return b""
        data = self._fh.read(size)
        if self._left is not None:
            self._left -= len(data)
        return data

    def close(self) -> None:
        self._fh.close()


class LocalBlobStore:
    """Objects as files under ``root``; the embedded default.

    The sha256, size and content type of each object live in ``<root>/.skyqa-meta/<key>``,
    written before the object itself is renamed into place, so ``head`` never hashes large
    files; metadata whose size does not match the file is ignored and the file hashed.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.meta_root = self.root / META_DIR

    def _checked(self, key: str) -> str:
        validate_key(key)
        segments = key.split("/")
        if segments[0] == META_DIR:
            raise InvalidKey(f"object key {key!r} names the store's metadata folder {META_DIR}/")
        longest = max(segments, key=len)
        if len(longest.encode()) > NAME_MAX:
            raise InvalidKey(
                f"object key segment {longest[:40]!r}... is {len(longest)} characters; "
                f"a file name holds at most {NAME_MAX}"
            )
        return key

    def _path(self, key: str) -> Path:
        path = (self.root / self._checked(key)).resolve()
        # validate_key already forbids '..'; this guards against symlinks inside the root,
        # including one into the metadata tree
        if self.root not in path.parents or path == self.meta_root or self.meta_root in path.parents:
            raise BlobNotFound(f"key {key!r} resolves outside the store root")
        return path

    def _meta_path(self, key: str) -> Path:
        path = self.meta_root / self._checked(key)
        # the store writes here too: a link planted in the metadata tree must not redirect that
        if self.meta_root not in path.resolve().parents:
            raise BlobNotFound(f"metadata of {key!r} resolves outside {self.meta_root}")
        return path

    @staticmethod
    def _legacy_meta_path(path: Path) -> Path:
        return path.with_name(f".{path.name}{_LEGACY_SUFFIX}")

    @staticmethod
    def _write_temp(path: Path, data: bytes, rename: bool) -> str:
        """Write ``data`` to a temporary file beside ``path`` and, if ``rename``, rename it into
        place; else the caller renames (or removes) the returned temporary file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if rename:
                os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return tmp

    def _clear_stale_meta(self, meta: Path) -> None:
        """Remove metadata left by objects deleted by hand that stands where this key's must go.

        Called once the object's temporary file exists, so every parent of the key is a folder
        in the data tree: a file at one of the metadata's parents is stale, and so is a folder
        where the metadata file goes (the data tree cannot hold a folder there and a file)."""
        for parent in reversed(meta.relative_to(self.meta_root).parents):
            where = self.meta_root / parent
            if where.is_file() or where.is_symlink():
                where.unlink()
        if meta.is_dir() and not meta.is_symlink():
            shutil.rmtree(meta)

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> BlobInfo:
        path = self._path(key)
        meta = self._meta_path(key)
        info = BlobInfo(key=key, sha256=sha256_hex(data), size=len(data), content_type=content_type)
        doc = json.dumps({"sha256": info.sha256, "size": info.size, "content_type": content_type}).encode()
        # the object's bytes first, as a temporary file: its folders then exist, which is what
        # tells stale metadata in the way apart; the metadata is in place before the object is
        tmp = self._write_temp(path, data, rename=False)
        try:
            try:
                self._write_temp(meta, doc, rename=True)
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                self._clear_stale_meta(meta)
                self._write_temp(meta, doc, rename=True)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        # an object rewritten in a store of the old layout drops its sidecar
        with contextlib.suppress(OSError):
            self._legacy_meta_path(path).unlink(missing_ok=True)
        return info

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BlobNotFound(f"no object at {key!r}") from None

    def open_range(self, key: str, start: int = 0, length: int | None = None) -> BlobReader:
        path = self._path(key)
        try:
            fh = path.open("rb")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BlobNotFound(f"no object at {key!r}") from None
        try:
            fh.seek(max(0, start))
        except BaseException:
            fh.close()
            raise
        return _FileSpan(fh, None if length is None else max(0, length))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        reader = self.open_range(key, start, length)
        try:
            return reader.read(max(0, length))
        finally:
            reader.close()

    def _stored_meta(self, key: str, path: Path, size: int) -> dict[str, object] | None:
        """The metadata recorded for the file at ``path`` if its size still matches; a store
        of the old layout has it beside the file."""
        for where in (self._meta_path(key), self._legacy_meta_path(path)):
            try:
                meta = json.loads(where.read_text())
                if isinstance(meta, dict) and int(meta["size"]) == size:
                    return meta
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return None

    def head(self, key: str) -> BlobInfo | None:
        path = self._path(key)
        try:
            found = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not S_ISREG(found.st_mode):
            return None
        meta = self._stored_meta(key, path, found.st_size)
        if meta is not None:
            return BlobInfo(key, str(meta["sha256"]), found.st_size, str(meta["content_type"]))
        digest, size = sha256_stream(self.open_range(key))
        return BlobInfo(key, digest, size)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        folder = prefix.strip("/")
        base = self.root / self._checked(folder) if folder else self.root
        # a link anywhere on the way (runs/R/escape -> /elsewhere, then prefix escape/sub) must
        # not turn the listing into one of another folder
        if not base.is_dir() or (base != self.root and self.root not in base.resolve().parents):
            return []
        keys = []
        # symlinks are never objects: one pointing outside the root must not leak or break this
        for parent, dirs, files in os.walk(base, followlinks=False):
            where = Path(parent)
            dirs[:] = [d for d in dirs if not (where / d).is_symlink()]
            if where == self.root:
                dirs[:] = [d for d in dirs if d != META_DIR]
            for name in files:
                path = where / name
                if not name.startswith(".") and not path.is_symlink() and path.is_file():
                    keys.append(path.relative_to(self.root).as_posix())
        return sorted(keys)

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        self._meta_path(key).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self._legacy_meta_path(path).unlink(missing_ok=True)

    def ping(self) -> bool:
        return self.root.is_dir() and os.access(self.root, os.W_OK)

    def describe(self) -> str:
        return f"file://{self.root}"

    def presigned_url(self, key: str, expires_s: int) -> str | None:
        validate_key(key)
        return None  # a directory has no signed URLs; the gateway serves the bytes itself
