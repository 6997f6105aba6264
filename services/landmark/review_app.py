"""Review wiring in the landmark service: auto-review, auto-labels, finalization.

Auto mode (the embedded default) keeps every collected landmark with enough valid views,
asks the labeller for every kept one, and finalizes when all labels are back. Human mode
leaves decisions to the review web, which finalizes explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from google.protobuf.message import Message
from skyqa import keys, scan
from skyqa.bus import Delivery, topology
from skyqa.contracts import AutoLabel, InstancesFile, ReviewState, load_json
from skyqa.contracts.base import dump_json
from skyqa.runtime import Service
from skyqa.runtime.stage import Completion, Stage
from skyqa.v1 import labeller_pb2, landmark_pb2

from services.landmark import review
from services.landmark.book import ReviewBook

log = logging.getLogger("skyqa.review")

STAGE = "review"
# a web finalize this long after another began takes over its publish (that one died)
TAKEOVER_S = 30.0
COLLECTED = topology.ConsumerSpec("landmark-review", topology.EVENTS_STREAM, topology.LANDMARKS_COLLECTED)
LABELS = topology.ConsumerSpec("landmark-labels", topology.EVENTS_STREAM, topology.LABEL_DONE)


class Reviewer:
    """Everything the review web and the bus handlers do to a run's review."""

    def __init__(self, svc: Service, book: ReviewBook) -> None:
        self.svc = svc
        self.book = book
        self.stage = Stage(svc, STAGE)
        # instances.json files never change once written: caching them loses nothing on a restart
        self._docs: dict[str, InstancesFile] = {}

    async def instances(self, state: ReviewState) -> InstancesFile:
        return await self.instances_at(state.source_instances_json)

    async def instances_at(self, key: str) -> InstancesFile:
        if key not in self._docs:
            data = await asyncio.to_thread(self.svc.store.get, key)
            self._docs[key] = load_json(InstancesFile, data, "instances.json")
        return self._docs[key]

    async def start(self, event: landmark_pb2.LandmarksCollected, trace_id: str) -> None:
        doc = await self.instances_at(event.instances.key)
        mode = (await asyncio.to_thread(scan.stored, self.svc.store, event.run_id)).review_mode or "auto"
        initial = review.initial_state(event.run_id, doc, event.instances.key, mode)
        state = await self.book.create(
            initial, [{"event": "review_session_start", "mode": mode, "instances": len(doc.instances)}]
        )
        progress, _ = self.svc.require()
        if state.mode == "human":
            await progress.report(
                event.run_id,
                STAGE,
                0,
                len(doc.instances),
                message="waiting for human review",
                scene_id=event.scene_id,
            )
            return
        kept = sorted(i for i, r in state.instances.items() if r.action == "keep")
        jobs = await self._label_jobs(state, kept)
        message = f"auto-labelling {len(kept)} landmarks"
        if not await self.stage.scatter(event.run_id, topology.LABEL_REQUESTED, jobs, trace_id, message):
            with contextlib.suppress(review.AlreadyFinalized):  # a redelivered event
                await self.finalize(event.run_id, "auto_review", trace_id)

    async def _label_jobs(self, state: ReviewState, instance_ids: list[str]) -> list[tuple[str, Message]]:
        # the log sequence is part of the key: asking again after a review change is a new job
        doc = await self.instances(state)
        return [(f"{iid}:{state.log_seq}", review.label_request(state, doc, iid)) for iid in instance_ids]

    async def request_labels(self, state: ReviewState, instance_ids: list[str], trace_id: str = "") -> None:
        jobs = await self._label_jobs(state, instance_ids)
        await self.stage.publish(state.run_id, topology.LABEL_REQUESTED, jobs, trace_id)

    async def on_label(self, result: labeller_pb2.LabelResult, trace_id: str) -> None:
        def apply(state: ReviewState) -> list[dict[str, object]]:
            # a finalized review is what was published; a late label must not change it
            if result.landmark_id not in state.instances or state.finalized:
                return []
            r = review.apply_label(state, result)
            # what was applied, which a label refused for its text is not
            applied = r.auto_label or AutoLabel(ok=False)
            event = "web_auto_label_item_done" if applied.ok else "web_auto_label_item_failed"
            return [
                {
                    "event": event,
                    "instance_id": result.landmark_id,
                    "status": r.annotation_status,
                    "reason": applied.reason,
                }
            ]

        state = await self.book.change(result.run_id, apply)
        if state.mode != "auto":
            return
        kept = [i for i, r in state.instances.items() if r.action == "keep"]
        if await self.stage.gathered(
            result.run_id, result.landmark_id, len(kept), f"labelled {result.landmark_id}"
        ):
            with contextlib.suppress(review.AlreadyFinalized):  # two last labels raced
                await self.finalize(result.run_id, "auto_review", trace_id)

    async def finalize(self, run_id: str, trigger: str, trace_id: str = "") -> landmark_pb2.LandmarksReviewed:
        """Finalize once: the call that flips the state publishes ``LandmarksReviewed``.

        Until the stage is announced, a later call publishes again (the fixed message id
        deduplicates it), so a finalize that died between the flip and the publish is finished
        by the next one: a redelivered label, :meth:`resume`, or a web call made after
        ``TAKEOVER_S``. Sooner, a web call gets :class:`AlreadyFinalized` (the first is still
        publishing), as does every call once the stage is announced.
        """
        # the next stages read the run's settings from its stored scan request: a review is not
        # finalized without one, so the reviewer hears it now instead of a dead letter later
        await asyncio.to_thread(scan.stored, self.svc.store, run_id)
        claimed = False
        now = time.time()

        def mark(state: ReviewState) -> list[dict[str, object]]:
            nonlocal claimed
            claimed = not state.finalized
            if not claimed:
                return []
            state.finalized, state.finalized_at = True, now
            return [{"event": "review_session_end", "trigger": trigger}]

        state = await self.book.change(run_id, mark)
        if not claimed and (
            await self.stage.is_announced(run_id)
            or (trigger == "web_finalize" and now - state.finalized_at < TAKEOVER_S)
        ):
            raise review.AlreadyFinalized(f"the review of run {run_id!r} is already finalized")
        doc = await self.instances(state)
        valid = review.valid_instances(state, doc, keys.review_state(run_id, state.scene_id), trigger)
        key = keys.valid_instances(run_id, state.scene_id)
        info = await asyncio.to_thread(self.svc.store.put, key, dump_json(valid), "application/json")
        event = landmark_pb2.LandmarksReviewed(
            run_id=run_id,
            scene_id=state.scene_id,
            valid=len(valid.valid_instances),
            total=len(doc.instances),
            valid_instances=info.to_ref(),
        )
        message = f"{event.valid} landmarks kept and labelled of {event.total}"
        outputs = {"valid_instances": key}
        completion = Completion(
            topology.LANDMARKS_REVIEWED, event, event.valid, event.total, message, outputs
        )
        await self.stage.announce(run_id, trace_id, completion)
        return event

    async def resume(self) -> None:
        """Publish the reviews a crash left finalized but unannounced; one bad review is logged
        and skipped, never keeps the service from starting."""
        for run_id in await self.book.runs():
            try:
                state = await self.book.get(run_id)
                if state is None or not state.finalized or await self.stage.is_announced(run_id):
                    continue
                log.warning("review of run %s was finalized but not announced; publishing it now", run_id)
                with contextlib.suppress(review.AlreadyFinalized):  # another replica was quicker
                    await self.finalize(run_id, "resume_after_restart")
            except Exception:
                log.exception("could not resume the review of run %s", run_id)


async def setup_review(svc: Service) -> Reviewer:
    book = ReviewBook(await svc.bus.kv(topology.REVIEW_BUCKET), svc.store)
    reviewer = Reviewer(svc, book)

    async def on_collected(event: landmark_pb2.LandmarksCollected, d: Delivery) -> None:
        await reviewer.start(event, d.trace_id)

    async def on_label(result: labeller_pb2.LabelResult, d: Delivery) -> None:
        await reviewer.on_label(result, d.trace_id)

    svc.bus.handle(COLLECTED, landmark_pb2.LandmarksCollected, on_collected, stage=STAGE)
    svc.bus.handle(LABELS, labeller_pb2.LabelResult, on_label, stage=STAGE)
    svc.state["reviewer"] = reviewer
    # in the background: the service serves (and reports ready) while old reviews are walked
    svc.state["review_resume"] = asyncio.create_task(reviewer.resume())
    return reviewer
