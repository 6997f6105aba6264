"""Working with a release folder once it is out of the store: ``verify`` its checksums and
``export`` it for the field's evaluation frameworks.

Every container runs ``skyqa serve``, which imports this module: what the commands need loads
inside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from skyqa.errors import InvalidInput

from services.cli._app import app, fail, out, user_errors

ReleaseArg = Annotated[
    Path,
    typer.Argument(help="a release folder: runs/<run>/ copied out of the store", show_default=False),
]


@app.command()
def verify(release: ReleaseArg) -> None:
    """Recheck every file of a release against its SHA256SUMS; exit 1 naming the first problem."""
    from skyqa import integrity

    if not release.is_dir():
        raise fail(f"{release} is not a folder; pass a release folder (runs/<run>/)")
    try:
        checked, problems = integrity.verify(release)
    except FileNotFoundError:
        raise fail(f"{release} has no {integrity.SUMS}; it is not a sealed skyqa release", 1) from None
    except InvalidInput as exc:
        raise fail(f"{release}: {exc}", 1) from None
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        for p in problems[1:20]:
            out.print(f"  {p}", highlight=False)
        raise fail(f"{problems[0]}{more}", 1)
    out.print(f"{checked} files match {integrity.SUMS}")


export_app = typer.Typer(no_args_is_help=True, help="Write a release in an evaluation framework's format.")
app.add_typer(export_app, name="export")

OutOpt = Annotated[Path, typer.Option("--out", help="where to write it", show_default=False)]


@export_app.command("vlmevalkit")
def export_vlmevalkit(
    release: ReleaseArg,
    out_path: OutOpt,
    max_side: Annotated[
        int, typer.Option(help="downscale images whose longer side is larger (0 keeps the files as shipped)")
    ] = 1280,
) -> None:
    """The image MCQs as VLMEvalKit's native TSV (base64 images): put it in $LMUData as
    <name>.tsv and run `python run.py --data <name> --model ...`."""
    from skyqa.exports import vlmevalkit
    from skyqa.exports.release import Release

    with user_errors():
        if max_side < 0:
            raise InvalidInput("--max-side must be 0 (keep) or a positive number of pixels")
        rows = vlmevalkit.write(Release.open(release), out_path, max_side)
    out.print(f"{rows} image MCQs written to {out_path}")


@export_app.command("lmms-eval")
def export_lmms_eval(release: ReleaseArg, out_path: OutOpt) -> None:
    """A task folder for lmms-eval: `lmms_eval --include_path <out> --tasks skyqa_image,skyqa_video`."""
    from skyqa.exports import lmms_eval
    from skyqa.exports.release import Release

    with user_errors():
        counts = lmms_eval.write(Release.open(release), out_path)
    for task, n in counts.items():
        out.print(f"  {task:<24} {n} rows")
    out.print(f"lmms-eval tasks written to {out_path}")
