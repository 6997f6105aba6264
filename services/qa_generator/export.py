"""The dataset card (Hugging Face ``datasets`` front matter); each family writes its own exports.

The release folder is the run prefix (``runs/<run_id>/``) copied out: manifests and media keep
their relative paths. For ``datasets.load_dataset(folder, "image_qa")`` to yield decoded images,
each family's rows are also written at the release root as ``<manifest>.metadata.jsonl`` with a
``media_file_names`` column (its images in prompt order): ``datasets``' image-folder builder
resolves those paths against the metadata file's folder, which must hold every image, and loads
them as a ``media`` list of ``Image`` features. Videos stay paths relative to the release.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skyqa.contracts.qa import QCReport
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


def hf_metadata(fam: ReleaseFamily[Any], rows: Sequence[Any]) -> bytes:
    """A family's rows as an image-folder metadata file: each row plus its still images."""
    lines = []
    for row in rows:
        data = row.model_dump(mode="json")
        data[HF_MEDIA] = [m.path for m in fam.media(row) if m.fps is None]
        lines.append(json.dumps(data, sort_keys=True, ensure_ascii=False) + "\n")
    return "".join(lines).encode()


def hf_globs(fam: ReleaseFamily[Any], rows: Sequence[Any]) -> list[str]:
    """Globs over the folders the rows' images are in; ``datasets`` picks the image-folder builder
    because image files outnumber the one metadata file."""
    paths = {m.path for row in rows for m in fam.media(row) if m.fps is None}
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
    manifests = {fam.manifest for fam, _ in parts}
    listed = [text for _, part in parts for name, text in part.files if name in manifests]
    listed += [text for _, part in parts for name, text in part.files if name not in manifests]
    family_files = "\n".join(listed)
    counted = "\n".join(line for _, part in parts for line in part.funnel)
    dropped = "\n".join(line for _, part in parts for line in part.drops)
    notes = "".join(part.notes for _, part in parts)
    reasons = "\n".join(f"| {k} | {v} |" for k, v in report.drop_reasons.items()) or "| (none) | 0 |"
    g = report.blind_gate
    gate_rows = "\n".join(
        f"| {task} | {t.rows} | {t.best_solver} | {t.solvers[t.best_solver].score:.3f} "
        f"[{t.solvers[t.best_solver].ci[0]:.3f}, {t.solvers[t.best_solver].ci[1]:.3f}] | "
        f"{t.solvers[t.best_solver].chance:.3f} | "
        f"{'-' if t.box_prior_acc50 is None else f'{t.box_prior_acc50:.3f}'} |"
        for task, t in sorted(g.tasks.items())
    )
    verdict = "passed" if g.passed else "FAILED: " + "; ".join(g.failures)
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
| released landmarks (full lattice) | {f.released_landmarks} |
{counted}
| rows every blind solver answered (dropped) | {f.blind_dropped} |
{dropped}

Dropped rows by reason:

| reason | rows |
|---|---|
{reasons}

Released landmarks by category: {mix}.

## Blind gate

Solvers that never see a pixel (gold-letter prior, gold-label prior, a leave-one-landmark-out
text and option-structure model, a most-specific-option heuristic for multiple-answer rows, and a
constant box) answered every row. A task fails when the best of them is above chance +
{g.margin:.2f} (one-sided, p < {g.alpha}, Holm over solvers) or the constant box scores
Acc@0.5 significantly above {g.box_prior_max}. Verdict: **{verdict}**. Rows every answering
solver got right were dropped: {g.dropped_rows}. Scores are accuracy, or mean set-F1 for
multiple-answer rows (chance: same-size random picks), with 95 % intervals.

| task | rows | best blind solver | score | chance | constant box Acc@0.5 |
|---|---|---|---|---|---|
{gate_rows}

## Files

{family_files}
- `{rel["render_requests"]}`: camera pose and size of every rendered asset; `skyqa refresh`
  re-renders them without changing any id, option or answer.
- `{rel["qc_rows"]}`: every checked row, released or dropped with its reason, and the blind
  solvers that answered it without pixels (what the gateway's workbench browses).

## Media contract

This run ({media.profile} profile): stills {media.still_width}x{media.still_height} JPEG quality
{media.jpeg_quality}; videos {media.video_width}x{media.video_height} H.264 (libx264, baseline),
yuv420p, {media.fps} FPS, {media.video_bitrate / 1e6:g} Mb/s, MP4 with `+faststart`. (UAV-DualCog's
release contract is 4096x3072 stills at JPEG 80 and 1440x1080 video at 10 Mb/s: the release
profile.){notes}
""".encode()


def _config(manifest: str, meta: str, globs: list[str]) -> str:
    paths = ", ".join(json.dumps(p) for p in [meta, *globs])
    return (
        f"- config_name: {manifest}\n  data_files: [{{split: test, path: [{paths}]}}]\n"
        f"  metadata_filenames: [{meta}]\n  drop_labels: true"
    )
