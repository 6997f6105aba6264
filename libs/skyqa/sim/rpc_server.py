"""A msgpack-rpc server, the protocol AirSim's clients speak (rpclib on the Unreal side).

A request is ``[0, msgid, method, params]`` and its answer ``[1, msgid, error, result]``; a
notification ``[2, method, params]`` gets none. Errors are strings in rpclib's wording, which
AirSim's Python clients raise as ``RPCError``: an unknown method or a wrong argument count, or
the failure of a call. A message that is not msgpack-rpc, or that breaks a bound of
:class:`Limits` (its size, its containers' lengths, the time it takes to arrive, the bytes all
unfinished requests hold), closes its connection with the reason logged. So does a client that
does not take its answer in time, that holds the most unsent bytes when all answers together
are over their bound, or that sends nothing for the idle timeout. A connection past the most the
server takes closes the one idle longest, or, with a call in flight on every one, is closed
itself. Calls run one at a time per connection, each connection's in a worker of its own, so a
long call never delays other clients' pings; a connection's next request is read only once its
last answer is down to the transport's high-water mark.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import struct
import time
from collections.abc import Callable, Iterator
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
    message_timeout_s: float = 10.0  # from a request's first byte to its last, whatever comes between
    # no request in flight and nothing received; long, as the pinned Cosys-AirSim client does not
    # reconnect (the cap's eviction, not this, keeps idle connections from locking clients out)
    idle_timeout_s: float = 3600.0
    write_timeout_s: float = 30.0  # for an answer to go down to the transport's high-water mark
    max_unsent_bytes: int = 256 << 20  # answers not yet taken by their clients, all together

    def unpacker(self) -> Any:
        return msgpack.Unpacker(
            raw=False,
            strict_map_key=True,  # AirSim's clients key their maps by name
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


@dataclass(eq=False)
class _Conn:
    peer: Any
    writer: asyncio.StreamWriter
    last: float  # when it last received bytes or sent an answer (time.monotonic)
    busy: bool = False  # a call running or its answer going out: never evicted

    def unsent(self) -> int:
        return self.writer.transport.get_write_buffer_size()


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
        self._sessions: set[asyncio.Task[Any]] = set()  # every connection's, evicted ones too
        self._conns: dict[asyncio.Task[Any], _Conn] = {}  # those counted against max_connections
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
        if len(self._conns) >= self.limits.max_connections and not self._evict_idlest(peer):
            log.warning(
                "closing %s: all %d connections it takes have a call in flight", peer, len(self._conns)
            )
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        conn = _Conn(peer, writer, time.monotonic())
        self._sessions.add(task)
        self._conns[task] = conn
        try:
            await self._session(reader, writer, conn)
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
            self._conns.pop(task, None)
            writer.close()  # once what is unsent has gone, which a client that never reads stops
            try:
                await asyncio.wait_for(writer.wait_closed(), self.limits.write_timeout_s)
            except (TimeoutError, asyncio.CancelledError):
                writer.transport.abort()
            except (ConnectionError, OSError):
                pass

    def _evict_idlest(self, peer: Any) -> bool:
        """Close the connection idle longest (none with a call in flight) to take ``peer``."""
        idle = [(conn.last, task) for task, conn in self._conns.items() if not conn.busy]
        if not idle:
            return False
        since, task = min(idle, key=lambda item: item[0])
        victim = self._conns.pop(task)
        log.warning(
            "closing %s: idle %.1f s, the longest of the %d connections it takes, for %s",
            victim.peer,
            time.monotonic() - since,
            self.limits.max_connections,
            peer,
        )
        victim.writer.transport.abort()  # its session sees the end of its stream and ends
        return True

    def _bound_unsent(self) -> None:
        """While answers not yet taken, all together, are over their bound, close the connection
        holding the most of them (its unsent bytes are dropped at once)."""
        limit = self.limits.max_unsent_bytes
        while (total := sum(conn.unsent() for conn in self._conns.values())) > limit:
            victim = max(self._conns.values(), key=_Conn.unsent)
            log.warning(
                "closing %s: answers not yet taken hold %d bytes, the most is %d; %d of them are its",
                victim.peer,
                total,
                limit,
                victim.unsent(),
            )
            victim.writer.transport.abort()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Conn) -> None:
        limits = self.limits
        unpacker = limits.unpacker()
        packer = msgpack.Packer(use_bin_type=True, use_single_float=True)
        # bytes fed to the unpacker, where its last whole request ended, and the bytes after
        # that (tell() alone counts the part of a request parsed so far)
        fed = done = held = 0
        loop = asyncio.get_running_loop()
        deadline = 0.0  # by when (loop time) the request begun, held > 0, must be whole
        try:
            while True:
                conn.busy = False
                if held:  # a request has begun: it has until its deadline to arrive whole
                    try:
                        async with asyncio.timeout_at(deadline):
                            data = await reader.read(READ_BYTES)
                    except TimeoutError:
                        raise Refused(
                            f"a request of {held} bytes so far was not whole after "
                            f"{limits.message_timeout_s:g} s"
                        ) from None
                else:
                    try:
                        data = await asyncio.wait_for(reader.read(READ_BYTES), limits.idle_timeout_s)
                    except TimeoutError:
                        raise Refused(f"nothing came for {limits.idle_timeout_s:g} s") from None
                if not data:
                    return
                conn.last = time.monotonic()
                unfinished_before, done_before = held, done
                if self._held + len(data) > limits.max_buffered_bytes:
                    raise Refused(
                        f"unfinished requests already hold {self._held} bytes, "
                        f"the most is {limits.max_buffered_bytes}"
                    )
                self._held += len(data)
                held += len(data)
                unpacker.feed(data)
                fed += len(data)
                for message in _unpacked(unpacker):
                    done = unpacker.tell()
                    conn.busy = True
                    answer = await self.handle(message)
                    if answer is not None:
                        await self._send(answer, packer, writer)
                    conn.last = time.monotonic()
                self._held -= held
                held = fed - done
                self._held += held
                if held > limits.max_message_bytes:
                    raise Refused(f"a request is over {limits.max_message_bytes} bytes")
                if held and (not unfinished_before or done != done_before):
                    # a request began in this read: its clock starts, and later reads never reset it
                    deadline = loop.time() + limits.message_timeout_s
        finally:
            self._held -= held

    async def _send(self, answer: list[Any], packer: Any, writer: asyncio.StreamWriter) -> None:
        """Queue ``answer`` and wait, at most the write timeout, until the transport is down to
        its high-water mark; until then this connection's next request is not read."""
        if writer.is_closing():  # the client went, or was closed, while the call ran
            raise ConnectionResetError
        for chunk in self._pack(answer, packer):
            writer.write(chunk)
        self._bound_unsent()
        try:
            await asyncio.wait_for(writer.drain(), self.limits.write_timeout_s)
        except TimeoutError:
            unsent = writer.transport.get_write_buffer_size()
            writer.transport.abort()  # a client that does not read would hold it forever
            raise Refused(
                f"an answer was not taken within {self.limits.write_timeout_s:g} s ({unsent} bytes unsent)"
            ) from None
        if writer.is_closing():  # drain() returns, not raises, once abort() has run
            raise ConnectionResetError

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


def _unpacked(unpacker: Any) -> Iterator[Any]:
    """The whole messages ``unpacker`` holds. A map key msgpack cannot hash (an array or a map;
    AirSim's clients send names) is not msgpack-rpc, not a crash of the connection's handler."""
    while True:
        try:
            message = next(unpacker)
        except StopIteration:
            return
        except TypeError as exc:
            raise ValueError(f"a map key is not a name ({exc})") from None
        yield message


def _fits(fn: Callable[..., Any], n: int) -> bool:
    try:
        inspect.signature(fn).bind(*([None] * n))
    except TypeError:
        return False
    return True
