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
    """Recheck every file of a release against its SHA256SUMS, and its evaluation outputs against
    eval/SHA256SUMS; exit 1 naming the first problem."""
    from skyqa import integrity

    if not release.is_dir():
        raise fail(f"{release} is not a folder; pass a release folder (runs/<run>/)")
    try:
        checked, problems = integrity.verify(release)
    except FileNotFoundError:
        raise fail(f"{release} has no {integrity.SUMS}; it is not a sealed skyqa release", 1) from None
    except InvalidInput as exc:
        raise fail(f"{release}: {exc}", 1) from None
    # the evaluation outputs are written after the release, under their own checksum file
    evaluated = integrity.verify_eval(release)
    eval_problems = evaluated[1] if evaluated else []
    problems = problems + eval_problems
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        for p in problems[1:20]:
            out.print(f"  {p}", highlight=False)
        raise fail(f"{problems[0]}{more}", 1)
    out.print(f"{checked} files match {integrity.SUMS}")
    if evaluated:
        out.print(f"{evaluated[0]} evaluation files match {integrity.EVAL}/{integrity.SUMS}")


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


@export_app.command("dualcog")
def export_dualcog(
    release: ReleaseArg,
    into: Annotated[
        Path, typer.Option("--into", help="a checkout of SmartDianLab/UAV-DualCog", show_default=False)
    ],
    copy: Annotated[bool, typer.Option("--copy", help="copy the media instead of linking them")] = False,
) -> None:
    """Lay the release into a UAV-DualCog checkout where its Stage 3 and Stage 4 runners read:
    config, manifests (paths relative to the checkout) and media under task_pipeline_data/skyqa/."""
    from skyqa.exports import dualcog
    from skyqa.exports.release import Release

    with user_errors():
        opened = Release.open(release)
        counts = dualcog.write(opened, into, copy)
        lay = dualcog.layout_of(opened)
    out.print(
        f"{counts['linked']} files linked, {counts['copied']} copied, {counts['written']} written "
        f"under {into}/{lay.root} and {lay.config}",
        highlight=False,
    )
    out.print(
        f"run from {into}: python scripts/uav_dualcog/task_pipeline.py --config {lay.config} "
        f"--task-name {dualcog.TASK} --stage stage4 --phase experiment --experiment-models <model>",
        highlight=False,
    )
