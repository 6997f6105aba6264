"""A thin typed wrapper over nats-py JetStream.

Rules it enforces, each for a behaviour of nats-py or JetStream that bit a naive client:

- streams and durable consumers are declared with ``add_*`` and read back: nats-py's
  ``pull_subscribe(config=...)`` silently ignores changes to an existing durable;
- retries are ``nak(delay)`` with the delay computed in code, because consumer back-off
  does not apply to explicit NAKs;
- after ``max_deliver`` failed deliveries, or at once for input that can never succeed, the
  payload goes to the dead-letter stream with its reason and the message is terminated, and
  the run stages the message was working for are failed with that reason: the one its
  registration names for the decoded payload (``progress_stage``) and every one the failing
  delivery reported progress on (``note_progress``), so nobody waits on a stage for ever;
- every publish carries ``Nats-Msg-Id`` so a retried publish is deduplicated;
- shutdown unsubscribes pull subscriptions before draining, or drain hangs for its timeout.

It is one class over one connection (about 500 lines): declaring the topology, publishing,
the consume loop and dead-lettering share the JetStream context and the registrations, and each
rule above needs two of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import nats
import nats.errors
import nats.js.errors
from google.protobuf.message import DecodeError, Message
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from skyqa.blob import sha256_hex
from skyqa.bus import topology
from skyqa.bus.kv import JsonKV
from skyqa.bus.retry import retry_delay
from skyqa.errors import InvalidInput
from skyqa.settings import BusSettings
from skyqa.v1 import common_pb2

log = logging.getLogger("skyqa.bus")

M = TypeVar("M", bound=Message)

MSG_ID = "Nats-Msg-Id"
RUN_ID = "Skyqa-Run-Id"
TRACE_ID = "Skyqa-Trace-Id"
MSG_TYPE = "Skyqa-Type"
SERVICE = "Skyqa-Service"
# headers of a dead-lettered copy (``skyqa.v1.dlq.<subject>``)
DLQ_SUBJECT = "Skyqa-Original-Subject"
DLQ_CONSUMER = "Skyqa-Consumer"
DLQ_REASON = "Skyqa-Reason"
DLQ_ERROR = "Skyqa-Error"
DLQ_DELIVERIES = "Skyqa-Deliveries"
# the run id a publisher's header claimed for a payload that did not decode: kept for the
# operator, never used to attribute the failure to a run
DLQ_CLAIMED_RUN_ID = "Skyqa-Claimed-Run-Id"


# a stage read from a payload: an id's characters, long enough for a prefix and a 96-character id
_STAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")


def _claimed(msg: Msg, run_id: str) -> str:
    claimed = (msg.headers or {}).get(RUN_ID, "")
    return claimed if claimed and claimed != run_id else ""


def _reported(delivery: Delivery | None, known: list[str]) -> list[str]:
    return sorted((delivery.reported if delivery else set()) - set(known))


class ConsumerConfigMismatch(RuntimeError):
    """A durable exists with settings that cannot be changed in place."""


@dataclass
class Delivery:
    """What a handler knows about the message it is processing."""

    subject: str
    run_id: str
    trace_id: str
    num_delivered: int
    headers: dict[str, str]
    _msg: Msg
    # stages of ``run_id`` this delivery reported progress on (see ``note_progress``)
    reported: set[str] = field(default_factory=set)

    async def in_progress(self) -> None:
        with contextlib.suppress(Exception):
            await self._msg.in_progress()


# the delivery the current task is handling; tasks a handler starts inherit it
_current: contextvars.ContextVar[Delivery | None] = contextvars.ContextVar("skyqa_delivery", default=None)


def note_progress(run_id: str, stage: str) -> None:
    """Record that the delivery being handled reported progress on ``stage`` of ``run_id``.

    The progress reporter calls this, so a handler that opens a stage other than its
    registration's (an evaluation request's own stage, a second step of a service) has that
    stage failed too if the message is dead-lettered, without saying so anywhere. A report on
    another run than the delivery's is not its to fail and is not recorded."""
    delivery = _current.get()
    if delivery is not None and delivery.run_id == run_id:
        delivery.reported.add(stage)


Handler = Callable[[M, Delivery], Awaitable[None]]
# the run stage a message is handled as, read from its decoded payload
ProgressStage = Callable[[M], str]
# called after a dead letter whose error fails the run its payload names (InvalidInput.fails_run),
# once per stage to fail, with ``stage`` set to it
FailureHook = Callable[[common_pb2.ErrorEvent], Awaitable[None]]


@dataclass
class _Registration(Generic[M]):
    spec: topology.ConsumerSpec
    message_type: type[M]
    handler: Handler[M]
    stage: str
    concurrency: int
    progress_stage: ProgressStage[M] | None = None
    subs: list[Any] = field(default_factory=list)

    def stage_of(self, decoded: M) -> str:
        """The run stage ``decoded`` is handled as: ``progress_stage``'s answer when it is a
        well-formed stage name (it is read from a payload anyone allowed on the subject wrote),
        else ``stage``."""
        if self.progress_stage is None:
            return self.stage
        try:
            named = self.progress_stage(decoded)
        except Exception:
            log.exception("progress_stage of %s raised", self.spec.durable)
            return self.stage
        return named if _STAGE_NAME.match(named) else self.stage


class BusMetrics:
    """Hooks the service runtime fills with Prometheus metrics; no-ops by default."""

    def handled(self, subject: str, outcome: str, seconds: float) -> None: ...

    def published(self, subject: str) -> None: ...

    def in_flight(self, delta: int) -> None: ...


class Bus:
    def __init__(self, settings: BusSettings, service: str, metrics: BusMetrics | None = None) -> None:
        self.settings = settings
        self.service = service
        self.metrics = metrics or BusMetrics()
        self.nc: NATS | None = None
        self._js: JetStreamContext | None = None
        self._registrations: list[_Registration[Any]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.failure_hook: FailureHook | None = None
        self.last_fetch_at = time.monotonic()

    # -- connection ---------------------------------------------------------------------

    async def connect(self, retry_forever: bool = True) -> None:
        """Connect; services retry forever (readiness reports the outage), clients fail fast."""

        async def on_error(exc: Exception) -> None:
            # a failing client reports once through the raised error; services log every retry
            log.log(logging.WARNING if retry_forever else logging.DEBUG, "nats error: %s", exc)

        try:
            self.nc = await nats.connect(
                self.settings.nats_url,
                name=self.service,
                connect_timeout=self.settings.connect_timeout_s,
                max_reconnect_attempts=-1 if retry_forever else 1,  # 0 loops forever in nats-py
                reconnect_time_wait=1,
                allow_reconnect=retry_forever,
                drain_timeout=self.settings.drain_timeout_s,
                error_cb=on_error,
            )
        except (nats.errors.Error, OSError) as exc:
            raise ConnectionError(f"cannot connect to NATS at {self.settings.nats_url}: {exc}") from exc
        self._js = self.nc.jetstream()

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            raise RuntimeError("bus is not connected")
        return self._js

    @property
    def connected(self) -> bool:
        return self.nc is not None and self.nc.is_connected

    # -- topology -----------------------------------------------------------------------

    async def ensure_streams(self, specs: list[topology.StreamSpec] | None = None) -> None:
        for spec in specs or topology.streams(self.settings.duplicate_window_s):
            config = api.StreamConfig(
                name=spec.name,
                subjects=list(spec.subjects),
                retention=api.RetentionPolicy.LIMITS,
                storage=api.StorageType.FILE,
                max_age=spec.max_age_s,
                duplicate_window=spec.duplicate_window_s,
                max_msgs_per_subject=spec.max_msgs_per_subject,
            )
            try:
                await self.js.stream_info(spec.name)
                await self.js.update_stream(config)
            except nats.js.errors.NotFoundError:
                await self.js.add_stream(config)

    def _resolve(self, spec: topology.ConsumerSpec) -> topology.ConsumerSpec:
        return dataclasses.replace(
            spec,
            ack_wait_s=spec.ack_wait_s or self.settings.ack_wait_s,
            max_deliver=spec.max_deliver or self.settings.max_deliver,
        )

    async def ensure_consumer(self, spec: topology.ConsumerSpec) -> None:
        spec = self._resolve(spec)
        config = api.ConsumerConfig(
            durable_name=spec.durable,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            filter_subject=spec.filter_subject,
            ack_wait=spec.ack_wait_s,
            max_deliver=spec.max_deliver,
            max_ack_pending=spec.max_ack_pending,
        )
        try:
            await self.js.add_consumer(spec.stream, config)
        except nats.js.errors.APIError as exc:
            raise ConsumerConfigMismatch(
                f"consumer {spec.durable} on {spec.stream} cannot be updated ({exc.description}); "
                "delete it or choose a new durable name"
            ) from exc
        info = await self.js.consumer_info(spec.stream, spec.durable)
        actual = info.config
        expected = {
            "filter_subject": spec.filter_subject,
            "ack_wait": spec.ack_wait_s,
            "max_deliver": spec.max_deliver,
            "max_ack_pending": spec.max_ack_pending,
        }
        drift = {k: (v, getattr(actual, k)) for k, v in expected.items() if getattr(actual, k) != v}
        if drift:
            raise ConsumerConfigMismatch(f"consumer {spec.durable} kept old settings: {drift}")

    async def kv(self, bucket: str, history: int = 1, ttl_s: float | None = None) -> JsonKV:
        """The bucket, created on first use; ``ttl_s`` drops entries that old (sessions)."""
        try:
            store = await self.js.key_value(bucket)
        except nats.js.errors.BucketNotFoundError:
            store = await self.js.create_key_value(bucket=bucket, history=history, ttl=ttl_s)
        return JsonKV(store)

    # -- publishing ---------------------------------------------------------------------

    async def publish(
        self,
        subject: str,
        message: Message,
        *,
        msg_id: str,
        run_id: str = "",
        trace_id: str = "",
        headers: dict[str, str] | None = None,
    ) -> api.PubAck:
        """Publish a protobuf message; ``msg_id`` must be derived from the business key."""
        topology.check_message_type(subject, type(message))
        all_headers = {
            MSG_ID: msg_id,
            MSG_TYPE: message.DESCRIPTOR.full_name,
            SERVICE: self.service,
            RUN_ID: run_id,
            TRACE_ID: trace_id or uuid.uuid4().hex,
            **(headers or {}),
        }
        ack = await self.js.publish(subject, message.SerializeToString(), headers=all_headers)
        self.metrics.published(subject)
        return ack

    # -- consuming ----------------------------------------------------------------------

    def handle(
        self,
        spec: topology.ConsumerSpec,
        message_type: type[M],
        handler: Handler[M],
        *,
        stage: str,
        concurrency: int = 1,
        progress_stage: ProgressStage[M] | None = None,
    ) -> None:
        """``stage`` names the error subject; ``progress_stage``, when a message's work is
        reported on a run stage its payload decides (e.g. ``eval-<request>``), names that stage,
        which a dead letter of the message then fails."""
        topology.check_message_type(spec.filter_subject, message_type)
        spec = self._resolve(spec)
        self._registrations.append(
            _Registration(spec, message_type, handler, stage, max(1, concurrency), progress_stage)
        )

    async def start(self) -> None:
        for reg in self._registrations:
            await self.ensure_consumer(reg.spec)
            for i in range(reg.concurrency):
                sub = await self.js.pull_subscribe_bind(durable=reg.spec.durable, stream=reg.spec.stream)
                reg.subs.append(sub)
                self._tasks.append(
                    asyncio.create_task(self._fetch_loop(reg, sub), name=f"{reg.spec.durable}-{i}")
                )

    async def _fetch_loop(self, reg: _Registration[Any], sub: Any) -> None:
        while not self._stopping.is_set():
            self.last_fetch_at = time.monotonic()
            try:
                msgs = await sub.fetch(1, timeout=self.settings.fetch_timeout_s)
            except nats.errors.TimeoutError:
                continue
            except (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError):
                if self._stopping.is_set():
                    return
                await asyncio.sleep(0.5)
                continue
            except Exception as exc:  # server restart, API hiccups: keep the worker alive
                if self._stopping.is_set():
                    return
                log.warning("fetch on %s failed: %s", reg.spec.durable, exc)
                await asyncio.sleep(1.0)
                continue
            for msg in msgs:
                await self._dispatch(reg, msg)

    async def _dispatch(self, reg: _Registration[Any], msg: Msg) -> None:
        self._in_flight += 1
        self._idle.clear()
        self.metrics.in_flight(1)
        started = time.perf_counter()
        headers = dict(msg.headers or {})
        num_delivered = int(msg.metadata.num_delivered or 1)
        # Headers are whatever the publisher wrote: the run a message belongs to is the run id
        # inside its decoded payload, so a poison message cannot name someone else's run.
        run_id = ""
        # the run stages a dead letter of this message fails: the registration's until the
        # payload decodes, then the payload's own, then those the handler reported on
        stages = [reg.stage]
        delivery: Delivery | None = None
        token = None
        outcome = "ack"
        ticker = asyncio.create_task(self._keep_alive(msg, float(reg.spec.ack_wait_s or 30.0)))
        try:
            try:
                decoded = reg.message_type.FromString(msg.data)
            except DecodeError as exc:
                raise InvalidInput(
                    f"payload is not a valid {reg.message_type.DESCRIPTOR.full_name}: {exc}"
                ) from None
            run_id = str(getattr(decoded, "run_id", "") or "")
            stages = [reg.stage_of(decoded)]
            delivery = Delivery(msg.subject, run_id, headers.get(TRACE_ID, ""), num_delivered, headers, msg)
            token = _current.set(delivery)
            await reg.handler(decoded, delivery)
            await msg.ack()
        except InvalidInput as exc:
            outcome = "dlq"
            stages += _reported(delivery, stages)
            await self._give_up(reg, msg, run_id, exc.reason, str(exc), num_delivered, stages, exc.fails_run)
        except Exception as exc:
            if num_delivered >= (reg.spec.max_deliver or 1):
                outcome = "dlq"
                log.exception("giving up on %s after %d deliveries", msg.subject, num_delivered)
                reason = "max_deliver_exceeded"
                stages += _reported(delivery, stages)
                error = f"{type(exc).__name__}: {exc}"
                await self._give_up(reg, msg, run_id, reason, error, num_delivered, stages)
            else:
                outcome = "nak"
                delay = retry_delay(num_delivered, self.settings.retry_base_s, self.settings.retry_max_s)
                log.warning(
                    "handler for %s failed (delivery %d), retrying in %.1fs: %s: %s",
                    msg.subject,
                    num_delivered,
                    delay,
                    type(exc).__name__,
                    exc,
                )
                with contextlib.suppress(Exception):
                    await msg.nak(delay=delay)
        finally:
            if token is not None:
                _current.reset(token)
            ticker.cancel()
            self.metrics.handled(reg.spec.filter_subject, outcome, time.perf_counter() - started)
            self.metrics.in_flight(-1)
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def _keep_alive(self, msg: Msg, ack_wait_s: float) -> None:
        # Long renders and fusions would otherwise be redelivered to another replica mid-job.
        while True:
            await asyncio.sleep(max(0.5, ack_wait_s / 3))
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _give_up(
        self,
        reg: _Registration[Any],
        msg: Msg,
        run_id: str,
        reason: str,
        message: str,
        deliveries: int,
        stages: list[str],
        fails_run: bool = True,
    ) -> None:
        """Dead-letter ``msg``, publish its error event (on the registration's error subject,
        naming the first of ``stages``) and fail each of ``stages`` through the failure hook."""
        digest = sha256_hex(msg.data)
        event = common_pb2.ErrorEvent(
            run_id=run_id,
            stage=stages[0],
            subject=msg.subject,
            reason=reason,
            message=message[:2000],
            service=self.service,
            deliveries=deliveries,
            payload_sha256=digest,
        )
        log.error("rejecting %s for run %r: %s: %s", msg.subject, run_id, reason, message)
        stream_seq = msg.metadata.sequence.stream if msg.metadata.sequence else 0
        try:
            await self.js.publish(
                topology.dlq_subject(msg.subject),
                msg.data,
                headers={
                    MSG_ID: f"dlq:{reg.spec.stream}:{stream_seq}",
                    DLQ_SUBJECT: msg.subject,
                    DLQ_CONSUMER: reg.spec.durable,
                    DLQ_REASON: reason,
                    DLQ_ERROR: message[:1000],
                    DLQ_DELIVERIES: str(deliveries),
                    RUN_ID: run_id,
                    **({DLQ_CLAIMED_RUN_ID: claimed[:200]} if (claimed := _claimed(msg, run_id)) else {}),
                },
            )
            await self.publish(
                topology.error_subject(reg.stage),
                event,
                msg_id=f"error:{reg.spec.stream}:{stream_seq}",
                run_id=run_id,
            )
            await msg.term()
        except Exception:
            # Leave the message unacked: it is redelivered and rejected again later.
            log.exception("could not dead-letter %s; it will be redelivered", msg.subject)
            return
        if self.failure_hook is not None and fails_run:
            for stage in stages:
                failed = common_pb2.ErrorEvent()
                failed.CopyFrom(event)
                failed.stage = stage
                try:
                    await self.failure_hook(failed)
                except Exception:
                    log.exception("failure hook for %s (stage %s) raised", msg.subject, stage)

    # -- shutdown -----------------------------------------------------------------------

    async def stop(self, timeout_s: float = 30.0) -> None:
        self._stopping.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for reg in self._registrations:
            for sub in reg.subs:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
            reg.subs.clear()
        if self.nc is not None and not self.nc.is_closed:
            with contextlib.suppress(Exception):
                await self.nc.drain()
