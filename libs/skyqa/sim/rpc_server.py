"""A msgpack-rpc server, the protocol AirSim's clients speak (rpclib on the Unreal side).

A request is ``[0, msgid, method, params]`` and its answer ``[1, msgid, error, result]``; a
notification ``[2, method, params]`` gets none. Errors are strings in rpclib's wording, which
AirSim's Python clients raise as ``RPCError``: an unknown method or a wrong argument count, or
the failure of a call. A message that is not msgpack-rpc closes its connection. Calls run in a
worker thread one at a time per connection, so a long render never blocks other clients' pings.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import struct
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

log = logging.getLogger("skyqa.sim.rpc")


class Raw:
    """msgpack bytes a result carries as they are: large arrays packed by numpy, not per item."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def float32_array(values: Any) -> Raw:
    """A msgpack array of float32 (what AirSim sends for float images), packed in one pass."""
    a = np.ascontiguousarray(np.asarray(values, dtype=">f4").ravel())
    items = np.empty((a.size, 5), dtype=np.uint8)
    items[:, 0] = 0xCA
    items[:, 1:] = a.view(np.uint8).reshape(-1, 4)
    return Raw(b"\xdd" + struct.pack(">I", a.size) + items.tobytes())


def pack(obj: Any, packer: Any) -> bytes:
    """``obj`` as msgpack, with any :class:`Raw` inside placed as it is."""
    if isinstance(obj, Raw):
        return obj.data
    if isinstance(obj, dict) and any(isinstance(v, dict | list | Raw) for v in obj.values()):
        head = packer.pack_map_header(len(obj))
        return bytes(head) + b"".join(packer.pack(k) + pack(v, packer) for k, v in obj.items())
    if isinstance(obj, list) and any(isinstance(v, dict | list | Raw) for v in obj[:8]):
        return bytes(packer.pack_array_header(len(obj))) + b"".join(pack(v, packer) for v in obj)
    return bytes(packer.pack(obj))


REQUEST, RESPONSE, NOTIFY = 0, 1, 2
MAX_MESSAGE_BYTES = 64 << 20  # an image request is small; this bounds a hostile client


class RpcServer:
    def __init__(self, methods: dict[str, Callable[..., Any]], errors: tuple[type[Exception], ...]) -> None:
        self.methods = methods
        self.errors = errors  # exceptions whose message is the caller's fault, answered as is
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, limit=1 << 20)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_MESSAGE_BYTES, strict_map_key=False)
        packer = msgpack.Packer(use_bin_type=True, use_single_float=True)
        peer = writer.get_extra_info("peername")
        try:
            while data := await reader.read(1 << 16):
                unpacker.feed(data)
                for message in unpacker:
                    answer = await self.handle(message)
                    if answer is not None:
                        writer.write(pack(answer, packer))
                        await writer.drain()
        except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, BufferError) as exc:
            log.warning("closing %s: not msgpack-rpc (%s)", peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def handle(self, message: Any) -> list[Any] | None:
        """The answer to one message, or None for a notification."""
        if not isinstance(message, list) or not message or message[0] not in (REQUEST, NOTIFY):
            raise ValueError("a message is [0, msgid, method, params] or [2, method, params]")
        if message[0] == NOTIFY:
            if len(message) == 3 and isinstance(message[1], str) and isinstance(message[2], list):
                await self.call(message[1], message[2])
            return None
        if len(message) != 4 or not isinstance(message[1], int):
            raise ValueError("a request is [0, msgid, method, params]")
        _, msgid, method, params = message
        if not isinstance(method, str) or not isinstance(params, list):
            return [RESPONSE, msgid, "rpclib: a request names its method and lists its params", None]
        error, result = await self.call(method, params)
        return [RESPONSE, msgid, error, result]

    async def call(self, method: str, params: list[Any]) -> tuple[str | None, Any]:
        fn = self.methods.get(method)
        if fn is None or not _fits(fn, len(params)):
            return (
                f"rpclib: server could not find function '{method}' with argument count {len(params)}.",
                None,
            )
        try:
            return None, await asyncio.to_thread(fn, *params)
        except self.errors as exc:
            return f"rpclib: function '{method}' (called with {len(params)} arg(s)) threw an exception. " + (
                f"The exception contained this information: {exc}."
            ), None
        except Exception:  # a bug here must answer, not hang the client
            log.exception("%s failed", method)
            return f"rpclib: function '{method}' (called with {len(params)} arg(s)) threw an exception.", None


def _fits(fn: Callable[..., Any], n: int) -> bool:
    try:
        inspect.signature(fn).bind(*([None] * n))
    except TypeError:
        return False
    return True
