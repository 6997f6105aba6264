"""Evaluating a release: ``eval`` (baselines and model endpoints) and ``blind-filter``.

The evaluator's code (OpenCV, PyAV, gRPC clients) loads inside the commands: every container
runs this CLI (``skyqa serve``) and only these two commands need it.
"""

from __future__ import annotations

import asyncio
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
    out,
    print_board,
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
) -> None:
    """Evaluate the baselines (and model endpoints) on a run's QA manifests; print the leaderboard."""
    settings = settings_or_exit()
    store = store_for(data_dir, settings)
    with user_errors(_no_manifests(run_id, scene)):
        keys.validate_id(run_id, "run id")
        endpoints = list(settings.evaluation.models) + model_specs(models)
        conds = condition_list(conditions) or settings.evaluation.conditions
        from services.evaluator.evaluate import evaluate

        result = asyncio.run(
            evaluate(
                store,
                run_id,
                scene,
                endpoints,
                settings.evaluation.cache_dir,
                settings.evaluation.concurrency,
                budget or None,
                conds,
            )
        )
    print_board(result.leaderboard)
    for name, key in sorted(result.outputs.items()):
        out.print(f"  {name:<17} {key}")


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
