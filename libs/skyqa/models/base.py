from __future__ import annotations

from typing import Protocol

from skyqa.v1 import model_pb2


class VisionModel(Protocol):
    name: str

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse: ...


def error_response(
    error_class: int, message: str, latency_s: float = 0.0, retry_after_s: float = 0.0
) -> model_pb2.GenerateResponse:
    return model_pb2.GenerateResponse(
        error_class=error_class,  # type: ignore[arg-type]
        error_message=message[:2000],
        latency_s=latency_s,
        retry_after_s=retry_after_s,
    )


def class_for_status(status: int) -> int:
    if status == 429:
        return model_pb2.ERROR_CLASS_RATE_LIMITED
    if status in (401, 403):
        return model_pb2.ERROR_CLASS_AUTH
    if status in (408, 504):
        return model_pb2.ERROR_CLASS_TIMEOUT
    if status >= 500:
        return model_pb2.ERROR_CLASS_SERVER
    return model_pb2.ERROR_CLASS_INVALID_REQUEST


RETRYABLE = {
    model_pb2.ERROR_CLASS_RATE_LIMITED,
    model_pb2.ERROR_CLASS_TIMEOUT,
    model_pb2.ERROR_CLASS_SERVER,
    model_pb2.ERROR_CLASS_UNAVAILABLE,
}
