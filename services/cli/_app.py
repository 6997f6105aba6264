"""What every command shares: the typer app, the consoles, the one-line failure, settings,
the store a command reads, and the scan options several commands take."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from skyqa.blob import BlobStore, LocalBlobStore, open_store
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.runtime import Settings, load_settings
from skyqa.scan import EVAL_CONDITIONS

HELP = """``skyqa`` command line: run the services, submit scans, follow runs.

Exit codes: 0 done, 1 the run failed, 2 bad input or configuration (one line says what to fix).
"""

app = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP)
err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


def store_for(data_dir: Path | None, settings: Settings) -> BlobStore:
    """The embedded store under ``--data-dir``, else the configured one."""
    return LocalBlobStore(data_dir / "store") if data_dir else open_store(settings.store)


@contextlib.contextmanager
def user_errors(missing: str = "") -> Iterator[None]:
    """What a user can fix, as the CLI's one line: bad input exits 2; with ``missing``, a stored
    input that is not there exits 1 with that message."""
    try:
        yield
    except BlobNotFound:
        if not missing:
            raise
        raise fail(missing, 1) from None
    except InvalidInput as exc:
        raise fail(str(exc)) from None


def settings_or_exit(**overrides: object) -> Settings:
    with user_errors():
        return load_settings(**overrides)


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
StillsOpt = Annotated[
    str | None,
    typer.Option(
        "--stills",
        help="landmark views WxH[@WxH]: the size shipped, then the size views are rendered and "
        "checked at before review (preview 640x480, release 4096x3072@1024x768)",
    ),
]
NavigationOpt = Annotated[
    str | None,
    typer.Option(
        "--navigation",
        help="navigation missions GOALS,ROUTES[,PER_TYPE] per run, PER_TYPE questions per mission "
        "and type (default 3,2,1; 0,0 for none)",
    ),
]
NavigationTypesOpt = Annotated[
    str | None,
    typer.Option(
        "--navigation-types", help="comma list of the navigation question types asked (default all 16)"
    ),
]
GroupsOpt = Annotated[
    str | None,
    typer.Option(
        "--groups",
        help="UAV group sizes[xGROUPS_PER_SIZE]: 3,5,6x12 is 12 groups of each size (default 3,5,6 "
        "once each; 0 for none)",
    ),
]
ReasoningOpt = Annotated[
    str | None,
    typer.Option(
        "--reasoning",
        help="Reasoning-Structured-Videos trajectories: PER_SPLIT[,RANDOM_WALKS] (default 2; 0 for none)",
    ),
]
SurveysOpt = Annotated[
    str | None,
    typer.Option(
        "--surveys",
        help="UltraVR-style ultra-resolution surveys: COUNT[,WIDTHxHEIGHT] (default 1,8192x6144; 0 for none)",
    ),
]
EvalModelsOpt = Annotated[
    list[str] | None,
    typer.Option("--eval-model", help="URL[#MODEL] the evaluator runs after the QA stage, repeatable"),
]
EvalConditionsOpt = Annotated[
    str | None, typer.Option("--eval-conditions", help=f"comma list of: {', '.join(EVAL_CONDITIONS)}")
]
DataDirOpt = Annotated[
    Path | None, typer.Option("--data-dir", help="embedded data dir (default: the configured store)")
]
ModelsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model", help="URL[#MODEL] to evaluate: http(s)://…/v1 (OpenAI-compatible) or host:port (gRPC)"
    ),
]
ConditionsOpt = Annotated[
    str | None, typer.Option("--conditions", help=f"comma list of: {', '.join(EVAL_CONDITIONS)}")
]


def print_world_board(board: dict[str, Any]) -> None:
    out.print("world models (GT-anchored / self-consistency PSNR per split, dB; 100 = exact):")
    for m in board["models"]:
        cells = [f"{s} {_db(e['gt_psnr'])}/{_db(e['sc_psnr'])}" for s, e in m["splits"].items()]
        out.print(f"  {m['model']:<19} {m['gt_psnr']:6.1f}  " + "  ".join(cells), highlight=False)


def _db(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def print_board(board: dict[str, Any]) -> None:
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
