"""Evaluating a release: ``eval`` (baselines and model endpoints) and ``blind-filter``.

The evaluator's code (OpenCV, PyAV, gRPC clients) loads inside the commands: every container
runs this CLI (``skyqa serve``) and only these two commands need it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import typer
from skyqa import keys
from skyqa.errors import InvalidInput
from skyqa.scan_options import condition_list, model_specs

from services.cli._app import (
    ConditionsOpt,
    DataDirOpt,
    ModelsOpt,
    SceneOpt,
    app,
    fail,
    out,
    print_board,
    print_world_board,
    settings_or_exit,
    store_for,
    user_errors,
)


def _no_manifests(run_id: str, scene: str) -> str:
    return f"run {run_id!r} of scene {scene!r} has no QA manifests; run it to the qa stage first"


@app.command("eval")
def eval_cmd(
    run_id: str,
    scene: SceneOpt = "demo_city",
    data_dir: DataDirOpt = None,
    models: ModelsOpt = None,
    conditions: ConditionsOpt = None,
    budget: Annotated[int, typer.Option(help="most requests per model (0: no cap)")] = 0,
    judge: Annotated[
        str | None,
        typer.Option(
            help="URL[#MODEL] of an LLM that re-marks free-form reasoning-step answers (off by default)"
        ),
    ] = None,
) -> None:
    """Evaluate the baselines (and model endpoints) on a run's QA manifests; print the leaderboard."""
    settings = settings_or_exit()
    store = store_for(data_dir, settings)
    with user_errors(_no_manifests(run_id, scene)):
        keys.validate_id(run_id, "run id")
        endpoints = list(settings.evaluation.models) + model_specs(models)
        conds = condition_list(conditions) or settings.evaluation.conditions
        judges = model_specs([judge] if judge else None, "--judge")
        if any(j.kind != "openai" and j.kind != "grpc" for j in judges):
            raise InvalidInput("--judge needs a vision-language model endpoint, not a world model")
        from services.evaluator.evaluate import evaluate
        from services.evaluator.world import run_world, split_endpoints

        vlms, worlds = split_endpoints(endpoints)
        result = asyncio.run(
            evaluate(
                store,
                run_id,
                scene,
                vlms,
                settings.evaluation.cache_dir,
                settings.evaluation.concurrency,
                budget or None,
                conds,
                judge=judges[0] if judges else None,
            )
        )
        world = asyncio.run(run_world(store, run_id, scene, worlds, settings.scenes_dir))
    print_board(result.leaderboard)
    outputs = dict(result.outputs)
    if world is not None:
        print_world_board(world.leaderboard)
        outputs |= world.outputs
    for name, key in sorted(outputs.items()):
        out.print(f"  {name:<17} {key}")


@app.command("world-model")
def world_model_cmd(
    baseline: Annotated[str, typer.Argument(help="oracle, symmetric_shortcut or copy_last")],
    port: Annotated[int, typer.Option(help="port on 127.0.0.1 (0: any free one)")] = 0,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
) -> None:
    """Serve a built-in world-model baseline over the WorldModel gRPC contract (until Ctrl-C);
    evaluate it with ``--model world://HOST:PORT`` (the oracle and the shortcut need the
    operator to mark the endpoint privileged)."""
    settings = settings_or_exit()
    from skyqa.models.world import serve_world_model

    from services.evaluator.world_baselines import builtin_world_models

    models = {m.name: m for m in builtin_world_models(settings.scenes_dir)}
    if baseline not in models:
        raise fail(f"unknown world-model baseline {baseline!r}; choose from {', '.join(sorted(models))}")

    async def main() -> None:
        server, bound = await serve_world_model(models[baseline], host, port)
        out.print(f"{baseline} world model on {host}:{bound}", highlight=False)
        try:
            await server.wait_for_termination()
        finally:
            await server.stop(1)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


@app.command("blind-filter")
def blind_filter_cmd(
    run_id: str,
    scene: SceneOpt = "demo_city",
    data_dir: DataDirOpt = None,
    models: ModelsOpt = None,
    samples: Annotated[int, typer.Option(help="text-only samples per model (r)")] = 3,
    quorum: Annotated[float, typer.Option(help="share of responders that must solve a row")] = 0.75,
    apply: Annotated[bool, typer.Option(help="also write a filtered copy of the image manifest")] = False,
) -> None:
    """Flag image MCQs that text-only responders answer without the image (MMMU-Pro style)."""
    settings = settings_or_exit()
    store = store_for(data_dir, settings)
    with user_errors(_no_manifests(run_id, scene)):
        keys.validate_id(run_id, "run id")
        if samples < 1 or not 0 < quorum <= 1:
            raise InvalidInput("--samples must be >= 1 and --quorum within (0, 1]")
        from services.evaluator.blind import blind_filter

        result = asyncio.run(
            blind_filter(
                store,
                run_id,
                scene,
                list(settings.evaluation.models) + model_specs(models),
                settings.evaluation.cache_dir,
                samples,
                quorum,
                settings.evaluation.concurrency,
                apply,
            )
        )
    out.print(f"{len(result.flagged)} of {result.rows} image rows answerable without the image")
    out.print(f"  report            {result.report_key}")
    if result.filtered_key:
        out.print(f"  filtered manifest {result.filtered_key}")
