"""evaluator service: QA completed -> baselines and configured models run and scored -> reports."""

from __future__ import annotations

from skyqa.blob import BlobStore
from skyqa.bus import Delivery, topology
from skyqa.runtime import Service, Settings
from skyqa.v1 import common_pb2, qa_pb2

from services.evaluator.evaluate import evaluate

NAME = "evaluator"
STAGE = "eval"
QA_DONE = topology.ConsumerSpec("evaluator", topology.EVENTS_STREAM, topology.QA_COMPLETED)


async def setup(svc: Service) -> None:
    progress, _ = svc.require()
    cfg = svc.settings.evaluation

    async def on_qa(event: qa_pb2.QACompleted, d: Delivery) -> None:
        await progress.report(event.run_id, STAGE, 0, 1, message=f"evaluating {2 + len(cfg.models)} models")
        result = await evaluate(
            svc.store,
            event.run_id,
            event.scene_id,
            cfg.models,
            cfg.cache_dir,
            cfg.concurrency,
            cfg.budget or None,
        )
        top = result.leaderboard["models"][0]
        await progress.report(
            event.run_id,
            STAGE,
            1,
            1,
            common_pb2.RUN_STATUS_COMPLETED,
            f"{len(result.leaderboard['models'])} models scored; best image joint accuracy "
            f"{top['image'].get('joint_correct', 0.0):.2f} ({top['model']})",
            outputs=result.outputs,
        )

    svc.bus.handle(QA_DONE, qa_pb2.QACompleted, on_qa, stage=STAGE)


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
