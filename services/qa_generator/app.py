"""qa-generator service: completed missions -> landmark views at the shipped size -> planned rows ->
env observations (a first look at the working size, then at the shipped size for what can ship)
-> checked manifests."""

from __future__ import annotations

import asyncio

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.qa import ViewRequest
from skyqa.families import RELEASED
from skyqa.runtime import Service, Settings
from skyqa.runtime.stage import Completion, Stage
from skyqa.v1 import mission_pb2, render_pb2

from services.qa_generator import views
from services.qa_generator.observations import at_shipped_size, first_round, round_of, shipping
from services.qa_generator.pipeline import REQUESTER, SHIPPED_JOB, QAPlan, plan, render_jobs
from services.qa_generator.release import completion, finish

NAME = "qa_generator"
STAGE = "qa"
OBSERVATIONS = "observations"
MISSIONS = topology.ConsumerSpec("qa-generator", topology.EVENTS_STREAM, topology.MISSIONS_COMPLETED)
RENDERED = topology.ConsumerSpec(
    "qa-generator-renders", topology.EVENTS_STREAM, topology.render_done_subject(REQUESTER)
)
VIEWS_RENDERED = topology.ConsumerSpec(
    "qa-generator-views", topology.EVENTS_STREAM, topology.render_done_subject(views.REQUESTER)
)


async def setup(svc: Service) -> None:
    stage = Stage(svc, STAGE)
    reshoot = Stage(svc, views.STAGE)
    # the observations of the landmarks that pass their checks at the working size, rendered
    # again at the size they ship
    observations = Stage(svc, OBSERVATIONS)

    async def complete(p: QAPlan, trace_id: str) -> None:
        report, out = await asyncio.to_thread(finish, p, svc.store, svc.settings.qa.blind_gate)
        event, message = completion(p, report, out)
        total = len({r.landmark_id for r in p.requests.env_requests})  # what gathering counts
        await stage.announce(
            p.run_id, trace_id, Completion(topology.QA_COMPLETED, event, total, total, message, out)
        )

    async def looked(p: QAPlan, trace_id: str) -> None:
        """Every observation is in as first rendered: render the ones that can ship again at the
        shipped size, or release."""
        shipped = await asyncio.to_thread(shipping, p, svc.store)
        again = at_shipped_size(p, shipped)
        jobs = [(f"{REQUESTER}:{job.job_id}", job) for job in render_jobs(p, again, SHIPPED_JOB)]
        message = f"rendering the env observations of {len(jobs)} landmarks at the shipped size"
        if not jobs or not await observations.scatter(p.run_id, topology.RENDER_JOB, jobs, trace_id, message):
            await complete(p, trace_id)

    async def plan_rows(
        event: mission_pb2.MissionsCompleted, shipped: list[ViewRequest], trace_id: str
    ) -> None:
        p = await asyncio.to_thread(plan, event, svc.store, RELEASED, shipped)
        await asyncio.to_thread(svc.store.put, keys.qa_plan(event.run_id), dump_json(p), "application/json")
        jobs = [(f"{REQUESTER}:{job.job_id}", job) for job in render_jobs(p, first_round(p))]
        message = f"rendering {len(jobs)} env observation sets"
        if not await stage.scatter(event.run_id, topology.RENDER_JOB, jobs, trace_id, message):
            await looked(p, trace_id)

    async def shipped_views(run: views.Reshoot, trace_id: str) -> None:
        """All reviewed landmarks' views are in at the shipped size: record them, then plan."""
        await asyncio.to_thread(views.merge, svc.store, run)
        # planned before the step is marked done: a crash between the two redelivers the last
        # result, which plans again (idempotent), instead of leaving a run never planned
        await plan_rows(run.event, run.requests, trace_id)
        n = len(run.landmarks)
        await reshoot.complete(run.run_id, n, n, f"{len(run.requests)} views at the shipped size")

    async def on_missions(event: mission_pb2.MissionsCompleted, d: Delivery) -> None:
        run = await asyncio.to_thread(views.prepare, event, svc.store)
        if run is None:  # views were checked at the size they ship
            await plan_rows(event, [], d.trace_id)
            return
        jobs = [(f"{views.REQUESTER}:{job.job_id}", job) for job in views.view_jobs(run)]
        message = f"rendering the views of {len(jobs)} reviewed landmarks at the shipped size"
        if not await reshoot.scatter(event.run_id, topology.RENDER_JOB, jobs, d.trace_id, message):
            await shipped_views(run, d.trace_id)

    async def on_views(done: render_pb2.RenderDone, d: Delivery) -> None:
        run = await asyncio.to_thread(views.load, svc.store, done.run_id)
        await asyncio.to_thread(views.record, svc.store, run, done)
        total = len(run.landmarks)
        if await reshoot.gathered(done.run_id, done.correlation, total, f"views of {done.correlation}"):
            await shipped_views(run, d.trace_id)

    async def on_rendered(done: render_pb2.RenderDone, d: Delivery) -> None:
        p = load_json(QAPlan, await asyncio.to_thread(svc.store.get, keys.qa_plan(done.run_id)), "qa plan")
        shipped, total = await asyncio.to_thread(round_of, p, svc.store, done)
        if not shipped:
            if await stage.gathered(done.run_id, done.correlation, total, f"rendered {done.correlation}"):
                await looked(p, d.trace_id)
            return
        what = f"env observations of {done.correlation} at the shipped size"
        if await observations.gathered(done.run_id, done.correlation, total, what):
            # released before the step is marked done, as with the views
            await complete(p, d.trace_id)
            await observations.complete(p.run_id, total, total, f"observations of {total} landmarks")

    svc.bus.handle(MISSIONS, mission_pb2.MissionsCompleted, on_missions, stage=STAGE)
    svc.bus.handle(
        VIEWS_RENDERED,
        render_pb2.RenderDone,
        on_views,
        stage=views.STAGE,
        concurrency=svc.settings.concurrency,
    )
    svc.bus.handle(
        RENDERED, render_pb2.RenderDone, on_rendered, stage=STAGE, concurrency=svc.settings.concurrency
    )


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
