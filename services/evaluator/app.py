"""evaluator service: QA completed (or an evaluation request) -> baselines and models run and
scored in the requested conditions -> reports under ``runs/<run>/eval/``."""

from __future__ import annotations

import asyncio

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.errors import InvalidInput
from skyqa.runtime import Service, Settings, progress as run_progress
from skyqa.v1 import common_pb2, eval_pb2, qa_pb2

from services.evaluator.evaluate import evaluate
from services.evaluator.questions import released
from services.evaluator.request import resolve_request
from services.evaluator.world import run_world, split_endpoints

NAME = "evaluator"
STAGE = "eval"
QA_DONE = topology.ConsumerSpec("evaluator", topology.EVENTS_STREAM, topology.QA_COMPLETED)
REQUESTED = topology.ConsumerSpec("evaluator-requests", topology.EVENTS_STREAM, topology.EVAL_REQUESTED)


async def setup(svc: Service) -> None:
    progress, _ = svc.require()
    cfg = svc.settings.evaluation

    async def run(run_id: str, scene_id: str, spec: eval_pb2.EvaluationSpec, stage: str = STAGE) -> None:
        keys.validate_id(run_id, "run id")
        req = resolve_request(spec, cfg)
        if not await asyncio.to_thread(released, svc.store, run_id, scene_id):
            raise InvalidInput(f"run {run_id!r} of scene {scene_id!r} has no QA manifests to evaluate")
        await progress.report(
            run_id,
            stage,
            0,
            1,
            message=f"evaluating 3 baselines and {len(req.models)} models in {req.conditions}",
        )
        vlms, worlds = split_endpoints(req.models)
        result = await evaluate(
            svc.store,
            run_id,
            scene_id,
            vlms,
            cfg.cache_dir,
            cfg.concurrency,
            req.budget,
            req.conditions,
        )
        world = await run_world(svc.store, run_id, scene_id, worlds, svc.settings.scenes_dir)
        outputs = dict(result.outputs) | (world.outputs if world else {})
        top = result.leaderboard["models"][0]
        best = top["image"].get("joint_correct")
        not_run = sum(s.not_run for s in result.stats.values())
        await progress.report(
            run_id,
            stage,
            1,
            1,
            common_pb2.RUN_STATUS_COMPLETED,
            f"{len(result.leaderboard['models'])} models scored; "
            + (
                f"best image joint accuracy {best:.2f} ({top['model']})"
                if isinstance(best, float)
                else "no image row scored"
            )
            + (f"; {not_run} rows not run (budget {req.budget})" if not_run else "")
            + (f"; best world model {world.leaderboard['models'][0]['model']}" if world else ""),
            outputs=outputs,
        )

    async def on_qa(event: qa_pb2.QACompleted, d: Delivery) -> None:
        await run(event.run_id, event.scene_id, event.evaluation)

    async def on_request(event: eval_pb2.EvaluationRequest, d: Delivery) -> None:
        await run(event.run_id, event.scene_id, event.spec, request_stage(event))

    svc.bus.handle(QA_DONE, qa_pb2.QACompleted, on_qa, stage=STAGE)
    # the gateway tells the client to watch ``eval-<request>``: a dead letter must end that
    # stage, also when the request fails before its first progress report
    svc.bus.handle(
        REQUESTED, eval_pb2.EvaluationRequest, on_request, stage=STAGE, progress_stage=request_stage
    )


def request_stage(event: eval_pb2.EvaluationRequest) -> str:
    """The run stage an evaluation request reports on (the gateway names it to the client)."""
    asked = event.request_id
    return run_progress.request_stage(STAGE, asked) if keys.is_valid_id(asked) else STAGE


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
