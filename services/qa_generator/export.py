"""The dataset card (Hugging Face ``datasets`` front matter); each family writes its own exports.

The release folder is the run prefix (``runs/<run_id>/``) copied out: manifests and media keep
their relative paths. For ``datasets.load_dataset(folder, "image_qa")`` to yield decoded images,
each family's rows are also written at the release root as ``<manifest>.metadata.jsonl`` with a
``media_file_names`` column (its images in prompt order): ``datasets``' image-folder builder
resolves those paths against the metadata file's folder, which must hold every image, and loads
them as a ``media`` list of ``Image`` features. ``datasets`` builds a local folder with one
builder for every config (the image folder here), which resolves and types only images, and a
config's features cannot be declared in the card (the folder builder replaces them with the
metadata file's), so videos stay paths relative to the release, typed as strings, and a family
whose rows show only videos gets no config. Configs name their metadata file with
``metadata_filenames``, which ``datasets`` 3.x ignores (it yields the bare image files), so the
card states the supported version.

A metadata column must have one type across the rows of a config (``datasets`` reads the file
with pyarrow, which fails on a column that is a number in one row and a list in the next). The
row models fix most types; where one does not (``dict[str, Any]`` evidence, a union of a number
and a list), the field is written as a JSON string in every row, and the card names it.
"""

from __future__ import annotations

import json
import posixpath
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from skyqa.audit import card_section
from skyqa.contracts.qa import QCReport, TaskGate
from skyqa.families import RELEASED, ReleaseFamily, metadata_file


@dataclass(frozen=True)
class Media:
    """What this run's files really are (the card must not quote another profile's contract)."""

    profile: str
    still_width: int
    still_height: int
    jpeg_quality: int
    video_width: int
    video_height: int
    video_bitrate: int
    fps: str  # as measured on the released videos


HF_MEDIA = "media_file_names"
DATASETS_RANGE = "5.x"  # tested with 5.2.0; 3.x ignores metadata_filenames
_KINDS = {str: "string", int: "number", float: "number", bool: "bool"}


def _shape(ann: Any) -> str | None:
    """The one JSON shape every value of the annotation has once :func:`_cells` wrote it, or
    None when values of it may differ in type from row to row."""
    if ann in _KINDS:
        return _KINDS[ann]
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return f"model:{ann.__qualname__}"
    origin, args = get_origin(ann), get_args(ann)
    if origin is Literal:
        kinds = {_KINDS.get(type(a)) for a in args}
        return kinds.pop() if len(kinds) == 1 else None
    if origin in (Union, types.UnionType):
        arms = {_shape(a) for a in args if a is not type(None)}
        return arms.pop() if len(arms) == 1 else None
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        inner = _shape(args[0]) if args else None
        return None if inner is None else f"list[{inner}]"
    if origin is tuple:
        inner_kinds = {_shape(a) for a in args}
        one = inner_kinds.pop() if len(inner_kinds) == 1 else None
        return None if one is None else f"list[{one}]"
    if origin is dict and len(args) == 2:
        inner = _shape(args[1])
        return None if inner is None else f"dict[{inner}]"
    return None  # Any, object, anything else: no one type


def _cell(value: Any, ann: Any) -> Any:
    """``value`` (JSON data of the annotation) with every part of no fixed type as a JSON string."""
    if value is None:
        return None
    if _shape(ann) is None:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _cells(value, ann)
    origin, args = get_origin(ann), get_args(ann)
    if origin in (Union, types.UnionType):
        arm = next(a for a in args if a is not type(None))
        return _cell(value, arm)
    if origin is list or origin is tuple:
        return [_cell(v, args[0]) for v in value]
    if origin is dict:
        return {k: _cell(v, args[1]) for k, v in value.items()}
    return value


def _cells(data: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    fields = model.model_fields
    return {k: _cell(v, fields[k].annotation) if k in fields else v for k, v in data.items()}


def json_columns(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The fields a metadata file writes as JSON strings (nested ones dotted)."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if _shape(ann) is None:
            out.append(prefix + name)
            continue
        # look through lists and optionals for nested models
        while get_origin(ann) in (list, tuple, Union, types.UnionType):
            ann = next(a for a in get_args(ann) if a is not type(None))
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += json_columns(ann, f"{prefix}{name}.")
    return out


def _stills(fam: ReleaseFamily[Any], row: Any) -> list[str]:
    return [m.path for m in fam.media(row) if m.fps is None]


def hf_metadata(fam: ReleaseFamily[Any], rows: Sequence[Any]) -> bytes:
    """A family's rows as an image-folder metadata file: each row (fields of no fixed type as JSON
    strings) plus its still images."""
    lines = []
    for row in rows:
        data = _cells(row.model_dump(mode="json"), type(row))
        data[HF_MEDIA] = _stills(fam, row)
        lines.append(json.dumps(data, sort_keys=True, ensure_ascii=False) + "\n")
    return "".join(lines).encode()


def hf_globs(fam: ReleaseFamily[Any], rows: Sequence[Any]) -> list[str]:
    """Globs over the folders the rows' images are in; ``datasets`` picks the image-folder builder
    because image files outnumber the one metadata file."""
    paths = {p for row in rows for p in _stills(fam, row)}
    return sorted(
        {f"{posixpath.dirname(posixpath.dirname(p)) or '.'}/**/*{posixpath.splitext(p)[1]}" for p in paths}
    )


def dataset_card(
    scene_id: str,
    run_id: str,
    report: QCReport,
    files: dict[str, str],
    root: str,
    media: Media,
    globs: dict[str, list[str]],
    families: Sequence[ReleaseFamily[Any]] = RELEASED,
) -> bytes:
    """Front matter with one ``datasets`` config per family manifest; each family adds its funnel
    lines, its files (manifests listed first) and its answer rules."""
    rel = {k: v.removeprefix(root + "/") for k, v in files.items()}
    f = report.funnel
    parts = [(fam, fam.card(rel, f)) for fam in families]
    # ``datasets`` picks one builder for the whole folder (the image folder): a family whose rows
    # show no images (videos only) gets no config; it ships a table of its own
    configs = "\n".join(
        _config(fam.manifest, rel[metadata_file(fam)], globs[fam.manifest])
        for fam, _ in parts
        if globs.get(fam.manifest)
    )
    as_json = [
        f"`{fam.manifest}`: " + ", ".join(f"`{c}`" for c in cols)
        for fam, _ in parts
        if (cols := json_columns(fam.row_model))
    ]
    without = ", ".join(f"`{fam.manifest}`" for fam, _ in parts if not globs.get(fam.manifest))
    loading = _loading(without or "none", "; ".join(as_json) or "none")
    manifests = {fam.manifest for fam, _ in parts}
    listed = [text for _, part in parts for name, text in part.files if name in manifests]
    listed += [text for _, part in parts for name, text in part.files if name not in manifests]
    family_files = "\n".join(listed)
    counted = "\n".join(line for _, part in parts for line in part.funnel)
    dropped = "\n".join(line for _, part in parts for line in part.drops)
    notes = "".join(part.notes for _, part in parts)
    reasons = "\n".join(f"| {k} | {v} |" for k, v in report.drop_reasons.items()) or "| (none) | 0 |"
    g = report.blind_gate
    gate_rows = "\n".join(_gate_row(task, t) for task, t in sorted(g.tasks.items()))
    withheld = "\n".join(f"- `{task}`: {'; '.join(why)}" for task, why in sorted(g.withheld.items()))
    withheld += "".join(f"\n- unit `{u}`: {why}" for u, why in sorted(g.withheld_units.items()))
    short = "; ".join(f"`{t}` {why}" for t, why in sorted(report.shortfall.items()))
    verdict = (
        "passed: nothing withheld"
        if g.passed
        else f"{g.withheld_rows} rows withheld ({len(g.withheld)} tasks, {len(g.withheld_units)} units)"
        if g.mode == "enforce"
        else "leaks found, reported only (the gate ran in report mode and withheld nothing)"
    )
    mix = ", ".join(f"{k} {v}" for k, v in report.category_mix.items()) or "none"
    return f"""---
pretty_name: skyqa {scene_id}
license: cc-by-4.0
task_categories: [visual-question-answering]
configs:
{configs}
---
# skyqa benchmark: {scene_id} (run `{run_id}`)

Aerial embodied-cognition VQA built the UAV-DualCog way: reviewed landmarks from a fused
semantic point cloud, image QA on landmark views and rendered environment observations, and
video QA on behavior-driven flight missions. Image answers were re-checked against scene
geometry by an independent code path, visible counts and intervals re-derived from the stored
segmentation frames, and reasoning steps checked against the paired rows (see
`{rel["qc_report"]}`).

## Release funnel

| stage | count |
|---|---|
| candidate (class, instance) pairs | {f.candidates} |
| landmarks with enough valid views | {f.collected} |
| reviewed (kept and labelled) | {f.reviewed} |
| released landmarks (any family's whole share) | {f.released_landmarks} |
| of them without another family's rows (`partly_released` in the QC report) | {len(report.partly_released)} |
{counted}
| rows withheld by the blind gate | {f.blind_withheld} |
{dropped}

Dropped rows by reason:

| reason | rows |
|---|---|
{reasons}

Released landmarks by category: {mix}.

## Blind gate

Solvers that never see a pixel answered every question, each trained on the rows of the other
units (landmarks, missions, UAV groups, survey views; ten folds at most): gold-letter and
gold-label priors, the gold's rank among numeric options, a logistic regression over question
and option n-grams and option structure, one over option structure alone, cross-unit fact
memory, the nearest question's answer, and rules that learn nothing (the longest, the shortest,
the odd-worded option, the option repeating the question, the option the others share words
with). Per task the gate tests each solver's score against chance (a trained solver on answers
it gave each block of units from the blocks before it, which makes the binomial exact), each
rule's score *below* chance (avoiding its pick would then win), gold labels against what the
options offer, gold letters, and a constant answer box; per family it pools each solver over
the family's tasks. Errors are controlled over the release ({g.correction}; {g.tests} tasks and
families, level {g.alpha}), so a release with no leak passes with probability at least
{1 - g.alpha:.2f}. A task whose test rejects is withheld and drawn again where its family can,
and the rest ship. A task whose test could not see a leak of {g.min_leak:.2f} above chance with
80 % power, at the level a single leak in it would have to meet, is **unverified** (not passed):
it is too small to vouch for alone. Verdict: **{verdict}**.

| task | family | rows | units | status | best solver | score [95 % CI] | chance | adj. p | detectable |
|---|---|---|---|---|---|---|---|---|---|
{gate_rows}

Withheld:

{withheld or "- nothing"}

Rows per question task against the quota of {report.task_quota}: {short or "every task meets it"}.

{card_section(report.audit)}
{loading}

## Files

{family_files}
- `{rel["render_requests"]}`: camera pose and size of every rendered asset; `skyqa refresh`
  re-renders them without changing any id, option or answer.
- `{rel["qc_rows"]}`: every checked row, released or dropped with its reason, and the blind
  solvers that answered it without pixels (what the gateway's workbench browses).
- `qc_audit/` (present once someone answered the workbench's audit): the audit sample and
  every answer (who, when, the reply), one file per person and row.
- `release.json` and `SHA256SUMS`: what made the release, and the sha256 of every file of it
  (`sha256sum -c SHA256SUMS`, or `skyqa verify <this folder>`).
- `eval/` (present once the release was evaluated): evaluation outputs, written after the
  release and so not in `SHA256SUMS`; `eval/SHA256SUMS` covers them and is rewritten after each
  evaluation (`cd eval && sha256sum -c SHA256SUMS`); `skyqa verify` checks both.

## Media contract

This run ({media.profile} profile): stills {media.still_width}x{media.still_height} JPEG quality
{media.jpeg_quality}; videos {media.video_width}x{media.video_height} H.264 (libx264, baseline),
yuv420p, {media.fps} FPS, {media.video_bitrate / 1e6:g} Mb/s, MP4 with `+faststart`. (UAV-DualCog's
release contract is 4096x3072 stills at JPEG 80 and 1440x1080 video at 10 Mb/s: the release
profile.) skyqa's evaluator sends the stills to a model as stored (only its thumbnail condition
shrinks them) and a video as the frames its family's source benchmark samples (UrbanVideo-Bench
32 per clip, UAV-DualCog every frame at 10 FPS); only an endpoint's own stated limits clip
that, and every evaluation records the policy each model got in `eval/leaderboard.json`
(`media_policy`).{notes}
""".encode()


def _loading(without: str, as_json: str) -> str:
    return f"""## Loading with Hugging Face `datasets`

`datasets.load_dataset("<this folder>", "<config>", split="test")` with `datasets` {DATASETS_RANGE}
(tested with 5.2.0). `datasets` 3.x is not supported: it ignores the configs'
`metadata_filenames` and yields a single column of bare image files, without the rows.

- `media` is the row's images, decoded, in prompt order.
- Videos are not typed `Video`: `datasets` reads a local folder with one builder for every
  config (the image folder), which resolves and types only images, so a row's video is a path
  string relative to this folder (`video_path`, `video`). To type it yourself, join it to this
  folder and `ds.cast_column(column, datasets.Video(decode=False))`; decoding a `Video` needs
  `torchcodec` (with PyTorch), which skyqa does not install.
- Families whose rows show only videos have no config here ({without}); their manifests are
  JSON Lines (`load_dataset("json", data_files=...)`) and the trajectories ship
  `reasoning_videos/index.parquet`.
- Fields whose type varies from row to row are JSON strings in every row (`json.loads` them):
  {as_json}."""


def _config(manifest: str, meta: str, globs: list[str]) -> str:
    paths = ", ".join(json.dumps(p) for p in [meta, *globs])
    return (
        f"- config_name: {manifest}\n  data_files: [{{split: test, path: [{paths}]}}]\n"
        f"  metadata_filenames: [{meta}]\n  drop_labels: true"
    )


def _gate_row(task: str, t: TaskGate) -> str:
    best = t.solvers.get(t.best_solver)
    score = f"{best.score:.3f} [{best.ci[0]:.3f}, {best.ci[1]:.3f}]" if best else "-"
    return (
        f"| {task} | {t.family} | {t.rows} | {t.units} | {t.status} | {t.best_solver or '-'} | {score} | "
        f"{t.chance:.3f} | {t.p_value:.3g} | {t.detectable:.2f} |"
    )
