"""Deliberately partial contract instances, for tests of rules that read only a few fields."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def partial_model(model: type[M], /, **fields: object) -> M:
    """``model`` with only ``fields`` set and nothing validated (pydantic's ``model_construct``).

    pydantic's mypy plugin types ``Model.model_construct`` like ``__init__``, with every required
    field required, so an instance that leaves fields out on purpose is built through the
    untyped base-class signature here, in one place, instead of at each call site."""
    return model.model_construct(None, **fields)
