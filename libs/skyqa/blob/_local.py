from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from skyqa.blob._base import BlobInfo, sha256_hex
from skyqa.errors import BlobNotFound
from skyqa.keys import validate_key

_META_SUFFIX = ".skyqa-meta"


class LocalBlobStore:
    """Objects as files under ``root``; the embedded default.

    The sha256 and content type of each object live in a hidden sidecar written before the
    object itself is renamed into place, so ``head`` never hashes large files.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        path = (self.root / validate_key(key)).resolve()
        # validate_key already forbids '..'; this guards against symlinks inside the root.
        if self.root not in path.parents:
            raise BlobNotFound(f"key {key!r} resolves outside the store root")
        return path

    def _meta_path(self, path: Path) -> Path:
        return path.with_name(f".{path.name}{_META_SUFFIX}")

    def _atomic_write(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> BlobInfo:
        path = self._path(key)
        info = BlobInfo(key=key, sha256=sha256_hex(data), size=len(data), content_type=content_type)
        meta = {"sha256": info.sha256, "size": info.size, "content_type": content_type}
        self._atomic_write(self._meta_path(path), json.dumps(meta).encode())
        self._atomic_write(path, data)
        return info

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BlobNotFound(f"no object at {key!r}") from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        path = self._path(key)
        try:
            with path.open("rb") as fh:
                fh.seek(max(0, start))
                return fh.read(max(0, length))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise BlobNotFound(f"no object at {key!r}") from None

    def head(self, key: str) -> BlobInfo | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            meta = json.loads(self._meta_path(path).read_text())
            if int(meta["size"]) == path.stat().st_size:
                return BlobInfo(key, str(meta["sha256"]), int(meta["size"]), str(meta["content_type"]))
        except (FileNotFoundError, ValueError, KeyError):
            pass
        data = path.read_bytes()
        return BlobInfo(key, sha256_hex(data), len(data))

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list(self, prefix: str) -> list[str]:
        folder = prefix.strip("/")
        base = self.root / validate_key(folder) if folder else self.root
        # a link anywhere on the way (runs/R/escape -> /elsewhere, then prefix escape/sub) must
        # not turn the listing into one of another folder
        if not base.is_dir() or (base != self.root and self.root not in base.resolve().parents):
            return []
        keys = []
        # symlinks are never objects: one pointing outside the root must not leak or break this
        for parent, dirs, files in os.walk(base, followlinks=False):
            where = Path(parent)
            dirs[:] = [d for d in dirs if not (where / d).is_symlink()]
            for name in files:
                path = where / name
                if not name.startswith(".") and not path.is_symlink() and path.is_file():
                    keys.append(path.relative_to(self.root).as_posix())
        return sorted(keys)

    def delete(self, key: str) -> None:
        path = self._path(key)
        path.unlink(missing_ok=True)
        self._meta_path(path).unlink(missing_ok=True)

    def ping(self) -> bool:
        return self.root.is_dir() and os.access(self.root, os.W_OK)

    def describe(self) -> str:
        return f"file://{self.root}"

    def presigned_url(self, key: str, expires_s: int) -> str | None:
        validate_key(key)
        return None  # a directory has no signed URLs; the gateway serves the bytes itself
