"""The world-model contract: ``rollout(context_frames, actions) -> frames`` over gRPC.

:class:`WorldModel` is what the evaluator calls; :class:`GrpcWorldModel` reaches any server of
``skyqa.v1.WorldModel``, and :func:`serve_world_model` puts any :class:`WorldModel` behind one
(with the standard health service), so a model in another process or language plugs in the way
the vision-language models do. A model's frames are untrusted: every one must be a PNG of the
requested size at a requested index, or the rollout fails with :class:`RolloutFailed`.
"""

from __future__ import annotations

import io
from typing import Protocol

import grpc
import numpy as np
from numpy.typing import NDArray
from PIL import Image

from skyqa.actions.space import ACTIONS
from skyqa.errors import InvalidInput
from skyqa.keys import validate_id
from skyqa.models.grpc import MAX_MESSAGE, start_server
from skyqa.v1 import world_model_pb2, world_model_pb2_grpc

MAX_CONTEXT = 16
MAX_ACTIONS = 400
MAX_PIXELS = 4096 * 3072
MAX_RETURN_PIXELS = 400 * 1280 * 720  # a server holds the frames it returns
Frames = dict[int, NDArray[np.uint8]]


class RolloutFailed(Exception):
    """A rollout that produced no usable frames: unreachable, refused, or malformed output."""


class WorldModel(Protocol):
    name: str
    privileged: bool  # receives the scene and root state (reference models only)

    async def rollout(self, request: world_model_pb2.RolloutRequest) -> Frames: ...


def frame_count(request: world_model_pb2.RolloutRequest) -> int:
    return len(request.actions) * request.frames_per_action


def wanted(request: world_model_pb2.RolloutRequest) -> list[int]:
    return sorted(set(request.return_frames)) or list(range(frame_count(request)))


def validate_request(request: world_model_pb2.RolloutRequest) -> None:
    """What a server refuses (InvalidInput says what to fix)."""
    if not 1 <= len(request.context_frames) <= MAX_CONTEXT:
        raise InvalidInput(
            f"a rollout needs 1..{MAX_CONTEXT} context frames, got {len(request.context_frames)}"
        )
    if not 1 <= len(request.actions) <= MAX_ACTIONS:
        raise InvalidInput(f"a rollout needs 1..{MAX_ACTIONS} actions, got {len(request.actions)}")
    unknown = sorted(set(request.actions) - set(ACTIONS))
    if unknown:
        raise InvalidInput(f"unknown actions {unknown}; known: {', '.join(ACTIONS)}")
    if not 1 <= request.frames_per_action <= 60:
        raise InvalidInput(f"frames per action must be 1..60, got {request.frames_per_action}")
    if not (request.width >= 16 and request.height >= 16 and request.width * request.height <= MAX_PIXELS):
        raise InvalidInput(f"frame size {request.width}x{request.height} is out of range")
    if any(i >= frame_count(request) for i in request.return_frames):
        raise InvalidInput(f"return frames must be below the rollout's {frame_count(request)} frames")
    if len(wanted(request)) * request.width * request.height > MAX_RETURN_PIXELS:
        raise InvalidInput(
            f"a rollout returns at most {MAX_RETURN_PIXELS // 1_000_000} Mpixels; ask for fewer frames"
        )
    if request.HasField("privileged") and request.privileged.scene_id:
        validate_id(request.privileged.scene_id, "scene id")


def decode_png(data: bytes, width: int, height: int, what: str) -> NDArray[np.uint8]:
    try:
        img = Image.open(io.BytesIO(data))
        if img.format != "PNG" or img.size != (width, height):
            raise ValueError(f"{img.format} {img.size[0]}x{img.size[1]}")
        return np.asarray(img.convert("RGB"))
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise RolloutFailed(f"{what} is not a {width}x{height} PNG ({exc})") from None


def encode_png(rgb: NDArray[np.uint8]) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class GrpcWorldModel:
    def __init__(
        self, target: str, name: str = "", timeout_s: float = 600.0, privileged: bool = False
    ) -> None:
        self.name = name or target
        self.privileged = privileged
        self.timeout_s = timeout_s
        opts = [
            ("grpc.max_send_message_length", MAX_MESSAGE),
            ("grpc.max_receive_message_length", MAX_MESSAGE),
        ]
        self._channel = grpc.aio.insecure_channel(target, options=opts)
        self._stub = world_model_pb2_grpc.WorldModelStub(self._channel)

    async def rollout(self, request: world_model_pb2.RolloutRequest) -> Frames:
        want = set(wanted(request))
        out: Frames = {}
        try:
            async for frame in self._stub.Rollout(request, timeout=self.timeout_s):
                if frame.index not in want or frame.index in out:
                    raise RolloutFailed(
                        f"{self.name} sent frame {frame.index}, which was not asked for or came twice"
                    )
                out[frame.index] = decode_png(
                    frame.png, request.width, request.height, f"frame {frame.index}"
                )
        except grpc.aio.AioRpcError as exc:
            raise RolloutFailed(f"{self.name}: {exc.code().name}: {exc.details()}") from None
        missing = sorted(want - set(out))
        if missing:
            raise RolloutFailed(
                f"{self.name} did not send frames {missing[:5]}{'...' if len(missing) > 5 else ''}"
            )
        return out

    async def aclose(self) -> None:
        await self._channel.close()


class _Servicer(world_model_pb2_grpc.WorldModelServicer):
    def __init__(self, model: WorldModel) -> None:
        self.model = model

    async def Rollout(self, request: world_model_pb2.RolloutRequest, context: grpc.aio.ServicerContext):  # type: ignore[no-untyped-def]
        try:
            validate_request(request)
            frames = await self.model.rollout(request)
        except InvalidInput as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            return
        except RolloutFailed as exc:
            await context.abort(grpc.StatusCode.INTERNAL, str(exc))
            return
        for index in wanted(request):
            yield world_model_pb2.RolloutFrame(index=index, png=encode_png(frames[index]))


async def serve_world_model(
    model: WorldModel, host: str = "127.0.0.1", port: int = 0
) -> tuple[grpc.aio.Server, int]:
    """Start a server with the model and the standard health service; returns it and its port."""
    return await start_server(
        lambda server: world_model_pb2_grpc.add_WorldModelServicer_to_server(_Servicer(model), server),
        "skyqa.v1.WorldModel",
        host,
        port,
    )
