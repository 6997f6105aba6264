"""Run state kept in JetStream KV so a dashboard or ``skyqa status`` can read it without services."""

from __future__ import annotations

from typing import Literal

from skyqa.contracts.base import Contract

Status = Literal["pending", "running", "completed", "failed"]


class StageState(Contract):
    done: int = 0
    total: int = 0
    status: Status = "pending"
    message: str = ""
    updated_at: float = 0.0


class RunState(Contract):
    run_id: str
    scene_id: str = ""
    status: Status = "pending"
    created_at: float = 0.0
    updated_at: float = 0.0
    stages: dict[str, StageState] = {}
    errors: list[str] = []
    outputs: dict[str, str] = {}
