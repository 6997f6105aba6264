"""Progress events on ``skyqa.v1.progress.<run_id>`` plus the run state in KV."""

from __future__ import annotations

import time

from skyqa.bus import Bus, JsonKV, topology
from skyqa.bus.client import note_progress
from skyqa.contracts import RunState, StageState
from skyqa.keys import is_valid_id, validate_id
from skyqa.v1 import common_pb2

_STATUS: dict[int, str] = {
    common_pb2.RUN_STATUS_PENDING: "pending",
    common_pb2.RUN_STATUS_RUNNING: "running",
    common_pb2.RUN_STATUS_COMPLETED: "completed",
    common_pb2.RUN_STATUS_FAILED: "failed",
}
_RANK = {"pending": 0, "running": 1, "completed": 2, "failed": 3}

# The stage whose completion completes the whole run; later stages move this forward.
FINAL_STAGE = "eval"
# Every stage a run reports, in pipeline order (they overlap in time).
PIPELINE_STAGES = ("capture", "fusion", "landmark", "review", "mission", "qa", FINAL_STAGE)


def request_stage(stage: str, request_id: str) -> str:
    """The stage a request on an existing run reports on (``eval-<request>``): pipeline stage
    names hold no ``-``, so the name alone tells a request's stage from the pipeline's."""
    return f"{stage}-{request_id}"


def is_request_stage(name: str) -> bool:
    """Whether ``name`` is a request's stage, whose failure is its own: an evaluation asked for
    through the API that fails leaves the release it was asked about as it was."""
    return "-" in name


def status_name(value: int) -> str:
    return _STATUS.get(int(value), "pending")


def apply_progress(state: RunState, event: common_pb2.Progress, now: float) -> RunState:
    """Fold one progress event into the run state; never moves a stage backwards."""
    status = status_name(event.status)
    stage = state.stages.get(event.stage, StageState())
    if _RANK[status] >= _RANK[stage.status]:
        stage.status = status  # type: ignore[assignment]
        stage.message = event.message or stage.message
    stage.done = max(stage.done, int(event.done))
    stage.total = max(stage.total, int(event.total))
    stage.updated_at = now
    stage.started_at = stage.started_at or now
    if stage.status == "completed" and not stage.finished_at:
        stage.finished_at = now
    state.stages[event.stage] = stage
    state.updated_at = now
    if is_request_stage(event.stage):
        return state
    if status == "failed":
        state.status = "failed"
        if event.message and event.message not in state.errors:
            state.errors.append(event.message)
    elif state.status != "failed":
        final = state.stages.get(FINAL_STAGE)
        state.status = "completed" if final and final.status == "completed" else "running"
    return state


class _Refused(Exception):
    """A failure that must not change the run (unknown run, or completed stage or run)."""


class ProgressReporter:
    def __init__(self, bus: Bus, runs: JsonKV, service: str) -> None:
        self.bus = bus
        self.runs = runs
        self.service = service

    async def report(
        self,
        run_id: str,
        stage: str,
        done: int,
        total: int,
        status: int = common_pb2.RUN_STATUS_RUNNING,
        message: str = "",
        scene_id: str = "",
        outputs: dict[str, str] | None = None,
    ) -> None:
        event = common_pb2.Progress(
            run_id=run_id,
            stage=stage,
            done=done,
            total=total,
            status=status,  # type: ignore[arg-type]
            message=message,
            service=self.service,
        )
        now = time.time()
        note_progress(run_id, stage)

        def fold(doc: dict[str, object] | None) -> dict[str, object]:
            state = RunState.model_validate(doc) if doc else RunState(run_id=run_id, created_at=now)
            if scene_id:
                state.scene_id = scene_id
            state.outputs.update(outputs or {})
            return apply_progress(state, event, now).model_dump(mode="json")

        await self.runs.update(run_id, fold)
        await self._announce(event)

    async def open(self, run_id: str, scene_id: str) -> tuple[RunState, bool]:
        """The run's state, created (pending) unless it exists; True when this call created it.

        Runs are opened only by a scan request, where it enters (gateway) or is accepted
        (capture); no other event creates one."""
        validate_id(run_id, "run id")
        now = time.time()
        created = False

        def create(doc: dict[str, object] | None) -> dict[str, object]:
            nonlocal created
            created = doc is None  # per attempt: a lost compare-and-set race means it exists
            if doc is not None:
                return doc
            scene = scene_id if is_valid_id(scene_id) else ""
            state = RunState(run_id=run_id, scene_id=scene, created_at=now, updated_at=now)
            return state.model_dump(mode="json")

        doc = await self.runs.update(run_id, create)
        return RunState.model_validate(doc), created

    async def fail(self, run_id: str, stage: str, message: str) -> bool:
        """Mark ``stage`` and its run failed, from a dead-lettered message of that run.

        Refused (False) for a run that was never created, so bad input cannot invent runs, for
        a stage that already completed, and for a pipeline stage of a run that completed: what
        they produced is stored and stays valid. A request's stage (an evaluation asked for
        after the release) is failed on its own, or whoever watches it waits for ever; the run's
        status is not its to change (``is_request_stage``).
        """
        event = common_pb2.Progress(
            run_id=run_id,
            stage=stage,
            status=common_pb2.RUN_STATUS_FAILED,
            message=message,
            service=self.service,
        )
        now = time.time()

        def fold(doc: dict[str, object] | None) -> dict[str, object]:
            if doc is None:
                raise _Refused
            state = RunState.model_validate(doc)
            done = state.stages.get(stage)
            if done is not None and done.status == "completed":
                raise _Refused
            if state.status == "completed" and not is_request_stage(stage):
                raise _Refused
            return apply_progress(state, event, now).model_dump(mode="json")

        try:
            await self.runs.update(run_id, fold)
        except _Refused:
            return False
        await self._announce(event)
        return True

    async def _announce(self, event: common_pb2.Progress) -> None:
        run_id = event.run_id
        await self.bus.publish(
            topology.progress_subject(run_id),
            event,
            msg_id=f"progress:{run_id}:{event.stage}:{event.done}:{event.total}:{event.status}",
            run_id=run_id,
        )
