"""HTTP byte ranges (RFC 9110 section 14) for release files, so a browser's video player can
seek in a mission video without the gateway reading the whole object for every jump."""

from __future__ import annotations

import re

from fastapi import HTTPException

# ASCII digits only: \d would take other scripts' digits, which int() reads but no client means
_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$", re.IGNORECASE | re.ASCII)
# more digits than any object's size has: read as "past every end" instead of handing int() a
# number so long it refuses it (Python's limit is 4300 digits)
_MAX_DIGITS = 19


def _offset(digits: str) -> int:
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= _MAX_DIGITS else 10**_MAX_DIGITS


def _unsatisfiable(header: str, size: int) -> HTTPException:
    return HTTPException(
        416,
        f"range {header[:60]!r} is outside the {size}-byte file",
        headers={"Content-Range": f"bytes */{size}"},
    )


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive ``(first, last)`` byte a ``Range`` header asks for, or None to send the
    whole object: no header, several ranges, another unit or an invalid range (all of which a
    server may ignore), or a suffix of an empty file. A valid range that selects nothing of the
    file is answered 416."""
    m = _RANGE.match(header.strip()) if header else None
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    first, last = m.group(1), m.group(2)
    if not first:  # a suffix: the last N bytes
        suffix = _offset(last)
        if suffix == 0:
            raise _unsatisfiable(header or "", size)
        if size == 0:
            # RFC 9110 14.1.1: on an empty file a non-zero suffix is the one satisfiable range,
            # and "shorter than the suffix" means all of it; no 206 can name an empty part, so
            # the answer is the whole (empty) file, 200
            return None
        return max(0, size - suffix), size - 1
    start = _offset(first)
    if last and _offset(last) < start:
        return None  # invalid, not unsatisfiable
    if start >= size:
        raise _unsatisfiable(header or "", size)
    return start, min(_offset(last), size - 1) if last else size - 1
