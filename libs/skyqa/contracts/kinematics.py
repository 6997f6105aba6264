"""A trajectory's kinematic check: its measured peaks against the limits it states."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from skyqa.contracts.base import Contract


class KinematicsCheck(Contract):
    """Peaks of the flown path against ``limits`` (``exceeded`` names the limits it breaks;
    :mod:`skyqa.kinematics` states them and measures).

    Reports written before the check existed say only ``{"checked": "false"}`` (UAV-DualCog's
    form); they still load, with nothing measured."""

    checked: bool
    max_speed_mps: float | None = None
    max_accel_mps2: float | None = None
    max_yaw_rate_dps: float | None = None
    max_camera_pitch_rate_dps: float | None = None
    within_limits: bool | None = None
    exceeded: list[str] = Field(default_factory=list)
    limits: dict[str, float] = Field(default_factory=dict)  # what it was measured against

    @model_validator(mode="before")
    @classmethod
    def _unchecked(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("checked") == "false":
            return {**data, "checked": False}
        return data
