"""Path and query parameters every HTTP API of skyqa checks the same way."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException

from skyqa.keys import is_valid_id


def checked_run_id(run_id: str) -> str:
    """``run_id`` unchanged, or a 400: run ids become store keys, KV keys (``review.<run>``,
    where '.', '*' and '>' are syntax) and subjects, so nothing but an id gets that far."""
    if not is_valid_id(run_id):
        raise HTTPException(
            400,
            f"run id {run_id[:100]!r} must start with a letter or digit and hold only letters, "
            "digits, '_' and '-' (at most 96)",
        )
    return run_id


RunId = Annotated[str, Depends(checked_run_id)]
