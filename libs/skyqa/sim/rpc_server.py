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

from skyqa.sim._airsim_kernels import msgpack_f32_items

log = logging.getLogger("skyqa.sim.rpc")


class Raw:
    """msgpack a result carries as it is: large arrays packed by a kernel, not per item."""

    __slots__ = ("chunks",)

    def __init__(self, *chunks: bytes | memoryview) -> None:
        self.chunks = chunks


def float32_array(values: Any) -> Raw:
    """A msgpack array of float32 (what AirSim sends for float images), packed in one pass."""
    items = msgpack_f32_items(np.asarray(values))
    return Raw(b"\xdd" + struct.pack(">I", items.size // 5), items.data)


BIG = 1 << 16  # bytes values from this size go to the socket as they are, not copied
_NESTED = (dict, list, Raw, bytes, memoryview)  # what makes a container worth packing per item


def pack(obj: Any, packer: Any, out: list[bytes | memoryview]) -> list[bytes | memoryview]:
    """``obj`` as msgpack chunks appended to ``out``: any :class:`Raw` inside placed as it is,
    large bytes (images; a ``memoryview`` of an array's bytes too) after their header, uncopied."""
    if isinstance(obj, Raw):
        out += obj.chunks
    elif isinstance(obj, bytes | memoryview) and len(obj) >= BIG:
        out += [struct.pack(">BI", 0xC6, len(obj)), obj]  # bin 32
    elif isinstance(obj, dict) and any(isinstance(v, _NESTED) for v in obj.values()):
        out.append(packer.pack_map_header(len(obj)))
        for k, v in obj.items():
            out.append(packer.pack(k))
            pack(v, packer, out)
    elif isinstance(obj, list) and any(isinstance(v, _NESTED) for v in obj[:8]):
        out.append(packer.pack_array_header(len(obj)))
        for v in obj:
            pack(v, packer, out)
    else:
        out.append(packer.pack(obj))
    return out


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
                        for chunk in pack(answer, packer, []):
                            writer.write(chunk)
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
