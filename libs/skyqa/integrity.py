"""A release's seal and its check.

A release is the run folder ``runs/<run>/``. When the QA stage writes it, it also writes
``release.json`` (what made it: version, commit, scan request, seed, config hash, counts) and
``SHA256SUMS`` (one ``<sha256>  <path>`` line per file, the format ``sha256sum -c`` reads).
:func:`verify` rechecks a release folder against them: a changed, missing or unlisted file is a
problem, never silently accepted.

Evaluation results (``eval/``) are written into the run after the release and are not part of
it: :func:`seal_eval` writes ``eval/SHA256SUMS`` over them after every evaluation, and
:func:`verify_eval` checks them against it, so every file of the folder is covered by one of the
two. Hidden files (the local store's metadata sidecars) are not objects.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skyqa import keys
from skyqa.blob import BlobStore, sha256_hex
from skyqa.contracts.base import Contract, dump_json
from skyqa.errors import InvalidInput, InvalidKey

RELEASE_INFO = "release.json"
SUMS = "SHA256SUMS"
EVAL = "eval"
NOT_RELEASED = (f"{EVAL}/",)
MAX_SUMS_BYTES = 256 << 20  # about 2 million files
_LINE = re.compile(r"^([0-9a-f]{64})  (\S(?:.*\S)?)$")


class ReleaseInfo(Contract):
    skyqa_version: str
    git_commit: str  # "unknown" outside a git checkout without SKYQA_GIT_COMMIT
    run_id: str
    scene_id: str
    seed: int
    config_hash: str  # sha256 of the canonical scan request and the release settings below
    settings: dict[str, str]  # settings of this installation that change what ships
    scan_request: dict[str, Any]
    counts: dict[str, int]  # the QC funnel
    family_rows: dict[str, int]  # released rows per task family
    manifests: dict[str, str]  # task family -> its manifest, relative to the release


def config_hash(scan_request: dict[str, Any], settings: dict[str, str]) -> str:
    body = json.dumps({"scan_request": scan_request, "settings": settings}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def is_released(rel: str) -> bool:
    """Whether a path of the run folder is part of the release (and so of its checksums)."""
    if rel == SUMS or rel.startswith(NOT_RELEASED):
        return False
    return not any(part.startswith(".") for part in rel.split("/"))


def seal(store: BlobStore, run_id: str, info: ReleaseInfo) -> str:
    """Write ``release.json``, then ``SHA256SUMS`` over every released file of the run (itself
    excepted), hashing the stored bytes. Returns the key of ``SHA256SUMS``."""
    root = keys.run_prefix(run_id)
    store.put(f"{root}/{RELEASE_INFO}", dump_json(info), "application/json")
    return _write_sums(store, root, is_released)


def _write_sums(store: BlobStore, root: str, covered: Callable[[str], bool]) -> str:
    """Write ``<root>/SHA256SUMS`` over the stored files below ``root`` for which ``covered``
    holds (paths relative to ``root``), hashing the stored bytes. Returns its key."""
    lines = []
    for key in store.list(f"{root}/"):
        rel = key[len(root) + 1 :]
        if covered(rel):
            lines.append(f"{sha256_hex(store.get(key))}  {rel}\n")
    sums = f"{root}/{SUMS}"
    store.put(sums, "".join(lines).encode(), "text/plain")
    return sums


def reseal(store: BlobStore, run_id: str, rels: list[str]) -> str:
    """Rewrite the lines of ``SHA256SUMS`` of the released files ``rels`` (paths relative to the
    release) from their stored bytes, adding those it did not list: what a writer that changes
    a few files of a sealed release (the audit's QC files) calls, so ``skyqa verify`` still
    passes without hashing every video again. Raises :class:`InvalidInput` on a release that
    was never sealed. Returns the key of ``SHA256SUMS``."""
    root = keys.run_prefix(run_id)
    sums = f"{root}/{SUMS}"
    if not store.exists(sums):
        raise InvalidInput(f"run {run_id!r} has no {SUMS}: it was never sealed")
    fresh = {}
    for rel in rels:
        if not is_released(keys.validate_key(rel)):
            raise InvalidInput(f"{rel!r} is not a file of the release")
        fresh[rel] = sha256_hex(store.get(f"{root}/{rel}"))
    lines = []
    for line in store.get(sums).decode("utf-8", errors="replace").splitlines():
        m = _LINE.match(line)
        listed = m.group(2) if m else None
        if listed is not None and listed in fresh:
            line = f"{fresh.pop(listed)}  {listed}"
        lines.append(line + "\n")
    lines += [f"{digest}  {rel}\n" for rel, digest in sorted(fresh.items())]
    store.put(sums, "".join(lines).encode(), "text/plain")
    return sums


def _is_eval_output(rel: str) -> bool:
    """Whether a path inside ``eval/`` is an evaluation output (and so of ``eval/SHA256SUMS``)."""
    return rel != SUMS and not any(part.startswith(".") for part in rel.split("/"))


def seal_eval(store: BlobStore, run_id: str) -> str:
    """Write ``eval/SHA256SUMS`` over every evaluation output of the run, paths relative to
    ``eval/``; each writer of ``eval/`` calls it after writing. Returns its key."""
    return _write_sums(store, f"{keys.run_prefix(run_id)}/{EVAL}", _is_eval_output)


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    what: str  # "changed", "missing", "not listed in SHA256SUMS", "bad line (...)", ...

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


def verify(folder: Path) -> tuple[int, list[Problem]]:
    """Check a release folder against its ``SHA256SUMS``. Returns the number of files checked
    and every problem, in the order of the checksum file, then unlisted entries by path.

    Everything in the folder is untrusted: a checksum line that is not ``<sha256>  <relative
    path>``, a path through a link or to anything but a regular file, an unreadable file or
    folder, and any entry the checksum file does not list are problems, and nothing outside the
    folder is read. ``release.json`` must be listed. Raises ``FileNotFoundError`` when there is
    no ``SHA256SUMS`` and :class:`InvalidInput` when it is not a readable regular file.
    ``eval/`` is not checked here: see :func:`verify_eval`.
    """
    folder = folder.resolve()
    checked, problems = _verify(folder, _read_sums(folder / SUMS), is_released)
    if RELEASE_INFO not in checked:
        problems.append(Problem(RELEASE_INFO, "not listed in SHA256SUMS"))
    return len(checked), problems


def verify_eval(folder: Path) -> tuple[int, list[Problem]] | None:
    """Check a release folder's ``eval/`` against ``eval/SHA256SUMS`` as :func:`verify` checks
    the release (paths in the problems start with ``eval/``). None when there is no ``eval/``;
    an ``eval/`` without its checksum file is a problem, not a pass."""
    folder = folder.resolve()
    where = folder / EVAL
    if not where.exists() and not where.is_symlink():
        return None
    if where.is_symlink() or not where.is_dir():
        return 0, [Problem(EVAL, "not a folder inside the release")]
    try:
        text = _read_sums(where / SUMS)
    except FileNotFoundError:
        return 0, [
            Problem(
                f"{EVAL}/{SUMS}",
                "missing: the evaluation outputs have no checksums"
                " (evaluated before evaluations were sealed: evaluate again to write them)",
            )
        ]
    except InvalidInput as exc:
        return 0, [Problem(f"{EVAL}/{SUMS}", str(exc))]
    checked, problems = _verify(where, text, _is_eval_output)
    named = [Problem(f"{EVAL}/{p.path}", p.what.replace(SUMS, f"{EVAL}/{SUMS}")) for p in problems]
    return len(checked), named


def _verify(folder: Path, text: str, covered: Callable[[str], bool]) -> tuple[set[str], list[Problem]]:
    """The files ``text`` (a checksum file) lists and checks, and every problem; entries of the
    folder for which ``covered`` holds must be listed."""
    problems: list[Problem] = []
    listed: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        m = _LINE.match(line)
        if m is None:
            problems.append(Problem(f"{SUMS} line {n}", "bad line (want '<sha256>  <path>')"))
            continue
        digest, rel = m.groups()
        try:
            keys.validate_key(rel)
        except InvalidKey as exc:
            problems.append(Problem(rel, f"bad line ({exc})"))
            continue
        if rel in listed:
            problems.append(Problem(rel, "listed twice"))
            continue
        listed.add(rel)
        problem = _check_file(folder, rel, digest)
        if problem:
            problems.append(Problem(rel, problem))

    def unreadable(exc: OSError) -> None:
        problems.append(Problem(Path(str(exc.filename)).relative_to(folder).as_posix(), "unreadable folder"))

    for parent, dirs, files in os.walk(folder, onerror=unreadable):
        where = Path(parent)
        # a link to a folder is an entry, never followed
        names = sorted(files + [d for d in dirs if (where / d).is_symlink()])
        dirs[:] = sorted(d for d in dirs if not (where / d).is_symlink())
        for name in names:
            rel = (where / name).relative_to(folder).as_posix()
            if covered(rel) and rel not in listed:
                problems.append(Problem(rel, "not listed in SHA256SUMS"))
    return listed, problems


def _read_sums(path: Path) -> str:
    info = path.lstat()  # FileNotFoundError: not a sealed release
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(f"{SUMS} is not a regular file")
    if info.st_size > MAX_SUMS_BYTES:
        raise InvalidInput(f"{SUMS} is {info.st_size} bytes, more than a checksum file can be")
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InvalidInput(f"{SUMS} cannot be read: {exc.strerror}") from None


def _check_file(folder: Path, rel: str, digest: str) -> str:
    """What is wrong with one listed file, or ""."""
    path = folder / rel
    try:
        info = path.lstat()
        # every folder on the way must be the real folder of that name inside this one
        parent = path.parent.resolve(strict=True)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode) or parent != path.parent:
        return "not a regular file inside the release"
    try:
        return "" if _sha256_file(path) == digest else "changed"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def git_commit() -> str:
    """The commit this installation runs: ``SKYQA_GIT_COMMIT`` (images set it at build time),
    else the checkout this package lives in, read from ``.git`` without running git."""
    pinned = os.environ.get("SKYQA_GIT_COMMIT", "").strip()
    if re.fullmatch(r"[0-9a-f]{7,40}", pinned):
        return pinned
    for parent in Path(__file__).resolve().parents:
        git = parent / ".git"
        # only skyqa's own checkout (libs/skyqa beside .git), not a project it is installed in
        if git.is_dir() and (parent / "libs" / "skyqa").is_dir():
            head = _head(git)
            return head if re.fullmatch(r"[0-9a-f]{40}", head) else "unknown"
    return "unknown"


def _head(git: Path) -> str:
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head  # detached: the commit itself (the caller checks its form)
        ref = head[5:]
        if not re.fullmatch(r"refs/[A-Za-z0-9._/-]+", ref) or ".." in ref:
            return "unknown"
        loose = git / ref
        if loose.is_file():
            return loose.read_text().strip()
        packed = git / "packed-refs"
        for line in packed.read_text().splitlines() if packed.is_file() else []:
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha
    except OSError:
        pass
    return "unknown"
