"""An evaluation as asked for (after a release, or by an evaluation request on the bus): the
models, resolved through the operator's allow-list, the conditions and the request cap."""

from __future__ import annotations

from dataclasses import dataclass

from skyqa import scan
from skyqa.models.endpoints import resolve
from skyqa.settings import EvaluationSettings, ModelEndpoint
from skyqa.v1 import eval_pb2


@dataclass(frozen=True)
class Request:
    models: list[ModelEndpoint]
    conditions: list[str]
    budget: int | None


def resolve_request(spec: eval_pb2.EvaluationSpec, cfg: EvaluationSettings) -> Request:
    """Configured models plus the request's; the request's conditions, else the configured ones
    (checked the same way: settings are not validated against the evaluator's conditions)."""
    wanted = list(spec.conditions) or list(cfg.conditions)
    scan.validate_evaluation(eval_pb2.EvaluationSpec(models=spec.models, conditions=wanted))
    # a request may lower the operator's request cap, never raise it
    budget = min((b for b in (spec.budget, cfg.budget) if b), default=0) or None
    return Request([*cfg.models, *resolve(spec.models, cfg)], wanted, budget)
