"""Operating a deployment: ``serve`` one service, ``warmup`` the renderer, ``refresh`` a run.

``serve`` is every container's command, so this module imports nothing a service does not
need; the renderer and the stages ``refresh`` composes load inside their commands.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer
from skyqa import keys
from skyqa.runtime import configure_logging

from services.cli._app import DataDirOpt, app, fail, out, settings_or_exit, store_for, user_errors
from services.registry import SERVICES


@app.command()
def serve(name: Annotated[str, typer.Argument(help=f"one of: {', '.join(SERVICES)}")]) -> None:
    """Run one service with settings from SKYQA_* env vars (the container command)."""
    if name not in SERVICES:
        raise fail(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    settings = settings_or_exit()
    configure_logging(settings.log_level, settings.log_json)
    try:
        asyncio.run(SERVICES[name](settings, None).run())
    except OSError as exc:
        raise fail(f"{name} cannot start: {exc}", 1) from None


@app.command()
def refresh(
    run_id: str,
    data_dir: DataDirOpt = None,
    videos: Annotated[bool, typer.Option(help="also re-render every mission video")] = False,
) -> None:
    """Re-render a run's assets from their recorded camera poses; ids, options and answers stay
    (a release made by an older skyqa is released again under this one's checks)."""
    settings = settings_or_exit()
    store = store_for(data_dir, settings)
    with user_errors(f"run {run_id!r} has no QA plan in {store.describe()}; run it to the qa stage first"):
        keys.validate_id(run_id, "run id")
        from services.cli.rerender import rerender  # composes three stages; loads the renderer

        done = rerender(store, run_id, videos, settings.scenes_dir, settings.airsim, settings.qa.blind_gate)
    out.print(
        f"re-rendered {done.env_observations} environment observations (first looks included), "
        f"{done.overlays} overlays, "
        f"{done.clips} video clips and {done.videos} videos; manifests rebuilt"
    )
    for name, key in sorted(done.manifests.items()):
        out.print(f"  {name:<17} {key}")


@app.command()
def warmup() -> None:
    """Compile the renderer's kernels into the numba cache (image builds run this once)."""
    from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene  # the renderer: only here

    t = time.perf_counter()
    sim = BuiltinSimulator(load_scene("tiny_town"))
    sim.render(Pose(0.0, 0.0, 50.0, 0.0, -90.0), CameraSpec(32, 24, 60.0))
    out.print(f"renderer kernels ready in {time.perf_counter() - t:.1f} s")
