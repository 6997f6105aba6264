"""A msgpack-rpc server, the protocol AirSim's clients speak (rpclib on the Unreal side).

A request is ``[0, msgid, method, params]`` and its answer ``[1, msgid, error, result]``; a
notification ``[2, method, params]`` gets none. Errors are strings in rpclib's wording, which
AirSim's Python clients raise as ``RPCError``: an unknown method or a wrong argument count, or
the failure of a call. A message that is not msgpack-rpc, or that breaks a bound of
:class:`Limits` (its size, its containers' lengths, the time it takes to arrive, the bytes all
unfinished requests hold), closes its connection with the reason logged; connections past the
most the server takes are closed as they come. Calls run one at a time per connection, each
connection's in a worker of its own, so a long call never delays other clients' pings.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import struct
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
READ_BYTES = 1 << 16


@dataclass(frozen=True)
class Limits:
    """What one client may make the server hold. A request is small (an image request is a few
    hundred bytes), so each bound sits far above any call the AirSim clients make and far below
    what would let a few connections exhaust memory."""

    max_message_bytes: int = 64 << 10  # one request, buffered until it is whole
    max_buffered_bytes: int = 8 << 20  # unfinished requests of every connection together
    max_connections: int = 64
    max_array_len: int = 1024
    max_map_len: int = 256
    max_str_len: int = 16 << 10
    max_bin_len: int = 16 << 10
    message_timeout_s: float = 10.0  # from a request's first byte to its last

    def unpacker(self) -> Any:
        return msgpack.Unpacker(
            raw=False,
            strict_map_key=False,
            # feed() appends a whole read to what is held; the size check follows it
            max_buffer_size=self.max_message_bytes + READ_BYTES,
            max_array_len=self.max_array_len,
            max_map_len=self.max_map_len,
            max_str_len=self.max_str_len,
            max_bin_len=self.max_bin_len,
            max_ext_len=0,
        )


class Refused(Exception):
    """A connection the server closes, and why (logged)."""


class RpcServer:
    def __init__(
        self,
        methods: dict[str, Callable[..., Any]],
        errors: tuple[type[Exception], ...],
        limits: Limits | None = None,
    ) -> None:
        self.methods = methods
        self.errors = errors  # exceptions whose message is the caller's fault, answered as is
        self.limits = limits or Limits()
        self._server: asyncio.Server | None = None
        self._sessions: set[asyncio.Task[Any]] = set()
        self._held = 0  # bytes of unfinished requests, every connection together
        # a connection has at most one call running, so one worker per connection means a call
        # that runs long (a render, a slow client's pattern) never delays another's ping; the
        # default executor has min(32, cores + 4) workers for the whole process
        self._pool = ThreadPoolExecutor(self.limits.max_connections, thread_name_prefix="rpc-call")

    async def start(self, host: str, port: int) -> int:
        # the stream reader pauses its socket past twice this, so a client that sends faster
        # than its calls are answered is held to a few reads
        self._server = await asyncio.start_server(self._serve, host, port, limit=READ_BYTES)
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in self._sessions:
                task.cancel()
            await asyncio.gather(*self._sessions, return_exceptions=True)
            await self._server.wait_closed()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def serve_forever(self) -> None:
        assert self._server is not None
        async with self._server:
            await self._server.serve_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        if len(self._sessions) >= self.limits.max_connections:
            log.warning("closing %s: %d connections are open, the most it takes", peer, len(self._sessions))
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._sessions.add(task)
        try:
            await self._session(reader, writer)
        except asyncio.CancelledError:
            pass  # the server is closing; Python 3.11's stream server logs a cancelled handler
        except Refused as exc:
            log.warning("closing %s: %s", peer, exc)
        except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, BufferError) as exc:
            log.warning("closing %s: not msgpack-rpc within this server's limits (%s)", peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._sessions.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        limits = self.limits
        unpacker = limits.unpacker()
        packer = msgpack.Packer(use_bin_type=True, use_single_float=True)
        # bytes fed to the unpacker, where its last whole request ended, and the bytes after
        # that (tell() alone counts the part of a request parsed so far)
        fed = done = held = 0
        try:
            while True:
                if held:  # a request has begun: it has this long to arrive whole
                    try:
                        data = await asyncio.wait_for(reader.read(READ_BYTES), limits.message_timeout_s)
                    except TimeoutError:
                        raise Refused(
                            f"a request of {held} bytes so far was not whole after "
                            f"{limits.message_timeout_s:g} s"
                        ) from None
                else:
                    data = await reader.read(READ_BYTES)
                if not data:
                    return
                if self._held + len(data) > limits.max_buffered_bytes:
                    raise Refused(
                        f"unfinished requests already hold {self._held} bytes, "
                        f"the most is {limits.max_buffered_bytes}"
                    )
                self._held += len(data)
                held += len(data)
                unpacker.feed(data)
                fed += len(data)
                for message in unpacker:
                    done = unpacker.tell()
                    answer = await self.handle(message)
                    if answer is not None:
                        for chunk in self._pack(answer, packer):
                            writer.write(chunk)
                        await writer.drain()
                self._held -= held
                held = fed - done
                self._held += held
                if held > limits.max_message_bytes:
                    raise Refused(f"a request is over {limits.max_message_bytes} bytes")
        finally:
            self._held -= held

    def _pack(self, answer: list[Any], packer: Any) -> list[bytes | memoryview]:
        try:
            return pack(answer, packer, [])
        except (OverflowError, ValueError, TypeError) as exc:
            # the call's result cannot go on the wire (a value a validator let through): the
            # client hears why, the connection stays
            log.error("answer to message %r does not pack: %s", answer[1], exc)
            packer.reset()
            return [packer.pack([RESPONSE, answer[1], f"rpclib: the result could not be sent: {exc}", None])]

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
            loop = asyncio.get_running_loop()
            return None, await loop.run_in_executor(self._pool, functools.partial(fn, *params))
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
