"""HTTP byte ranges (RFC 9110 section 14) for release files, so a browser's video player can
seek in a mission video without the gateway reading the whole object for every jump."""

from __future__ import annotations

import re

from fastapi import HTTPException

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$", re.IGNORECASE)


def _unsatisfiable(header: str, size: int) -> HTTPException:
    return HTTPException(
        416, f"range {header!r} is outside the {size}-byte file", headers={"Content-Range": f"bytes */{size}"}
    )


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The inclusive ``(first, last)`` byte a ``Range`` header asks for, or None to send the
    whole object: no header, several ranges, another unit or an invalid range (all of which a
    server may ignore). A valid range that selects nothing of the file is answered 416."""
    m = _RANGE.match(header.strip()) if header else None
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    first, last = m.group(1), m.group(2)
    if not first:  # a suffix: the last N bytes
        if int(last) == 0 or size == 0:
            raise _unsatisfiable(header or "", size)
        return max(0, size - int(last)), size - 1
    start = int(first)
    if last and int(last) < start:
        return None  # invalid, not unsatisfiable
    if start >= size:
        raise _unsatisfiable(header or "", size)
    return start, min(int(last), size - 1) if last else size - 1
