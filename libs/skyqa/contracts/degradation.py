"""A recorded, seeded degradation of a view (applied and graded by :mod:`skyqa.degrade`)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from skyqa.contracts.base import Contract

Kind = Literal["none", "noise", "blur", "low_light", "compression", "masking"]
KINDS: tuple[Kind, ...] = get_args(Kind)


class Degradation(Contract):
    kind: Kind
    strength: float  # 0..1
    seed: int
    # masking: the lost rectangle, xyxy as fractions of the image
    region: list[float] = Field(default_factory=list)
