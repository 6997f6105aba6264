from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from skyqa.errors import InvalidInput


class Contract(BaseModel):
    """Base of handoff models: unknown fields are errors, so drift is caught at the boundary."""

    model_config = ConfigDict(extra="forbid", frozen=False)


C = TypeVar("C", bound=BaseModel)


def dump_json(model: BaseModel) -> bytes:
    """Canonical bytes: sorted keys and fixed separators, so equal content is byte-identical."""
    return (
        json.dumps(model.model_dump(mode="json"), sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    ).encode()


def first_error(exc: ValidationError) -> tuple[str, str]:
    """Where the first validation error is (dotted, '' at the top) and what it says."""
    first = exc.errors()[0]
    return ".".join(str(p) for p in first["loc"]), str(first["msg"])


def load_json(model_type: type[C], data: bytes | str, what: str = "") -> C:
    try:
        return model_type.model_validate_json(data)
    except ValidationError as exc:
        where, msg = first_error(exc)
        name = what or model_type.__name__
        raise InvalidInput(f"{name} is invalid at {where or 'top level'}: {msg}") from None


def load_jsonl(model_type: type[C], data: bytes, what: str = "") -> list[C]:
    """Rows of a JSON-lines handoff file, each validated; blank lines are skipped."""
    return [load_json(model_type, line, what) for line in data.splitlines() if line.strip()]


def dump_jsonl(rows: list[Any]) -> bytes:
    return b"".join(
        json.dumps(r.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode() + b"\n"
        for r in rows
    )
