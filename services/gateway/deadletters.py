"""Dead-lettered messages, read from the DLQ stream and indexed for the API and dashboard.

Every service dead-letters through the bus (``Bus._give_up``), which copies the payload to
``skyqa.v1.dlq.<subject>`` with the reason in headers. An ordered consumer replays the stream
from its start, so a restarted gateway shows every dead letter the stream still retains.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from skyqa.bus import topology
from skyqa.bus.client import (
    DLQ_CLAIMED_RUN_ID,
    DLQ_CONSUMER,
    DLQ_DELIVERIES,
    DLQ_ERROR,
    DLQ_REASON,
    DLQ_SUBJECT,
    RUN_ID,
)

_DLQ_PREFIX = topology.dlq_subject("")


@dataclass(frozen=True)
class DeadLetter:
    sequence: int
    time: float
    run_id: str
    subject: str
    consumer: str
    reason: str
    error: str
    deliveries: int
    payload_bytes: int
    # what an undecodable message's header claimed; shown, never used to attribute it
    claimed_run_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse(msg: Msg) -> DeadLetter:
    headers = msg.headers or {}
    meta = msg.metadata
    stamp = meta.timestamp.timestamp() if meta.timestamp else 0.0
    try:
        deliveries = int(headers.get(DLQ_DELIVERIES, "0"))
    except ValueError:
        deliveries = 0
    return DeadLetter(
        sequence=int(meta.sequence.stream) if meta.sequence else 0,
        time=stamp,
        run_id=headers.get(RUN_ID, ""),
        subject=headers.get(DLQ_SUBJECT, msg.subject.removeprefix(_DLQ_PREFIX)),
        consumer=headers.get(DLQ_CONSUMER, ""),
        reason=headers.get(DLQ_REASON, "unknown"),
        error=headers.get(DLQ_ERROR, ""),
        deliveries=deliveries,
        payload_bytes=len(msg.data),
        claimed_run_id=headers.get(DLQ_CLAIMED_RUN_ID, ""),
    )


class DeadLetterLog:
    """The newest ``capacity`` dead letters, newest last."""

    def __init__(self, capacity: int = 2000) -> None:
        self._items: deque[DeadLetter] = deque(maxlen=capacity)
        self._seen: set[int] = set()
        self._sub: Any = None
        self.total = 0

    def add(self, item: DeadLetter) -> None:
        # an ordered consumer re-created after a reconnect may replay what it already gave
        if item.sequence in self._seen:
            return
        if len(self._items) == self._items.maxlen:
            self._seen.discard(self._items[0].sequence)
        self._items.append(item)
        self._seen.add(item.sequence)
        self.total += 1

    def recent(self, run_id: str | None = None, limit: int = 100) -> list[DeadLetter]:
        items = [d for d in self._items if run_id is None or d.run_id == run_id]
        return items[-limit:][::-1]

    async def follow(self, js: JetStreamContext) -> None:
        async def on_msg(msg: Msg) -> None:
            self.add(parse(msg))

        self._sub = await js.subscribe(
            f"{_DLQ_PREFIX}>",
            stream=topology.DLQ_STREAM,
            cb=on_msg,
            ordered_consumer=True,
            idle_heartbeat=5.0,
        )

    async def close(self) -> None:
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None
