"""The msgpack-rpc server behind ``skyqa sim serve``, over real loopback sockets: what one client
may make it hold (:class:`Limits`), and that calls which take long never starve others."""

from __future__ import annotations

import asyncio
import logging
import socket
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


async def test_connections_past_the_most_close_the_idlest_and_their_slots_come_back(small: int) -> None:
    conns = []
    for _ in range(10):
        conns.append(await asyncio.open_connection("127.0.0.1", small))
        await asyncio.sleep(0.01)
    closed = await asyncio.gather(*(_closed(r, 0.3) for r, _ in conns))
    assert closed == [True] * 2 + [False] * 8  # the two idle longest made room
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


async def _not_reading(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection whose client takes little into its socket (and, in these tests, reads none)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock, limit=4096)


async def test_an_answer_the_client_never_takes_closes_it_within_the_write_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    big = bytes(4 << 20)
    server, port = await _serve({"ping": lambda: True, "big": lambda: big}, _small(write_timeout_s=0.5))
    r, w = await _not_reading(port)
    w.write(b"".join(msgpack.packb([0, i, "big", []]) for i in range(50)))
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        await asyncio.sleep(1.2)  # the answers pile up at the server, never read
        assert "an answer was not taken within 0.5 s" in caplog.text
    # what it holds is dropped at once, and the connection gone
    assert sum(conn.unsent() for conn in server._conns.values()) == 0
    assert await _closed(r, 2.0)
    pr, pw = await asyncio.open_connection("127.0.0.1", port)
    assert await _call(pr, pw, "ping") == [1, 1, None, True]
    for hw in (w, pw):
        hw.close()
    await server.close()


async def test_answers_not_taken_by_any_client_are_held_to_a_total(caplog: pytest.LogCaptureFixture) -> None:
    # each answer is 12 MiB (8 images), of which the kernel takes a few MiB: two or three fit in
    # 32 MiB, four do not; the connection holding the most is closed, its unsent bytes dropped,
    # and its next request is not run
    calls: list[int] = []

    def big(i: int) -> list[bytes]:
        calls.append(i)
        return [bytes(3 << 19)] * 8

    limits = _small(write_timeout_s=30, max_unsent_bytes=32 << 20)
    server, port = await _serve({"ping": lambda: True, "big": big}, limits)
    clients = [await _not_reading(port) for _ in range(4)]
    with caplog.at_level(logging.WARNING):
        for i, (_, w) in enumerate(clients):
            w.write(msgpack.packb([0, 1, "big", [i]]) + msgpack.packb([0, 2, "big", [i]]))
            await asyncio.sleep(0.2)
        unsent = sum(conn.unsent() for conn in server._conns.values())
        assert "answers not yet taken hold" in caplog.text
    assert 0 < unsent <= 32 << 20, unsent
    # every client's first call ran; the closed one's second did not, nor was written to it
    assert sorted(calls) == [0, 1, 2, 3], calls
    assert "socket.send() raised exception" not in caplog.text
    closed = await asyncio.gather(*(_closed(r, 1.0) for r, _ in clients))
    assert 1 <= sum(closed) <= 3, closed  # the others take their answers once they read
    pr, pw = await asyncio.open_connection("127.0.0.1", port)
    assert await _call(pr, pw, "ping") == [1, 1, None, True]
    for _, hw in [*clients, (pr, pw)]:
        hw.close()
    await server.close()


async def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, port = await _serve({"ping": lambda: True}, _small(idle_timeout_s=0.5))
    idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port)
    busy_r, busy_w = await asyncio.open_connection("127.0.0.1", port)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        for i in range(6):  # a call every 0.25 s keeps a connection
            assert await _call(busy_r, busy_w, "ping", msgid=i) == [1, i, None, True]
            await asyncio.sleep(0.25)
        assert await _closed(idle_r, 0.1)
    assert time.monotonic() - t0 < 2.0
    assert "nothing came for 0.5 s" in caplog.text
    assert not await _closed(busy_r, 0.1)
    for w in (idle_w, busy_w):
        w.close()
    await server.close()


async def test_at_the_connection_cap_a_newcomer_evicts_the_idlest_never_a_call_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    methods = {"ping": lambda: True, "stuck": lambda: release.wait(10)}
    server, port = await _serve(methods, _small(max_connections=4, idle_timeout_s=30))
    try:
        stuck = []
        for i in range(3):  # three slots busy with calls, taken first, so idle longest
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(msgpack.packb([0, i, "stuck", []]))
            stuck.append((r, w))
        await asyncio.sleep(0.1)
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.sleep(0.1)
        with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
            # the fifth gets in: the one idle slot is taken from its holder
            r, w = await asyncio.open_connection("127.0.0.1", port)
            assert await _call(r, w, "ping") == [1, 1, None, True]
            assert await _closed(idle_r, 0.5)
            assert "the longest of the 4 connections it takes" in caplog.text
            # with every slot busy with a call (the fifth's too), one more is closed
            w.write(msgpack.packb([0, 2, "stuck", []]))
            await asyncio.sleep(0.1)
            late_r, late_w = await asyncio.open_connection("127.0.0.1", port)
            assert await _closed(late_r, 0.5)
            assert "all 4 connections it takes have a call in flight" in caplog.text
        assert not any(await asyncio.gather(*(_closed(sr, 0.1) for sr, _ in stuck)))
        release.set()  # the calls in flight were never cut short: their answers come
        answers = [await _call(sr, sw, "ping", msgid=9) for sr, sw in stuck]
        assert answers == [[1, i, None, True] for i in range(3)], answers
    finally:
        release.set()
        for hw in (idle_w, w, late_w, *(sw for _, sw in stuck)):
            hw.close()
        await server.close()


async def test_a_request_that_trickles_in_is_closed_at_its_deadline(caplog: pytest.LogCaptureFixture) -> None:
    # one byte every 0.3 s of a 200-byte string: each read comes well within the 1 s a request
    # has, the request as a whole does not
    server, port = await _serve({"echo": lambda x: x}, _small(message_timeout_s=1.0))
    r, w = await asyncio.open_connection("127.0.0.1", port)

    async def trickle() -> None:
        w.write(b"\x94\x00\x01\xa4echo\x91\xd9\xc8")
        for _ in range(200):
            await asyncio.sleep(0.3)
            if w.is_closing():
                return
            w.write(b"x")

    sender = asyncio.create_task(trickle())
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, "skyqa.sim.rpc"):
        assert await _closed(r, 3.0)
    took = time.monotonic() - t0
    sender.cancel()
    assert 0.9 < took < 1.5, took
    assert "was not whole after 1 s" in caplog.text
    w.close()
    await server.close()


class _LenientKeys(rpc_server.Limits):
    """Limits whose unpacker takes any map key, as this server's did: msgpack then raises
    TypeError for a key it cannot hash."""

    def unpacker(self) -> Any:
        return msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=1 << 20)


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (_small(), b"\x94\x00\x01\xabsimGetImages\x91\x91\x81\x91\x01\x01"),  # {[1]: 1}
        (_small(), b"\x94\x00\x01\xa4echo\x91\x81\x80\x01"),  # {{}: 1}
        (_small(), b"\x94\x00\x01\xa4echo\x91\x81\x01\x01"),  # {1: 1}: AirSim's keys are names
        (_LenientKeys(), b"\x94\x00\x01\xabsimGetImages\x91\x91\x81\x91\x01\x01"),
    ],
    ids=["array-key", "map-key", "int-key", "array-key-lenient-unpacker"],
)
async def test_map_keys_that_are_not_names_close_the_connection_cleanly(
    caplog: pytest.LogCaptureFixture, limits: Any, message: bytes
) -> None:
    server, port = await _serve(
        {"ping": lambda: True, "echo": lambda x: x, "simGetImages": lambda x: x}, limits
    )
    r, w = await asyncio.open_connection("127.0.0.1", port)
    with caplog.at_level(logging.WARNING):
        w.write(message)
        assert await _closed(r, 2.0)
        pr, pw = await asyncio.open_connection("127.0.0.1", port)
        assert await _call(pr, pw, "ping") == [1, 1, None, True]
    assert "not msgpack-rpc within this server's limits" in caplog.text
    assert "Unhandled exception" not in caplog.text and "Traceback" not in caplog.text, caplog.text
    for hw in (w, pw):
        hw.close()
    await server.close()
