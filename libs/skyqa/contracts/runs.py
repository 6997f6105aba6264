"""Run state kept in JetStream KV, readable by a dashboard or ``skyqa status`` without services."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from skyqa.contracts.base import Contract

Status = Literal["pending", "running", "completed", "failed"]


class StageState(Contract):
    done: int = 0
    total: int = 0
    status: Status = "pending"
    message: str = ""
    updated_at: float = 0.0
    started_at: float = 0.0  # the stage's first progress event
    finished_at: float = 0.0  # when it completed; stages overlap, so these do not add up


class RunState(Contract):
    run_id: str
    scene_id: str = ""
    status: Status = "pending"
    created_at: float = 0.0
    updated_at: float = 0.0
    stages: dict[str, StageState] = Field(default_factory=dict)
    errors: list[str] = Field(default_factory=list)
    outputs: dict[str, str] = Field(default_factory=dict)
