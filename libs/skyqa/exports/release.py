"""A release folder as exporters read it: its ``release.json``, each family's rows validated by
the family's row model, and files addressed by release-relative paths that cannot leave it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyqa import integrity, keys
from skyqa.contracts.base import load_json, load_jsonl
from skyqa.errors import InvalidInput, InvalidKey
from skyqa.families import TaskFamily


@dataclass(frozen=True)
class Release:
    root: Path
    info: integrity.ReleaseInfo

    @classmethod
    def open(cls, folder: Path) -> Release:
        root = folder.resolve()
        path = root / integrity.RELEASE_INFO
        if not path.is_file():
            raise InvalidInput(
                f"{folder} has no {integrity.RELEASE_INFO}; pass a release folder (runs/<run>/)"
            )
        return cls(root, load_json(integrity.ReleaseInfo, path.read_bytes(), str(path)))

    def path(self, rel: str) -> Path:
        """The file a row names, relative to the release; a path that would leave the release
        folder (``..``, absolute, or through a link) is refused."""
        try:
            keys.validate_key(rel)
        except InvalidKey as exc:
            raise InvalidInput(f"a row names the file {rel!r}, which is not a release path: {exc}") from None
        try:
            path = (self.root / rel).resolve()
            present = path.is_file()
        except OSError as exc:
            raise InvalidInput(
                f"a row names the file {rel!r}, which cannot be read: {exc.strerror}"
            ) from None
        if self.root not in path.parents:
            raise InvalidInput(f"a row names the file {rel!r}, which leads outside the release")
        if not present:
            raise InvalidInput(f"a row names the file {rel!r}, which the release does not have")
        return path

    def output(self, out: Path) -> Path:
        """Where an export may write: anywhere but inside the release, whose checksums it would
        break."""
        target = out.resolve()
        if target == self.root or self.root in target.parents:
            raise InvalidInput(f"--out {out} is inside the release; write the export elsewhere")
        return target

    def rows(self, fam: TaskFamily[Any]) -> list[Any]:
        rel = self.info.manifests.get(fam.name)
        if rel is None:
            return []
        return load_jsonl(fam.row_model, self.path(rel).read_bytes(), rel)
