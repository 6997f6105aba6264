"""The bus against a real nats-server: ack, dedupe, retry delay, dead letters, replicas, KV."""

from __future__ import annotations

import asyncio
import functools
import itertools
import time
from collections.abc import Awaitable, Callable

import pytest
from nats.aio.msg import Msg
from nats.js import api
from skyqa.bus import Bus, ConsumerConfigMismatch, Delivery, FanInTracker, topology
from skyqa.settings import BusSettings
from skyqa.v1 import common_pb2


def spec(
    unique: str, ack_wait_s: float | None = None, max_deliver: int | None = None
) -> topology.ConsumerSpec:
    return topology.ConsumerSpec(
        f"t-{unique}",
        topology.EVENTS_STREAM,
        f"skyqa.v1.eval.t{unique}",
        ack_wait_s=ack_wait_s,
        max_deliver=max_deliver,
    )


async def eventually(predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def test_publish_consume_ack_and_dedupe(bus: Bus, unique: str) -> None:
    seen: list[str] = []

    async def handler(msg: common_pb2.Progress, d: Delivery) -> None:
        seen.append(msg.message)
        assert d.run_id == "run-a"  # from the payload; the header says otherwise
        assert d.num_delivered == 1

    s = spec(unique)
    bus.handle(s, common_pb2.Progress, handler, stage="test")
    await bus.start()
    first = await bus.publish(
        s.filter_subject,
        common_pb2.Progress(run_id="run-a", message="one"),
        msg_id=f"m-{unique}",
        run_id="forged",
    )
    again = await bus.publish(
        s.filter_subject,
        common_pb2.Progress(run_id="run-a", message="one"),
        msg_id=f"m-{unique}",
        run_id="forged",
    )
    await bus.publish(
        s.filter_subject,
        common_pb2.Progress(run_id="run-a", message="two"),
        msg_id=f"n-{unique}",
        run_id="forged",
    )
    assert not first.duplicate
    assert again.duplicate
    await eventually(lambda: len(seen) == 2)
    await asyncio.sleep(0.5)
    assert seen == ["one", "two"]
    info = await bus.js.consumer_info(s.stream, s.durable)
    assert info.num_ack_pending == 0
    assert info.num_pending == 0


async def test_retry_uses_computed_delay_then_succeeds(bus: Bus, unique: str) -> None:
    times: list[float] = []

    async def flaky(msg: common_pb2.Progress, d: Delivery) -> None:
        times.append(time.monotonic())
        if d.num_delivered < 3:
            raise RuntimeError("transient")

    s = spec(unique, max_deliver=5)
    bus.handle(s, common_pb2.Progress, flaky, stage="test")
    await bus.start()
    await bus.publish(s.filter_subject, common_pb2.Progress(), msg_id=f"m-{unique}")
    await eventually(lambda: len(times) == 3)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # retry_base 0.2 s doubling: 0.2 then 0.4 (never the immediate redelivery of a bare NAK)
    assert gaps[0] >= 0.18
    assert gaps[1] >= 0.38
    await asyncio.sleep(0.6)
    assert len(times) == 3


async def test_dead_letter_after_max_deliver(bus: Bus, unique: str) -> None:
    calls = 0
    errors: list[common_pb2.ErrorEvent] = []
    dlq: list[Msg] = []

    async def always_fails(msg: common_pb2.Progress, d: Delivery) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("disk on fire")

    nc = bus.nc
    assert nc is not None
    s = spec(unique)
    await nc.subscribe(topology.error_subject("test"), cb=functools.partial(_append, errors))
    await nc.subscribe(topology.dlq_subject(s.filter_subject), cb=functools.partial(_append_raw, dlq))
    bus.handle(s, common_pb2.Progress, always_fails, stage="test")
    await bus.start()
    await bus.publish(
        s.filter_subject, common_pb2.Progress(run_id="r-dl"), msg_id=f"m-{unique}", run_id="r-dl"
    )
    await eventually(lambda: bool(errors) and bool(dlq))
    await asyncio.sleep(1.5)
    assert calls == 3  # max_deliver from the settings
    assert errors[0].reason == "max_deliver_exceeded"
    assert "disk on fire" in errors[0].message
    assert errors[0].run_id == "r-dl"
    assert errors[0].deliveries == 3
    headers = dlq[0].headers
    assert headers is not None
    assert headers["Skyqa-Reason"] == "max_deliver_exceeded"
    assert headers["Skyqa-Original-Subject"] == s.filter_subject


async def test_poison_payload_is_dead_lettered_at_once(bus: Bus, unique: str) -> None:
    calls = 0
    errors: list[common_pb2.ErrorEvent] = []

    async def handler(msg: common_pb2.Progress, d: Delivery) -> None:
        nonlocal calls
        calls += 1

    nc = bus.nc
    assert nc is not None
    await nc.subscribe(topology.error_subject("test"), cb=functools.partial(_append, errors))
    s = spec(unique)
    bus.handle(s, common_pb2.Progress, handler, stage="test")
    await bus.start()
    await bus.js.publish(s.filter_subject, b"\xff\xff\xff", headers={"Skyqa-Run-Id": "r-poison"})
    await eventually(lambda: bool(errors))
    assert calls == 0
    assert errors[0].reason == "invalid_input"
    assert errors[0].deliveries == 1
    assert "not a valid skyqa.v1.Progress" in errors[0].message


async def test_replicas_share_one_durable(bus_settings: BusSettings, unique: str) -> None:
    handled: dict[str, list[int]] = {"a": [], "b": []}

    def make(name: str) -> Callable[[common_pb2.Progress, Delivery], Awaitable[None]]:
        async def handler(msg: common_pb2.Progress, d: Delivery) -> None:
            await asyncio.sleep(0.05)
            handled[name].append(msg.done)

        return handler

    replicas = []
    for name in ("a", "b"):
        b = Bus(bus_settings, f"replica-{name}")
        await b.connect()
        await b.ensure_streams()
        b.handle(spec(unique), common_pb2.Progress, make(name), stage="test")
        await b.start()
        replicas.append(b)
    for i in range(30):
        await replicas[0].publish(
            spec(unique).filter_subject, common_pb2.Progress(done=i), msg_id=f"{unique}-{i}"
        )
    await eventually(lambda: len(handled["a"]) + len(handled["b"]) == 30)
    await asyncio.sleep(0.5)
    assert sorted(handled["a"] + handled["b"]) == list(range(30))  # each exactly once
    assert handled["a"]
    assert handled["b"]
    for b in replicas:
        await b.stop()


async def test_consumer_drift_is_detected(bus: Bus, unique: str) -> None:
    s = spec(unique)
    await bus.js.add_consumer(
        s.stream,
        api.ConsumerConfig(
            durable_name=s.durable, ack_policy=api.AckPolicy.NONE, filter_subject=s.filter_subject
        ),
    )
    with pytest.raises(ConsumerConfigMismatch, match="cannot be updated"):
        await bus.ensure_consumer(s)


async def test_editable_consumer_settings_are_applied(bus: Bus, unique: str) -> None:
    s = spec(unique, ack_wait_s=5.0, max_deliver=2)
    await bus.ensure_consumer(s)
    await bus.ensure_consumer(
        topology.ConsumerSpec(s.durable, s.stream, s.filter_subject, ack_wait_s=9.0, max_deliver=4)
    )
    info = await bus.js.consumer_info(s.stream, s.durable)
    assert (info.config.ack_wait, info.config.max_deliver) == (9.0, 4)


async def test_fan_in_announces_exactly_once(bus: Bus, unique: str) -> None:
    tracker = FanInTracker(await bus.kv(topology.FANIN_BUCKET))
    subject = f"skyqa.v1.eval.done{unique}"
    key = f"run{unique}.stage"

    async def worker(item: int) -> None:
        fan = await tracker.mark_done(key, str(item % 10), 10)  # items arrive twice
        if fan.complete and not fan.announced:
            await bus.publish(subject, common_pb2.Progress(), msg_id=f"completed:{unique}")
            await tracker.mark_announced(key)

    await asyncio.gather(*(worker(i) for i in range(20)))
    info = await bus.js.stream_info(topology.EVENTS_STREAM, subjects_filter=subject)
    assert info.state.subjects == {subject: 1}
    fan = await tracker.mark_done(key, "3", 10)
    assert fan.done == 10
    assert fan.announced


async def test_stop_does_not_hang_after_fetch_timeouts(bus_settings: BusSettings, unique: str) -> None:
    b = Bus(bus_settings, "drain")
    await b.connect()
    await b.ensure_streams()

    async def handler(msg: common_pb2.Progress, d: Delivery) -> None:
        return None

    b.handle(spec(unique), common_pb2.Progress, handler, stage="test")
    await b.start()
    await asyncio.sleep(1.5)  # several fetch timeouts
    started = time.monotonic()
    await b.stop()
    assert time.monotonic() - started < 3.0


async def _append(errors: list[common_pb2.ErrorEvent], msg: Msg) -> None:
    errors.append(common_pb2.ErrorEvent.FromString(msg.data))


async def _append_raw(out: list[Msg], msg: Msg) -> None:
    out.append(msg)
