"""Which model endpoints an evaluation request may name: only the operator's allow-list.

A request (scan or evaluation, from the gateway or the bus) names a model by kind and URL and
nothing else. The URL must be one the operator listed in ``evaluation.allowed_endpoints`` (or
``evaluation.models``, which always run); the key variable, timeouts and limits come from that
entry. So no request can point the evaluator at its own host, or make it send one of its
environment variables (S3 secret, NATS password, review token) anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from skyqa.errors import InvalidInput
from skyqa.settings import EvaluationSettings, ModelEndpoint
from skyqa.v1 import eval_pb2


class EndpointNotAllowed(InvalidInput):
    reason = "model_endpoint_not_allowed"


def normalise(kind: str, url: str) -> tuple[str, str]:
    """``(kind, url)`` compared case-insensitively on scheme and host, without a trailing '/'."""
    url = url.strip()
    if kind == "openai":
        parts = urlsplit(url)
        url = parts._replace(scheme=parts.scheme.lower(), netloc=parts.netloc.lower()).geturl()
    else:
        url = url.lower()
    return kind, url.rstrip("/")


def allowed(cfg: EvaluationSettings) -> dict[tuple[str, str], ModelEndpoint]:
    return {normalise(e.kind, e.url): e for e in [*cfg.allowed_endpoints, *cfg.models] if e.url}


def _limit(asked: int, cap: int) -> int:
    """The stricter of two rate limits, where 0 means none."""
    return min(v for v in (asked, cap) if v) if asked or cap else 0


def resolve(requested: Iterable[eval_pb2.ModelSpec], cfg: EvaluationSettings) -> list[ModelEndpoint]:
    """The operator's endpoint for each requested model, or :class:`EndpointNotAllowed`."""
    table = allowed(cfg)
    out = []
    for spec in requested:
        entry = table.get(normalise(spec.kind, spec.url))
        if entry is None:
            listed = ", ".join(sorted(url for _, url in table)) or "none"
            raise EndpointNotAllowed(
                f"model endpoint {spec.url!r} ({spec.kind}) is not on the operator's allow-list "
                f"(SKYQA_EVALUATION__ALLOWED_ENDPOINTS; allowed: {listed})"
            )
        out.append(
            entry.model_copy(
                update={
                    # an entry that names its model fixes it (a request cannot pick a pricier one)
                    "model": entry.model or spec.model,
                    "rpm": _limit(spec.rpm, entry.rpm),
                    "tpm": _limit(spec.tpm, entry.tpm),
                }
            )
        )
    return out
