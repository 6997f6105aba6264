"""The stage protocol against a real nats-server: scatter, gather across replicas, announce once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from skyqa.blob import LocalBlobStore
from skyqa.bus import Delivery, topology
from skyqa.contracts import RunState
from skyqa.runtime import Service, Settings
from skyqa.runtime.stage import Completion, Stage
from skyqa.v1 import common_pb2

pytestmark = pytest.mark.integration


async def _nothing(svc: Service) -> None:
    return None


@pytest.fixture
async def replicas(settings: Settings, tmp_path: Path) -> AsyncIterator[list[Service]]:
    store = LocalBlobStore(tmp_path)
    started = [Service(f"replica{i}", settings, _nothing, store=store) for i in range(2)]
    for svc in started:
        await svc.start(http=False)
    yield started
    for svc in started:
        await svc.stop()


async def _collect(svc: Service, subject: str, durable: str, into: list[str]) -> None:
    async def on(msg: common_pb2.Progress, d: Delivery) -> None:
        into.append(msg.message)

    svc.bus.handle(
        topology.ConsumerSpec(durable, topology.EVENTS_STREAM, subject), common_pb2.Progress, on, stage="t"
    )
    await svc.bus.start()


async def _state(svc: Service, run_id: str) -> RunState:
    assert svc.runs is not None
    doc, _ = await svc.runs.get(run_id)
    assert doc is not None
    return RunState.model_validate(doc)


async def test_the_last_result_seen_by_two_replicas_completes_the_stage_once(
    replicas: list[Service], unique: str
) -> None:
    a, b = replicas
    jobs_subject, done_subject = f"skyqa.v1.eval.t{unique}.job", f"skyqa.v1.eval.t{unique}.done"
    run_id = f"run-{unique}"
    jobs: list[str] = []
    completions: list[str] = []
    await _collect(a, jobs_subject, f"jobs-{unique}", jobs)
    await _collect(b, done_subject, f"done-{unique}", completions)
    stages = [Stage(a, "t"), Stage(b, "t")]
    keyed = [(str(i), common_pb2.Progress(run_id=run_id, message=f"job {i}")) for i in range(3)]

    assert await stages[0].scatter(run_id, jobs_subject, keyed, "trace", "3 jobs")
    # a redelivered request scatters again: the job ids deduplicate it
    assert await stages[1].scatter(run_id, jobs_subject, keyed, "trace", "3 jobs")

    async def result(stage: Stage, item: str) -> None:
        if await stage.gathered(run_id, item, 3, f"done {item}"):
            event = common_pb2.Progress(run_id=run_id, message="all done")
            await stage.announce(
                run_id, "trace", Completion(done_subject, event, 3, 3, "3 of 3", {"out": "k"})
            )

    # every result arrives twice, at both replicas at once
    await asyncio.gather(*(result(stages[n % 2], str(n // 2)) for n in range(6)))
    await asyncio.sleep(1.0)  # let the consumers drain

    assert sorted(jobs) == ["job 0", "job 1", "job 2"]
    assert completions == ["all done"]
    assert await stages[0].is_announced(run_id)
    state = await _state(a, run_id)
    assert state.stages["t"].status == "completed"
    assert (state.stages["t"].done, state.stages["t"].total) == (3, 3)
    assert state.outputs == {"out": "k"}


async def test_a_stage_with_nothing_to_do_completes_without_waiting(
    replicas: list[Service], unique: str
) -> None:
    stage = Stage(replicas[0], "t")
    run_id = f"run-{unique}"
    assert not await stage.scatter(run_id, f"skyqa.v1.eval.t{unique}.job", [], "trace", "nothing")
    # the fan-in is complete, so a straggler result cannot leave the stage waiting either
    assert await stage.gathered(run_id, "none", 1, "late")


async def test_a_bound_subject_refuses_another_message_type(replicas: list[Service]) -> None:
    with pytest.raises(TypeError, match=r"skyqa\.v1\.render\.job carries skyqa\.v1\.RenderJob"):
        await replicas[0].bus.publish(topology.RENDER_JOB, common_pb2.Progress(), msg_id="x")
    spec = topology.ConsumerSpec("wrong", topology.EVENTS_STREAM, topology.QA_COMPLETED)
    with pytest.raises(TypeError, match=r"carries skyqa\.v1\.QACompleted"):
        replicas[0].bus.handle(spec, common_pb2.Progress, _never, stage="t")


async def _never(msg: common_pb2.Progress, d: Delivery) -> None:
    raise AssertionError("never registered")


async def test_a_dead_letter_fails_every_stage_its_delivery_reported_on(
    settings: Settings, tmp_path: Path, unique: str
) -> None:
    """Issue 41.4b, in the runtime: a handler that opens a stage of its run other than its
    registration's and then keeps failing leaves no stage running; one it completed stays so,
    and another run's stage it reported on is not its to fail."""
    run_id, other = f"run-{unique}", f"other-{unique}"
    subject = f"skyqa.v1.eval.t{unique}"

    async def setup(svc: Service) -> None:
        progress, _ = svc.require()

        async def on(msg: common_pb2.Progress, d: Delivery) -> None:
            await progress.report(msg.run_id, "first", 1, 1, common_pb2.RUN_STATUS_COMPLETED, "done")
            await progress.report(msg.run_id, "second", 0, 4, message="working")
            await progress.report(other, "elsewhere", 0, 1, message="not mine")
            raise RuntimeError("disk on fire")

        spec = topology.ConsumerSpec(f"fails-{unique}", topology.EVENTS_STREAM, subject)
        svc.bus.handle(spec, common_pb2.Progress, on, stage="t")

    svc = Service("failing", settings, setup, store=LocalBlobStore(tmp_path))
    await svc.start(http=False)
    try:
        progress, _ = svc.require()
        await progress.open(run_id, "tiny_town")
        await progress.open(other, "tiny_town")
        await svc.bus.publish(subject, common_pb2.Progress(run_id=run_id), msg_id=f"m-{unique}")
        for _ in range(200):
            state = await _state(svc, run_id)
            if state.stages.get("second") and state.stages["second"].status == "failed":
                break
            await asyncio.sleep(0.05)
        assert state.stages["second"].status == "failed"
        assert state.stages["second"].message == "max_deliver_exceeded: RuntimeError: disk on fire"
        assert state.stages["t"].status == "failed" and state.status == "failed"
        assert state.stages["first"].status == "completed"
        elsewhere = await _state(svc, other)
        assert elsewhere.stages["elsewhere"].status == "running" and elsewhere.status != "failed"
    finally:
        await svc.stop()
