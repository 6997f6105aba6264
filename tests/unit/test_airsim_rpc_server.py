"""The msgpack-rpc server behind ``skyqa sim serve``, over real loopback sockets: what one client
may make it hold (:class:`Limits`), and that calls which take long never starve others."""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgpack
import pytest
from skyqa.sim import rpc_server
from skyqa.sim.rpc_server import RpcServer


def _small(**changes: Any) -> Any:
    """Limits small enough to reach in a test."""
    limits: dict[str, Any] = {
        "max_message_bytes": 4096,
        "max_buffered_bytes": 10_000,
        "max_connections": 8,
        "max_array_len": 32,
        "max_map_len": 16,
        "max_str_len": 1024,
        "max_bin_len": 1024,
        "message_timeout_s": 0.5,
    }
    return rpc_server.Limits(**(limits | changes))


async def _serve(methods: dict[str, Callable[..., Any]], limits: Any = None) -> tuple[RpcServer, int]:
    server = RpcServer(methods, (ValueError,), limits) if limits else RpcServer(methods, (ValueError,))
    return server, await server.start("127.0.0.1", 0)


async def _call(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, *params: Any, msgid: int = 1
) -> list[Any]:
    writer.write(msgpack.packb([0, msgid, method, list(params)]))
    await writer.drain()
    unpacker = msgpack.Unpacker(raw=False)
    while data := await reader.read(1 << 16):
        unpacker.feed(data)
        for message in unpacker:
            return list(message)
    raise ConnectionError("closed")


async def _closed(reader: asyncio.StreamReader, within_s: float) -> bool:
    """Whether the server hangs up within ``within_s`` (answers are read and dropped)."""
    try:
        async with asyncio.timeout(within_s):
            while await reader.read(1 << 16):
                pass
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


@pytest.fixture
async def small() -> AsyncIterator[int]:
    server, port = await _serve({"ping": lambda: True, "echo": lambda x: x, "far": lambda: 1e300}, _small())
    yield port
    await server.close()


async def test_calls_that_never_return_leave_other_clients_pings_answered() -> None:
    # more stuck calls than the default executor has workers (min(32, cores + 4))
    release = threading.Event()
    server, port = await _serve({"ping": lambda: True, "stuck": lambda: release.wait(30)})
    clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(40)]
    try:
        for i, (_, w) in enumerate(clients):
            w.write(msgpack.packb([0, i, "stuck", []]))
            await w.drain()
        await asyncio.sleep(0.3)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        t0 = time.monotonic()
        async with asyncio.timeout(1.0):
            assert await _call(r, w, "ping") == [1, 1, None, True]
        assert time.monotonic() - t0 < 1.0
        w.close()
    finally:
        release.set()
        for _, w in clients:
            w.close()
        await server.close()


async def test_a_request_over_the_message_size_is_refused(
    small: int, caplog: pytest.LogCaptureFixture
) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", small)
    # a string header announcing 1 MB: the server must not wait for it, nor keep what comes
    w.write(b"\x94\x00\x01\xa4echo\x91\xdb" + struct.pack(">I", 1 << 20) + bytes(6000))
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        assert await _closed(r, 2.0)
    assert "a request is over 4096 bytes" in caplog.text
    w.close()


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (b"\xdd" + struct.pack(">I", 60_000_000), "exceeds max_array_len(32)"),  # 60 M nils
        (b"\x91\xdf" + struct.pack(">I", 1000), "exceeds max_map_len(16)"),
        (b"\x91\xdb" + struct.pack(">I", 2000) + b"x" * 2000, "exceeds max_str_len(1024)"),
        (b"\x91\xc6" + struct.pack(">I", 2000) + bytes(2000), "exceeds max_bin_len(1024)"),
    ],
    ids=["array", "map", "str", "bin"],
)
async def test_containers_past_their_length_are_refused(
    small: int, caplog: pytest.LogCaptureFixture, header: bytes, reason: str
) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", small)
    w.write(b"\x94\x00\x01\xa4echo" + header)
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        assert await _closed(r, 2.0)
    assert reason in caplog.text
    w.close()


async def test_unfinished_requests_of_all_connections_are_held_to_a_total(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # each holds 3,500 bytes of a request under the 4,096 a request may have; three are over
    # the 10,000 all may hold together (and they have long enough to go on)
    server, port = await _serve({"ping": lambda: True}, _small(message_timeout_s=30))
    part = b"\x94\x00\x01\xa4echo\x91\xc5" + struct.pack(">H", 4000) + bytes(3488)
    held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        for _, w in held:
            w.write(part)
            await w.drain()
            await asyncio.sleep(0.05)
        closed = [await _closed(r, 0.2) for r, _ in held]
    assert closed == [False, False, True]
    assert "unfinished requests already hold 7000 bytes, the most is 10000" in caplog.text
    # a whole request still fits, and is answered
    r, w = await asyncio.open_connection("127.0.0.1", port)
    assert await _call(r, w, "ping") == [1, 1, None, True]
    for _, hw in [*held, (r, w)]:
        hw.close()
    await server.close()


async def test_a_request_that_stops_arriving_is_dropped(small: int, caplog: pytest.LogCaptureFixture) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", small)
    assert await _call(r, w, "ping") == [1, 1, None, True]  # idle between requests: kept
    await asyncio.sleep(0.7)
    w.write(b"\x94\x00\x02\xa4ping")  # half a request
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        assert await _closed(r, 3.0)
    assert 0.4 < time.monotonic() - t0 < 2.0
    assert "a request of 8 bytes so far was not whole after 0.5 s" in caplog.text
    w.close()


async def test_connections_past_the_most_are_closed_and_their_slots_come_back(small: int) -> None:
    conns = [await asyncio.open_connection("127.0.0.1", small) for _ in range(10)]
    closed = [await _closed(r, 0.3) for r, _ in conns]
    assert closed == [False] * 8 + [True] * 2
    for _, w in conns:
        w.close()
    await asyncio.sleep(0.1)
    r, w = await asyncio.open_connection("127.0.0.1", small)
    assert await _call(r, w, "ping") == [1, 1, None, True]
    w.close()


async def test_a_result_that_cannot_be_sent_is_an_error_not_a_dropped_connection(small: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", small)
    msgid, error, result = (await _call(r, w, "far"))[1:]
    assert (msgid, result) == (1, None) and error.startswith("rpclib: the result could not be sent")
    assert await _call(r, w, "ping", msgid=2) == [1, 2, None, True]
    w.close()
