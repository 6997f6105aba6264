"""Running the pipeline: ``demo`` and ``up`` (everything embedded), ``scan`` and ``status``."""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from skyqa import scan
from skyqa.contracts import RunState
from skyqa.runtime import Settings, configure_logging
from skyqa.runtime.progress import FINAL_STAGE, PIPELINE_STAGES
from skyqa.scan_options import build_request, model_specs
from skyqa.v1 import scan_pb2

from services.cli._app import (
    AltOpt,
    BoundOpt,
    EvalConditionsOpt,
    EvalModelsOpt,
    GroupsOpt,
    LandmarksOpt,
    NavigationOpt,
    NavigationTypesOpt,
    ProfileOpt,
    ReasoningOpt,
    ReviewOpt,
    SceneOpt,
    SpacingOpt,
    StillsOpt,
    SurveysOpt,
    VideoOpt,
    app,
    err,
    fail,
    out,
    print_board,
    print_world_board,
    settings_or_exit,
    user_errors,
)
from services.embedded import Embedded, publish_scan, read_run, wait_for_run
from services.registry import SERVICES


def _scan_request(
    scene: str, profile: str, run_id: str | None, admit: Settings | None = None, **options: Any
) -> scan_pb2.ScanRequest:
    """The request, also checked against the deployment ``admit`` describes (scene, endpoints)."""
    with user_errors():
        req = build_request(scene, profile, run_id, seed=0, **options)
        if admit is not None:
            scan.admit(req, admit.scenes_dir, admit.evaluation)
        return req


async def _follow(nats_url: str, run_id: str, timeout_s: float) -> RunState:
    """Poll the run on the caller's loop with live bars, so a signal cancels it at once."""
    with Progress(
        TextColumn("{task.description:<9}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[message]}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as bars:
        tasks = {s: bars.add_task(s, total=None, message="waiting") for s in PIPELINE_STAGES}

        def show(state: RunState) -> None:
            for name in sorted(set(state.stages) - set(tasks)):  # a stage some runs have (views)
                tasks[name] = bars.add_task(name, total=None, message="waiting")
            for name, task in tasks.items():
                if (st := state.stages.get(name)) is not None:
                    bars.update(
                        task,
                        completed=st.done,
                        total=st.total or None,
                        message=f"{st.status} {st.message}"[:70],
                    )

        return await wait_for_run(nats_url, run_id, FINAL_STAGE, timeout_s, show)


def _stage_times(state: RunState) -> str:
    """Wall time per stage (first event to completion); stages overlap in a pipelined run."""
    parts = [
        f"{name} {st.finished_at - st.started_at:.0f}s"
        for name in (*PIPELINE_STAGES, *sorted(set(state.stages) - set(PIPELINE_STAGES)))
        if (st := state.stages.get(name)) is not None and st.finished_at
    ]
    end = max((st.finished_at for st in state.stages.values()), default=0.0)
    total = end - state.created_at if end and state.created_at else 0.0
    return f"wall time {total:.0f}s; per stage: {', '.join(parts)}"


def _report(state: RunState, store_root: Path | None) -> None:
    if state.status == "failed":
        raise fail(f"run {state.run_id} failed: {'; '.join(state.errors) or 'see service logs'}", 1)
    out.print(f"[bold green]run {state.run_id} completed[/]")
    out.print(_stage_times(state))
    for name, key in sorted(state.outputs.items()):
        where = (store_root / key) if store_root is not None else key
        out.print(f"  {name:<17} {where}")
    board = (
        store_root / state.outputs["leaderboard"] if store_root and "leaderboard" in state.outputs else None
    )
    if board is not None and board.is_file():
        print_board(json.loads(board.read_text()))
    world = store_root / state.outputs.get("world_leaderboard", "-") if store_root else None
    if world is not None and world.is_file():
        print_world_board(json.loads(world.read_text()))


def _run_embedded(command: str, env: Embedded, body: Any) -> Any:
    """Start ``env``, run ``await body(env)``, stop everything and return its result; ``demo``
    and ``up`` both come through here so they stop the same way on SIGINT, SIGTERM and SIGHUP,
    also during start-up.

    A signal cancels the work (start-up and ``body``), again every second until it ends: a
    library that swallows one cancellation while a service connects would otherwise leave the
    launcher running with the signal spent. The cleanup runs outside that task, so no signal cuts
    it short (it is bounded: each service drains for at most 30 s, nats-server gets SIGKILL 10 s
    after SIGTERM). The exit code is the shell's 128 + signal number: 130 SIGINT, 143 SIGTERM,
    129 SIGHUP. A second launcher on a data dir in use exits 2 (``fail``).
    """
    from skyqa.servers import DataDirLocked  # local: this helper owns no module-level import

    received: list[signal.Signals] = []

    async def guarded() -> Any:
        async def work() -> Any:
            await env.__aenter__()
            return await body(env)

        stop = asyncio.Event()

        def on_signal(sig: signal.Signals) -> None:
            received.append(sig)
            stop.set()

        loop = asyncio.get_running_loop()
        # installed before the work first runs, so no signal finds anything started unguarded
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, on_signal, sig)
        task = asyncio.create_task(work())
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
            if task.cancelled() and received:
                return None
            return task.result()
        finally:
            stopper.cancel()
            await env.close()  # idempotent: also after a start-up cut short

    try:
        result = asyncio.run(guarded())
    except DataDirLocked as exc:
        raise fail(str(exc)) from None
    if received:
        down = "services and nats-server" if env.nats_server is not None else "services"
        err.print(f"skyqa {command} stopped on {received[0].name}: {down} are down")
        raise typer.Exit(128 + received[0])
    return result


@app.command()
def demo(
    data_dir: Annotated[Path, typer.Option("--data-dir", help="where NATS data and the store live")] = Path(
        ".skyqa"
    ),
    scene: SceneOpt = "demo_city",
    profile: ProfileOpt = "preview",
    bound: BoundOpt = None,
    spacing: SpacingOpt = None,
    altitude: AltOpt = None,
    review: ReviewOpt = "auto",
    landmarks: LandmarksOpt = None,
    video: VideoOpt = None,
    stills: StillsOpt = None,
    navigation: NavigationOpt = None,
    navigation_types: NavigationTypesOpt = None,
    groups: GroupsOpt = None,
    reasoning: ReasoningOpt = None,
    surveys: SurveysOpt = None,
    eval_model: EvalModelsOpt = None,
    eval_conditions: EvalConditionsOpt = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the run")] = 1800.0,
) -> None:
    """Start everything embedded, scan the demo scene, wait, and print where the outputs are."""
    settings = settings_or_exit()
    if not settings.review_token.get_secret_value():
        settings.review_token = SecretStr(secrets.token_urlsafe(16))
    if not settings.gateway.token.get_secret_value():
        settings.gateway.token = SecretStr(secrets.token_urlsafe(16))
    configure_logging("WARNING")
    with user_errors():
        # whoever starts the demo is its operator: the models it names are on its allow-list
        settings.evaluation.allowed_endpoints += model_specs(eval_model, "--eval-model")
    req = _scan_request(
        scene,
        profile,
        None,
        admit=settings,
        video=video,
        stills=stills,
        eval_models=eval_model,
        eval_conditions=eval_conditions,
        bound=bound,
        spacing=spacing,
        altitude=altitude,
        review=review,
        landmarks=landmarks,
        navigation=navigation,
        navigation_types=navigation_types,
        groups=groups,
        reasoning=reasoning,
        surveys=surveys,
    )

    async def main(env: Embedded) -> RunState:
        assert env.nats_url is not None
        err.print(f"embedded NATS at {env.nats_url}; store at {data_dir / 'store'}")
        for svc in env.running:
            err.print(f"  {svc.name:<15} http://127.0.0.1:{svc.port}/readyz  /metrics")
            if svc.name == "landmark":
                token = settings.review_token.get_secret_value()
                err.print(f"  review web      http://127.0.0.1:{svc.port}/review  (token {token})")
        gateway = env.service("gateway")
        if gateway is not None:
            token = settings.gateway.token.get_secret_value()
            err.print(
                f"[bold]dashboard       http://127.0.0.1:{gateway.port}/#run={req.run_id}[/]"
                f"  (API http://127.0.0.1:{gateway.port}/docs, write token {token})",
                highlight=False,
            )
            err.print(
                f"[bold]workbench       http://127.0.0.1:{gateway.port}/workbench#run={req.run_id}[/]"
                "  (rows, missions, evaluation, funnel; while the demo runs, or later with `skyqa up`)",
                highlight=False,
            )
        await publish_scan(env.nats_url, req)
        err.print(f"scan of {req.scene_id} submitted as run {req.run_id}")
        return await _follow(env.nats_url, req.run_id, timeout)

    # the same signal handling as ``up`` (tests/integration/test_launcher.py drives ``up``)
    state = _run_embedded("demo", Embedded(data_dir, settings), main)
    _report(state, Path(data_dir) / "store")


@app.command()
def up(
    data_dir: Annotated[Path, typer.Option("--data-dir")] = Path(".skyqa"),
    nats_url: Annotated[str | None, typer.Option(help="use this NATS instead of starting one")] = None,
    nats_port: Annotated[int, typer.Option(help="port of the embedded nats-server")] = 4222,
) -> None:
    """Run a local nats-server and every service in this process until Ctrl-C."""
    settings = settings_or_exit()
    configure_logging(settings.log_level, settings.log_json)

    async def main(env: Embedded) -> None:
        err.print(f"NATS {env.nats_url}; store {data_dir / 'store'}; services: {', '.join(SERVICES)}")
        for svc in env.running:
            err.print(f"  {svc.name:<9} http://127.0.0.1:{svc.port}/healthz")
        await asyncio.Event().wait()  # until a signal cancels it

    env = Embedded(data_dir, settings, nats_url=nats_url, nats_port=None if nats_url else nats_port)
    _run_embedded("up", env, main)


@app.command("scan")
def scan_cmd(
    scene: SceneOpt = "demo_city",
    profile: ProfileOpt = "preview",
    run_id: Annotated[str | None, typer.Option("--run-id", help="default: derived from the request")] = None,
    bound: BoundOpt = None,
    spacing: SpacingOpt = None,
    altitude: AltOpt = None,
    review: ReviewOpt = "auto",
    landmarks: LandmarksOpt = None,
    video: VideoOpt = None,
    stills: StillsOpt = None,
    navigation: NavigationOpt = None,
    navigation_types: NavigationTypesOpt = None,
    groups: GroupsOpt = None,
    reasoning: ReasoningOpt = None,
    surveys: SurveysOpt = None,
    eval_model: EvalModelsOpt = None,
    eval_conditions: EvalConditionsOpt = None,
    nats_url: Annotated[str | None, typer.Option(help="default: SKYQA_BUS__NATS_URL")] = None,
    wait: Annotated[bool, typer.Option(help="follow progress until the run ends")] = True,
    timeout: float = 1800.0,
) -> None:
    """Publish a scan request and show live progress."""
    settings = settings_or_exit()
    url = nats_url or settings.bus.nats_url
    req = _scan_request(
        scene,
        profile,
        run_id,
        video=video,
        stills=stills,
        eval_models=eval_model,
        eval_conditions=eval_conditions,
        bound=bound,
        spacing=spacing,
        altitude=altitude,
        review=review,
        landmarks=landmarks,
        navigation=navigation,
        navigation_types=navigation_types,
        groups=groups,
        reasoning=reasoning,
        surveys=surveys,
    )
    try:
        asyncio.run(publish_scan(url, req))
    except OSError as exc:
        raise fail(f"cannot reach NATS at {url}; start it with 'skyqa up' ({exc})") from None
    err.print(f"run {req.run_id} submitted")
    if wait:
        state = asyncio.run(_follow(url, req.run_id, timeout))
        _report(state, settings.store.local_root if settings.store.backend == "local" else None)
    else:
        out.print(req.run_id)


@app.command()
def status(
    run_id: str,
    nats_url: Annotated[str | None, typer.Option(help="default: SKYQA_BUS__NATS_URL")] = None,
) -> None:
    """Print the state of a run (read from JetStream KV; no service needed)."""
    settings = settings_or_exit()
    url = nats_url or settings.bus.nats_url
    try:
        state = asyncio.run(read_run(url, run_id))
    except OSError as exc:
        raise fail(f"cannot reach NATS at {url}: {exc}") from None
    if state is None:
        raise fail(f"no run {run_id!r}", 1)
    out.print_json(json.dumps(state.model_dump(mode="json")))
