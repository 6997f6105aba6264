from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISLNK, S_ISREG
from typing import BinaryIO

from skyqa.blob._base import (
    BlobInfo,
    BlobReader,
    RangeNotSatisfiable,
    read_span,
    sha256_hex,
    sha256_stream,
)
from skyqa.errors import BlobNotFound, InvalidKey
from skyqa.keys import validate_key

# <root>/.skyqa-meta/<key> holds the metadata of <root>/<key>: outside the data tree, so a
# release folder (runs/<run>/) copied or zipped out of the store holds only its files
META_DIR = ".skyqa-meta"
# stores written before the parallel tree kept it beside each object as .<name>.skyqa-meta;
# such a name is never a key: it is read only as the metadata of <name>
_LEGACY_SUFFIX = ".skyqa-meta"
_LEGACY_NAME = re.compile(r"^\..+\.skyqa-meta$")
# the longest file name common filesystems (ext4, xfs, btrfs, APFS, NTFS) hold; a longer key
# segment could never be stored, and asking the OS for it fails with ENAMETOOLONG
NAME_MAX = 255

# every step from the root is opened relative to the folder before it and never follows a
# symbolic link, so a link planted (or swapped in) anywhere under the root is never passed
# through, whether the store reads or writes
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO planted under the root must not hang; no effect on regular files
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# what opening a path answers when no object is there: missing, a file where a folder goes, or
# a symbolic link (ELOOP for the last step, ENOTDIR for a folder step opened O_DIRECTORY)
_NOT_THERE = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP}


def _not_there(exc: OSError) -> bool:
    return exc.errno in _NOT_THERE


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


def _descend(fd: int, names: list[str], *, create: bool = False, clear_stale: bool = False) -> int:
    """The folder ``names`` below the open folder ``fd`` (which this takes over), opened one step
    at a time without following links. ``create`` makes missing folders; ``clear_stale`` also
    removes a file or link standing where a folder goes (only ever in the metadata tree)."""
    try:
        for name in names:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
            try:
                step = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except NotADirectoryError:
                if not clear_stale:
                    raise
                os.unlink(name, dir_fd=fd)
                os.mkdir(name, 0o777, dir_fd=fd)
                step = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_temp(dir_fd: int, data: bytes) -> tuple[str, os.stat_result]:
    """``data`` as a new temporary file in the folder ``dir_fd``: its name and its stat (whose
    inode and mtime a rename keeps)."""
    while True:
        name = f".tmp-{secrets.token_hex(8)}"
        try:
            fd = os.open(name, _TEMP_FLAGS, 0o600, dir_fd=dir_fd)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            return name, os.fstat(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise


def _read_small(dir_fd: int, name: str) -> bytes:
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        if not S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise IsADirectoryError(errno.EISDIR, "not a regular file", name)
        return fh.read()


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_mtime_ns, a.st_size) == (b.st_ino, b.st_mtime_ns, b.st_size)


class LocalBlobStore:
    """Objects as files under ``root``; the embedded default.

    The sha256, size and content type of each object live in ``<root>/.skyqa-meta/<key>``,
    with the inode and mtime of the file they describe (a rename keeps both). They are written
    before the object is renamed into place, and ``head`` trusts them only while the file at the
    key is still that file; otherwise it hashes the file it opened and records that instead, so
    the sha it reports always belongs to the bytes there. Symbolic links under the root are no
    objects: a key whose path has one is never read, written through, listed or served.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.meta_root = self.root / META_DIR

    def _checked(self, key: str) -> list[str]:
        validate_key(key)
        segments = key.split("/")
        if segments[0] == META_DIR:
            raise InvalidKey(f"object key {key!r} names the store's metadata folder {META_DIR}/")
        for segment in segments:
            if _LEGACY_NAME.match(segment):
                raise InvalidKey(
                    f"object key {key!r} has a segment named like the metadata of an object "
                    f"(.<name>{_LEGACY_SUFFIX}), which is never an object"
                )
        longest = max(segments, key=len)
        if len(longest.encode()) > NAME_MAX:
            raise InvalidKey(
                f"object key segment {longest[:40]!r}... is {len(longest)} characters; "
                f"a file name holds at most {NAME_MAX}"
            )
        return segments

    def _root_fd(self) -> int:
        return os.open(self.root, _DIR_FLAGS)

    def _data_dir(self, parts: list[str], *, create: bool = False) -> int:
        """The open folder of the object ``parts``; OSError (see :func:`_not_there`) if a link,
        a file or nothing stands on the way."""
        return _descend(self._root_fd(), parts[:-1], create=create)

    def _meta_dir(self, parts: list[str], *, create: bool = False) -> int:
        # the metadata folder itself must not be a link (refused); below it, anything in the way
        # of a write is left by objects deleted by hand and is cleared
        meta = _descend(self._root_fd(), [META_DIR], create=create)
        return _descend(meta, parts[:-1], create=create, clear_stale=create)

    def _open_object(self, key: str, parts: list[str]) -> tuple[int, int]:
        """The open folder and the open file of the object at ``key`` (a regular file reached
        without passing a link), or BlobNotFound; the caller closes both."""
        try:
            dir_fd = self._data_dir(parts)
        except OSError as exc:
            if _not_there(exc):
                raise BlobNotFound(f"no object at {key!r}") from None
            raise
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            os.close(dir_fd)
            if _not_there(exc):
                raise BlobNotFound(f"no object at {key!r}") from None
            raise
        if not S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            os.close(dir_fd)
            raise BlobNotFound(f"no object at {key!r}")
        return dir_fd, fd

    def _write_meta(self, parts: list[str], doc: bytes) -> None:
        """Atomically replace the metadata of ``parts``, clearing what objects deleted by hand
        left in the way. Called once the object's folder exists in the data tree, so a file at
        one of the metadata's parents, or a folder where the metadata file goes, is stale."""
        dir_fd = self._meta_dir(parts, create=True)
        try:
            tmp, _ = _write_temp(dir_fd, doc)
            try:
                try:
                    os.replace(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                except IsADirectoryError:
                    shutil.rmtree(parts[-1], dir_fd=dir_fd)
                    os.replace(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
        finally:
            os.close(dir_fd)

    @staticmethod
    def _meta_doc(sha256: str, content_type: str, found: os.stat_result, tmp: str | None = None) -> bytes:
        doc: dict[str, object] = {
            "sha256": sha256,
            "size": found.st_size,
            "content_type": content_type,
            # which file this describes: a rename keeps both, a rewrite changes the mtime
            "ino": found.st_ino,
            "mtime_ns": found.st_mtime_ns,
        }
        if tmp is not None:
            doc["tmp"] = tmp  # the temporary name it has until the put renames it into place
        return json.dumps(doc).encode()

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> BlobInfo:
        parts = self._checked(key)
        info = BlobInfo(key=key, sha256=sha256_hex(data), size=len(data), content_type=content_type)
        try:
            dir_fd = self._data_dir(parts, create=True)
        except OSError as exc:
            if _not_there(exc):
                raise InvalidKey(f"object key {key!r} passes through a symbolic link or a file") from None
            raise
        try:
            # the object's bytes first, as a temporary file: its folders then exist, which is
            # what tells stale metadata in the way apart; the metadata, naming that file, is in
            # place before the file is renamed to the key
            tmp, written = _write_temp(dir_fd, data)
            try:
                self._refuse_link(key, dir_fd, parts[-1])
                try:
                    self._write_meta(parts, self._meta_doc(info.sha256, content_type, written, tmp))
                except OSError as exc:
                    if not _not_there(exc):
                        raise
                    # anything in the way below it is cleared: this is the folder itself
                    raise InvalidKey(
                        f"the store's metadata folder {self.meta_root} is a link or a file"
                    ) from None
                # renames the link itself if one was swapped in since: never writes through it
                os.replace(tmp, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
            # an object rewritten in a store of the old layout drops its sidecar
            with contextlib.suppress(OSError):
                os.unlink(f".{parts[-1]}{_LEGACY_SUFFIX}", dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        return info

    @staticmethod
    def _refuse_link(key: str, dir_fd: int, name: str) -> None:
        try:
            found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if S_ISLNK(found.st_mode):
            raise InvalidKey(f"object key {key!r} names a symbolic link, which is no object")

    def get(self, key: str) -> bytes:
        dir_fd, fd = self._open_object(key, self._checked(key))
        os.close(dir_fd)
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def open_range(self, key: str, start: int = 0, length: int | None = None) -> BlobReader:
        """See :class:`BlobStore`; a ``start`` at or past the end of a non-empty span raises
        :class:`RangeNotSatisfiable` (the object shrank since its size was read)."""
        dir_fd, fd = self._open_object(key, self._checked(key))
        os.close(dir_fd)
        fh = os.fdopen(fd, "rb")
        try:
            begin = max(0, start)
            size = os.fstat(fh.fileno()).st_size
            if begin > 0 and begin >= size:
                raise RangeNotSatisfiable(key, begin, size)
            fh.seek(begin)
        except BaseException:
            fh.close()
            raise
        return _FileSpan(fh, None if length is None else max(0, length))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return read_span(self.open_range, key, start, length)

    def _recorded(self, parts: list[str], dir_fd: int) -> dict[str, object] | None:
        """The metadata recorded for the object ``parts``: the metadata tree's if there is any,
        else (a store of the old layout) the sidecar beside the file."""
        with contextlib.suppress(OSError, ValueError):
            meta_fd = self._meta_dir(parts)
            try:
                doc = json.loads(_read_small(meta_fd, parts[-1]))
            finally:
                os.close(meta_fd)
            return doc if isinstance(doc, dict) else None
        with contextlib.suppress(OSError, ValueError):
            doc = json.loads(_read_small(dir_fd, f".{parts[-1]}{_LEGACY_SUFFIX}"))
            return doc if isinstance(doc, dict) else None
        return None

    @staticmethod
    def _describes(meta: dict[str, object] | None, found: os.stat_result) -> bool:
        """Whether ``meta`` was recorded for the file ``found``."""
        if meta is None:
            return False
        try:
            if int(str(meta["size"])) != found.st_size or not isinstance(meta["sha256"], str):
                return False
            if "ino" not in meta and "mtime_ns" not in meta:
                # written before files were named by inode and mtime (either layout): the size
                # is all there is to check
                return True
            return (int(str(meta["ino"])), int(str(meta["mtime_ns"]))) == (found.st_ino, found.st_mtime_ns)
        except (KeyError, ValueError):
            return False

    def head(self, key: str) -> BlobInfo | None:
        parts = self._checked(key)
        try:
            dir_fd, fd = self._open_object(key, parts)
        except BlobNotFound:
            return None
        try:
            fh = os.fdopen(fd, "rb")
            found = os.fstat(fh.fileno())
            meta = self._recorded(parts, dir_fd)
            content_type = str((meta or {}).get("content_type") or "application/octet-stream")
            if meta is not None and self._describes(meta, found):
                fh.close()
                return BlobInfo(key, str(meta["sha256"]), found.st_size, content_type)
            # the metadata is missing, or describes another file (a put between writing it and
            # renaming its file into place, or a file replaced by hand): hash the file opened
            digest, size = sha256_stream(_FileSpan(fh, None))
            self._rerecord(parts, dir_fd, meta, (digest, content_type), found, size)
            return BlobInfo(key, digest, size, content_type)
        finally:
            os.close(dir_fd)

    def _rerecord(
        self,
        parts: list[str],
        dir_fd: int,
        meta: dict[str, object] | None,
        what: tuple[str, str],
        hashed: os.stat_result,
        size: int,
    ) -> None:
        """Record the sha and type ``what`` of the file just hashed if that file is still the
        one at the key, unless the metadata there is a put's still renaming its file into place
        (best effort: a read-only store simply hashes again next time)."""
        with contextlib.suppress(OSError, ValueError):
            tmp = (meta or {}).get("tmp")
            if isinstance(tmp, str) and tmp.startswith(".tmp-") and "/" not in tmp:
                with contextlib.suppress(FileNotFoundError):
                    pending = os.stat(tmp, dir_fd=dir_fd, follow_symlinks=False)
                    if pending.st_ino == int(str((meta or {}).get("ino"))):
                        return
            now = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
            if size == hashed.st_size and _same_file(now, hashed):
                self._write_meta(parts, self._meta_doc(*what, hashed))

    def exists(self, key: str) -> bool:
        try:
            dir_fd, fd = self._open_object(key, self._checked(key))
        except BlobNotFound:
            return False
        os.close(fd)
        os.close(dir_fd)
        return True

    def list(self, prefix: str) -> list[str]:
        folder = prefix.strip("/")
        parts = [*self._checked(folder), ""] if folder else [""]
        try:
            # a link anywhere on the way (runs/R/escape -> /elsewhere, then prefix escape/sub)
            # must not turn the listing into one of another folder
            base_fd = self._data_dir(parts)
        except OSError as exc:
            if _not_there(exc):
                return []
            raise
        try:
            return sorted(self._walk(base_fd, f"{folder}/" if folder else "", at_root=not folder))
        finally:
            os.close(base_fd)

    @staticmethod
    def _walk(base_fd: int, prefix: str, at_root: bool) -> Iterator[str]:
        # fwalk never descends into a link; files are checked without following them either
        for where, dirs, files, where_fd in os.fwalk(".", dir_fd=base_fd, follow_symlinks=False):
            rel = "" if where == "." else f"{where[2:]}/"
            dirs[:] = [
                d for d in dirs if not _LEGACY_NAME.match(d) and not (at_root and not rel and d == META_DIR)
            ]
            for name in files:
                if name.startswith("."):  # temporary files and old-layout sidecars
                    continue
                with contextlib.suppress(OSError):
                    if S_ISREG(os.stat(name, dir_fd=where_fd, follow_symlinks=False).st_mode):
                        yield f"{prefix}{rel}{name}"

    def delete(self, key: str) -> None:
        parts = self._checked(key)
        try:
            dir_fd = self._data_dir(parts)
        except OSError as exc:
            if not _not_there(exc):
                raise
        else:
            try:
                with contextlib.suppress(FileNotFoundError):
                    found = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
                    if S_ISREG(found.st_mode):  # a link or a folder is no object: left alone
                        os.unlink(parts[-1], dir_fd=dir_fd)
                with contextlib.suppress(OSError):
                    os.unlink(f".{parts[-1]}{_LEGACY_SUFFIX}", dir_fd=dir_fd)
            finally:
                os.close(dir_fd)
        try:
            meta_fd = self._meta_dir(parts)
        except OSError as exc:
            if not _not_there(exc):
                raise
            return
        try:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(parts[-1], dir_fd=meta_fd)
        finally:
            os.close(meta_fd)

    def ping(self) -> bool:
        return self.root.is_dir() and os.access(self.root, os.W_OK)

    def describe(self) -> str:
        return f"file://{self.root}"

    def presigned_url(self, key: str, expires_s: int) -> str | None:
        validate_key(key)
        return None  # a directory has no signed URLs; the gateway serves the bytes itself
