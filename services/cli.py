"""``skyqa`` command line: run the services, submit scans, follow runs.

Exit codes: 0 done, 1 the run failed, 2 bad input or configuration (one line says what to fix).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from skyqa import keys, scan
from skyqa.blob import BlobStore, LocalBlobStore, open_store
from skyqa.contracts import RunState
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.runtime import Settings, configure_logging, load_settings
from skyqa.runtime.progress import FINAL_STAGE, PIPELINE_STAGES
from skyqa.settings import ModelEndpoint
from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene
from skyqa.v1 import scan_pb2

from services.embedded import Embedded, publish_scan, read_run, wait_for_run
from services.evaluator.blind import blind_filter
from services.evaluator.conditions import CONDITIONS
from services.evaluator.evaluate import evaluate
from services.qa_generator.refresh import refresh as do_refresh
from services.registry import SERVICES

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


def _store(data_dir: Path | None, settings: Settings) -> BlobStore:
    """The embedded store under ``--data-dir``, else the configured one."""
    return LocalBlobStore(data_dir / "store") if data_dir else open_store(settings.store)


def _settings(**overrides: object) -> Settings:
    try:
        return load_settings(**overrides)
    except InvalidInput as exc:
        raise _fail(str(exc)) from None


def _scan_request(
    scene: str, profile: str, run_id: str | None, admit: Settings | None = None, **options: Any
) -> scan_pb2.ScanRequest:
    """The request, also checked against the deployment ``admit`` describes (scene, endpoints)."""
    try:
        req = build_request(scene, profile, run_id, seed=0, **options)
        if admit is not None:
            scan.admit(req, admit.scenes_dir, admit.evaluation)
        return req
    except InvalidInput as exc:
        raise _fail(str(exc)) from None


def build_request(
    scene: str,
    profile: str,
    run_id: str | None,
    bound: str | None,
    spacing: float | None,
    altitude: list[float] | None,
    seed: int,
    review: str = "auto",
    landmarks: int | None = None,
    video: str | None = None,
    eval_models: list[str] | None = None,
    eval_conditions: str | None = None,
) -> scan_pb2.ScanRequest:
    req = scan_pb2.ScanRequest(scene_id=scene, profile=profile, seed=seed, review_mode=review)
    for ep in model_specs(eval_models, "--eval-model"):
        req.evaluation.models.add(kind=ep.kind, url=ep.url, model=ep.model)
    req.evaluation.conditions.extend(condition_list(eval_conditions) or [])
    if landmarks is not None:
        if landmarks < 1:
            raise InvalidInput("--landmarks must be a positive count")
        req.landmark_count = landmarks
    if video:
        try:
            req.video.width, req.video.height = (int(v) for v in video.lower().split("x"))
        except ValueError:
            raise InvalidInput(f"--video needs WIDTHxHEIGHT, e.g. 480x360, got {video!r}") from None
    if bound:
        try:
            values = [float(v) for v in bound.split(",")]
        except ValueError:
            raise InvalidInput(
                f"--bound needs six numbers xmin,xmax,ymin,ymax,zmin,zmax, got {bound!r}"
            ) from None
        if len(values) != 6:
            raise InvalidInput(f"--bound needs six numbers xmin,xmax,ymin,ymax,zmin,zmax, got {len(values)}")
        (
            req.bound.xmin,
            req.bound.xmax,
            req.bound.ymin,
            req.bound.ymax,
            req.bound.zmin,
            req.bound.zmax,
        ) = values
    if spacing is not None:
        req.spacing_x_m = req.spacing_y_m = spacing
        if spacing <= 0:
            raise InvalidInput("--spacing must be positive metres")
    if altitude:
        req.altitudes_m.extend(altitude)
    if review not in ("auto", "human"):
        raise InvalidInput("--review must be auto or human")
    if profile not in scan.PROFILES:
        raise InvalidInput(f"--profile must be one of {', '.join(scan.PROFILES)}")
    full = scan.apply_defaults(req)
    full.run_id = run_id or scan.run_id_for(full)
    scan.validate(full)
    return full


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
        for name in PIPELINE_STAGES
        if (st := state.stages.get(name)) is not None and st.finished_at
    ]
    end = max((st.finished_at for st in state.stages.values()), default=0.0)
    total = end - state.created_at if end and state.created_at else 0.0
    return f"wall time {total:.0f}s; per stage: {', '.join(parts)}"


def _report(state: RunState, store_root: Path | None) -> None:
    if state.status == "failed":
        raise _fail(f"run {state.run_id} failed: {'; '.join(state.errors) or 'see service logs'}", 1)
    out.print(f"[bold green]run {state.run_id} completed[/]")
    out.print(_stage_times(state))
    for name, key in sorted(state.outputs.items()):
        where = (store_root / key) if store_root is not None else key
        out.print(f"  {name:<17} {where}")
    board = (
        store_root / state.outputs["leaderboard"] if store_root and "leaderboard" in state.outputs else None
    )
    if board is not None and board.is_file():
        _print_board(json.loads(board.read_text()))


SceneOpt = Annotated[
    str, typer.Option("--scene", help="scene id: demo_city, tiny_town, procedural_<seed>_<blocks>")
]
ProfileOpt = Annotated[str, typer.Option("--profile", help="preview (fast) or release (4096x3072 stills)")]
BoundOpt = Annotated[str | None, typer.Option("--bound", help="MapBound xmin,xmax,ymin,ymax,zmin,zmax (m)")]
SpacingOpt = Annotated[float | None, typer.Option("--spacing", help="pose spacing in x and y (m)")]
AltOpt = Annotated[list[float] | None, typer.Option("--altitude", help="capture altitude (m), repeatable")]
ReviewOpt = Annotated[
    str, typer.Option("--review", help="auto (rules + auto-label) or human (the review web)")
]
LandmarksOpt = Annotated[
    int | None,
    typer.Option("--landmarks", help="landmarks carried into the dataset (preview 10, release 50)"),
]
VideoOpt = Annotated[
    str | None, typer.Option("--video", help="mission video size WxH (preview 480x360, release 1440x1080)")
]
EvalModelsOpt = Annotated[
    list[str] | None,
    typer.Option("--eval-model", help="URL[#MODEL] the evaluator runs after the QA stage, repeatable"),
]
EvalConditionsOpt = Annotated[
    str | None, typer.Option("--eval-conditions", help=f"comma list of: {', '.join(CONDITIONS)}")
]


def _run_embedded(command: str, env: Embedded, body: Any) -> Any:
    """Start ``env``, run ``await body(env)``, stop everything and return its result; ``demo``
    and ``up`` both come through here so they stop the same way on SIGINT, SIGTERM and SIGHUP,
    also during start-up.

    A signal cancels the work (start-up and ``body``), again every second until it ends: a
    library that swallows one cancellation while a service connects would otherwise leave the
    launcher running with the signal spent. The cleanup runs outside that task, so no signal cuts
    it short (it is bounded: each service drains for at most 30 s, nats-server gets SIGKILL 10 s
    after SIGTERM). The exit code is the shell's 128 + signal number: 130 SIGINT, 143 SIGTERM,
    129 SIGHUP. A second launcher on a data dir in use exits 2 (``_fail``).
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
        raise _fail(str(exc)) from None
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
    eval_model: EvalModelsOpt = None,
    eval_conditions: EvalConditionsOpt = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for the run")] = 1800.0,
) -> None:
    """Start everything embedded, scan the demo scene, wait, and print where the outputs are."""
    settings = _settings()
    if not settings.review_token.get_secret_value():
        settings.review_token = SecretStr(secrets.token_urlsafe(16))
    if not settings.gateway.token.get_secret_value():
        settings.gateway.token = SecretStr(secrets.token_urlsafe(16))
    configure_logging("WARNING")
    opts = dict(bound=bound, spacing=spacing, altitude=altitude, review=review, landmarks=landmarks)
    try:
        # whoever starts the demo is its operator: the models it names are on its allow-list
        settings.evaluation.allowed_endpoints += model_specs(eval_model, "--eval-model")
    except InvalidInput as exc:
        raise _fail(str(exc)) from None
    req = _scan_request(
        scene,
        profile,
        None,
        admit=settings,
        video=video,
        eval_models=eval_model,
        eval_conditions=eval_conditions,
        **opts,
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
    settings = _settings()
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
    eval_model: EvalModelsOpt = None,
    eval_conditions: EvalConditionsOpt = None,
    nats_url: Annotated[str | None, typer.Option(help="default: SKYQA_BUS__NATS_URL")] = None,
    wait: Annotated[bool, typer.Option(help="follow progress until the run ends")] = True,
    timeout: float = 1800.0,
) -> None:
    """Publish a scan request and show live progress."""
    settings = _settings()
    url = nats_url or settings.bus.nats_url
    opts = dict(bound=bound, spacing=spacing, altitude=altitude, review=review, landmarks=landmarks)
    req = _scan_request(
        scene, profile, run_id, video=video, eval_models=eval_model, eval_conditions=eval_conditions, **opts
    )
    try:
        asyncio.run(publish_scan(url, req))
    except OSError as exc:
        raise _fail(f"cannot reach NATS at {url}; start it with 'skyqa up' ({exc})") from None
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
    settings = _settings()
    url = nats_url or settings.bus.nats_url
    try:
        state = asyncio.run(read_run(url, run_id))
    except OSError as exc:
        raise _fail(f"cannot reach NATS at {url}: {exc}") from None
    if state is None:
        raise _fail(f"no run {run_id!r}", 1)
    out.print_json(json.dumps(state.model_dump(mode="json")))


@app.command()
def refresh(
    run_id: str,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="embedded data dir (default: the configured store)")
    ] = None,
    videos: Annotated[bool, typer.Option(help="also re-render every mission video")] = False,
) -> None:
    """Re-render a run's assets from their recorded camera poses; ids, options and answers stay."""
    settings = _settings()
    store = _store(data_dir, settings)
    try:
        keys.validate_id(run_id, "run id")
        done = do_refresh(store, run_id, videos, settings.scenes_dir, settings.airsim, settings.qa.blind_gate)
    except BlobNotFound:
        raise _fail(
            f"run {run_id!r} has no QA plan in {store.describe()}; run it to the qa stage first", 1
        ) from None
    except InvalidInput as exc:
        raise _fail(str(exc)) from None
    out.print(
        f"re-rendered {done.env_observations} environment observations, {done.overlays} overlays "
        f"and {done.videos} videos; manifests rebuilt"
    )
    for name, key in sorted(done.manifests.items()):
        out.print(f"  {name:<17} {key}")


def model_specs(urls: list[str] | None, flag: str = "--model") -> list[ModelEndpoint]:
    """``URL[#MODEL]``: an http(s) URL is OpenAI-compatible (…/v1), anything else host:port gRPC."""
    out = []
    for text in urls or []:
        url, _, model = text.partition("#")
        kind = "openai" if url.startswith(("http://", "https://")) else "grpc"
        if not url or (kind == "grpc" and ":" not in url):
            raise InvalidInput(f"{flag} needs URL[#MODEL] (http://host:port/v1 or host:port), got {text!r}")
        out.append(ModelEndpoint(kind=kind, url=url, model=model))
    return out


def condition_list(text: str | None) -> list[str] | None:
    if not text:
        return None
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(CONDITIONS))
    if unknown:
        raise InvalidInput(f"unknown conditions {unknown}; choose from {', '.join(CONDITIONS)}")
    return wanted


ModelsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model", help="URL[#MODEL] to evaluate: http(s)://…/v1 (OpenAI-compatible) or host:port (gRPC)"
    ),
]
ConditionsOpt = Annotated[
    str | None, typer.Option("--conditions", help=f"comma list of: {', '.join(CONDITIONS)}")
]


@app.command("eval")
def eval_cmd(
    run_id: str,
    scene: SceneOpt = "demo_city",
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="embedded data dir (default: the configured store)")
    ] = None,
    models: ModelsOpt = None,
    conditions: ConditionsOpt = None,
    budget: Annotated[int, typer.Option(help="most requests per model (0: no cap)")] = 0,
) -> None:
    """Evaluate the baselines (and model endpoints) on a run's QA manifests; print the leaderboard."""
    settings = _settings()
    store = _store(data_dir, settings)
    try:
        keys.validate_id(run_id, "run id")
        endpoints = list(settings.evaluation.models) + model_specs(models)
        conds = condition_list(conditions) or settings.evaluation.conditions
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
    except BlobNotFound:
        raise _fail(
            f"run {run_id!r} of scene {scene!r} has no QA manifests; run it to the qa stage first", 1
        ) from None
    except InvalidInput as exc:
        raise _fail(str(exc)) from None
    _print_board(result.leaderboard)
    for name, key in sorted(result.outputs.items()):
        out.print(f"  {name:<17} {key}")


def _print_board(board: dict[str, Any]) -> None:
    out.print(
        "leaderboard (image option accuracy with 95% CI, joint option+box, visibility count exact, "
        "CircularEval):"
    )
    for e in board["models"]:
        img = e["image"]
        lo, hi = img.get("option_correct_ci95", [0.0, 0.0])
        circular = e["circular"].get("circular", 0) if "circular" in e else float("nan")
        out.print(
            f"  {e['model']:<14} {img.get('option_correct', 0):.3f} [{lo:.3f}, {hi:.3f}]"
            f"  joint {img.get('joint_correct', 0):.3f}"
            f"  count {e['video_visibility'].get('count_exact', 0):.3f}"
            f"  circular {circular:.3f}  parse {e['parse']}"
        )


@app.command("blind-filter")
def blind_filter_cmd(
    run_id: str,
    scene: SceneOpt = "demo_city",
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="embedded data dir (default: the configured store)")
    ] = None,
    models: ModelsOpt = None,
    samples: Annotated[int, typer.Option(help="text-only samples per model (r)")] = 3,
    quorum: Annotated[float, typer.Option(help="share of responders that must solve a row")] = 0.75,
    apply: Annotated[bool, typer.Option(help="also write a filtered copy of the image manifest")] = False,
) -> None:
    """Flag image MCQs that text-only responders answer without the image (MMMU-Pro style)."""
    settings = _settings()
    store = _store(data_dir, settings)
    try:
        keys.validate_id(run_id, "run id")
        if samples < 1 or not 0 < quorum <= 1:
            raise InvalidInput("--samples must be >= 1 and --quorum within (0, 1]")
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
    except BlobNotFound:
        raise _fail(
            f"run {run_id!r} of scene {scene!r} has no QA manifests; run it to the qa stage first", 1
        ) from None
    except InvalidInput as exc:
        raise _fail(str(exc)) from None
    out.print(f"{len(result.flagged)} of {result.rows} image rows answerable without the image")
    out.print(f"  report            {result.report_key}")
    if result.filtered_key:
        out.print(f"  filtered manifest {result.filtered_key}")


@app.command()
def serve(name: Annotated[str, typer.Argument(help=f"one of: {', '.join(SERVICES)}")]) -> None:
    """Run one service with settings from SKYQA_* env vars (the container command)."""
    if name not in SERVICES:
        raise _fail(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    settings = _settings()
    configure_logging(settings.log_level, settings.log_json)
    try:
        asyncio.run(SERVICES[name](settings, None).run())
    except OSError as exc:
        raise _fail(f"{name} cannot start: {exc}", 1) from None


@app.command()
def warmup() -> None:
    """Compile the renderer's kernels into the numba cache (image builds run this once)."""
    t = time.perf_counter()
    sim = BuiltinSimulator(load_scene("tiny_town"))
    sim.render(Pose(0.0, 0.0, 50.0, 0.0, -90.0), CameraSpec(32, 24, 60.0))
    out.print(f"renderer kernels ready in {time.perf_counter() - t:.1f} s")


def main() -> None:
    app(prog_name="skyqa")


if __name__ == "__main__":
    sys.exit(main())
