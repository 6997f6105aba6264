"""The stage protocol: scatter jobs, gather their results, announce completion exactly once.

Every stage that fans work out (capture jobs, still renders, mission videos, label requests) and
fans the results back in goes through here, so "all N of this run are done" is counted in one
KV document per run and stage, the completion event is published once however many replicas see
a last result, and a run's progress reads the same way for every stage:

    if not await stage.scatter(run_id, topology.RENDER_JOB, jobs, trace_id, "rendering 3 views"):
        await finish(...)  # nothing to wait for
    ...
    if await stage.gathered(run_id, done.correlation, total, f"rendered {done.correlation}"):
        await finish(...)  # this caller saw the last result first

where ``finish`` builds the stage's event and calls :meth:`Stage.announce`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from google.protobuf.message import Message

from skyqa.v1 import common_pb2

if TYPE_CHECKING:
    from skyqa.runtime.service import Service


@dataclass(frozen=True)
class Completion:
    """What a stage announces: its event on ``subject`` and the run's final progress line."""

    subject: str
    event: Message
    done: int
    total: int
    message: str
    outputs: Mapping[str, str] = field(default_factory=dict)


class Stage:
    """One stage of a service, e.g. ``Stage(svc, "qa")``; replicas share its KV documents."""

    def __init__(self, svc: Service, name: str) -> None:
        self.svc = svc
        self.name = name

    def _key(self, run_id: str) -> str:
        return f"{run_id}.{self.name}"

    async def scatter(
        self,
        run_id: str,
        subject: str,
        jobs: Sequence[tuple[str, Message]],
        trace_id: str,
        message: str,
        scene_id: str = "",
    ) -> bool:
        """Report 0 of N, then publish one job per ``(key, message)``, deduplicated by
        ``<subject>:<run>:<key>`` so a redelivered request publishes nothing new.

        With no jobs the stage's fan-in is marked complete and False is returned: the caller
        announces at once instead of waiting for results that will never come.
        """
        progress, fanin = self.svc.require()
        await progress.report(run_id, self.name, 0, len(jobs), message=message, scene_id=scene_id)
        if not jobs:
            await fanin.mark_done(self._key(run_id), "none", 1)
            return False
        await self.publish(run_id, subject, jobs, trace_id)
        return True

    async def publish(
        self, run_id: str, subject: str, jobs: Sequence[tuple[str, Message]], trace_id: str
    ) -> None:
        """Publish jobs outside a scatter (a reviewer asking again for one label) with the same
        deduplication: the key says what makes a job new."""
        for key, job in jobs:
            await self.svc.bus.publish(
                subject, job, msg_id=f"{subject}:{run_id}:{key}", run_id=run_id, trace_id=trace_id
            )

    async def gathered(self, run_id: str, item: str, total: int, message: str) -> bool:
        """Count ``item`` (once, however often it is redelivered) among ``total`` and report it;
        True for the caller that should announce: all are done and nobody has announced yet."""
        progress, fanin = self.svc.require()
        fan = await fanin.mark_done(self._key(run_id), item, total)
        await progress.report(run_id, self.name, fan.done, fan.total, message=message)
        return fan.complete and not fan.announced

    async def is_announced(self, run_id: str) -> bool:
        _, fanin = self.svc.require()
        return await fanin.is_announced(self._key(run_id))

    async def announce(self, run_id: str, trace_id: str, completion: Completion) -> None:
        """Publish the completion event (deduplicated per run), record it, report COMPLETED.

        Two callers that race past :meth:`gathered` publish the same message id, which the
        stream's duplicate window drops, so downstream sees one event.
        """
        await self.svc.bus.publish(
            completion.subject,
            completion.event,
            msg_id=f"{completion.subject}:{run_id}",
            run_id=run_id,
            trace_id=trace_id,
        )
        await self.complete(run_id, completion.done, completion.total, completion.message, completion.outputs)

    async def complete(
        self, run_id: str, done: int, total: int, message: str, outputs: Mapping[str, str] | None = None
    ) -> None:
        """Record the stage done and report COMPLETED: how a stage that hands on to another of
        its own service (no event) ends."""
        progress, fanin = self.svc.require()
        await fanin.mark_announced(self._key(run_id))
        await progress.report(
            run_id,
            self.name,
            done,
            total,
            common_pb2.RUN_STATUS_COMPLETED,
            message,
            outputs=dict(outputs or {}),
        )
