"""The model contract over gRPC: a client adapter and a server for any :class:`VisionModel`."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from skyqa.models.base import VisionModel, error_response
from skyqa.v1 import model_pb2, model_pb2_grpc

_CODES = {
    grpc.StatusCode.DEADLINE_EXCEEDED: model_pb2.ERROR_CLASS_TIMEOUT,
    grpc.StatusCode.UNAVAILABLE: model_pb2.ERROR_CLASS_UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED: model_pb2.ERROR_CLASS_RATE_LIMITED,
    grpc.StatusCode.UNAUTHENTICATED: model_pb2.ERROR_CLASS_AUTH,
    grpc.StatusCode.PERMISSION_DENIED: model_pb2.ERROR_CLASS_AUTH,
    grpc.StatusCode.INVALID_ARGUMENT: model_pb2.ERROR_CLASS_INVALID_REQUEST,
}
MAX_MESSAGE = 64 * 1024 * 1024


class GrpcModel:
    def __init__(self, target: str, model: str = "", timeout_s: float = 60.0) -> None:
        self.name = model or target
        self.timeout_s = timeout_s
        opts = [
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_MESSAGE),
        ]
        self._channel = grpc.aio.insecure_channel(target, options=opts)
        self._stub = model_pb2_grpc.VisionLanguageModelStub(self._channel)

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse:
        started = time.monotonic()
        try:
            response: model_pb2.GenerateResponse = await self._stub.Generate(
                request, timeout=request.params.timeout_s or self.timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            return error_response(
                _CODES.get(exc.code(), model_pb2.ERROR_CLASS_SERVER),
                f"{exc.code().name}: {exc.details()}",
                time.monotonic() - started,
            )
        return response

    async def healthy(self) -> bool:
        stub = health_pb2_grpc.HealthStub(self._channel)
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        except grpc.aio.AioRpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    async def aclose(self) -> None:
        await self._channel.close()


class _Servicer(model_pb2_grpc.VisionLanguageModelServicer):
    def __init__(self, model: VisionModel) -> None:
        self.model = model

    async def Generate(
        self, request: model_pb2.GenerateRequest, context: grpc.aio.ServicerContext
    ) -> model_pb2.GenerateResponse:
        started = time.monotonic()
        response = await self.model.generate(request)
        response.latency_s = response.latency_s or time.monotonic() - started
        response.model = response.model or self.model.name
        return response


async def serve_grpc(
    model: VisionModel, host: str = "127.0.0.1", port: int = 0
) -> tuple[grpc.aio.Server, int]:
    """Start a server with the model and the standard health service; returns it and its port."""
    return await start_server(
        lambda server: model_pb2_grpc.add_VisionLanguageModelServicer_to_server(_Servicer(model), server),
        "skyqa.v1.VisionLanguageModel",
        host,
        port,
    )


async def start_server(
    add: Callable[[grpc.aio.Server], None], service: str, host: str, port: int
) -> tuple[grpc.aio.Server, int]:
    """A started server with what ``add`` registers and the standard health service reporting
    ``service`` (and the server) serving; returns it and its port."""
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_MESSAGE),
        ]
    )
    add(server)
    checker = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    await checker.set("", health_pb2.HealthCheckResponse.SERVING)
    await checker.set(service, health_pb2.HealthCheckResponse.SERVING)
    return server, bound
