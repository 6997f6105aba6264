"""The dataset card (Hugging Face ``datasets`` front matter); each family writes its own exports.

The release folder is the run prefix (``runs/<run_id>/``) copied out: manifests and media keep
their relative paths, and the card's ``configs`` let ``datasets.load_dataset(folder, "image_qa")``
read the manifests.
"""

from __future__ import annotations

from dataclasses import dataclass

from skyqa.contracts.qa import QCReport


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


def dataset_card(
    scene_id: str, run_id: str, report: QCReport, keys: dict[str, str], root: str, media: Media
) -> bytes:
    rel = {k: v.removeprefix(root + "/") for k, v in keys.items()}
    f = report.funnel
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
- config_name: image_qa
  data_files: [{{split: test, path: "{rel["image_qa"]}"}}]
- config_name: video_qa
  data_files: [{{split: test, path: "{rel["video_qa"]}"}}]
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
| image rows (8 per landmark, less blind-dropped) | {f.image_rows} |
| video rows (4 per landmark, less dropped below) | {f.video_rows} |
| rows every blind solver answered (dropped) | {f.blind_dropped} |
| visibility rows of an over-represented count (dropped) | {f.count_balance_dropped} |
| visibility rows whose count changes within the sighting rule's margin (dropped) | {f.count_margin_dropped} |

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

- `{rel["image_qa"]}`: image rows: `self_where` (Landmark-Relative Position Reasoning),
  `self_what` (Future Observation Prediction), `env_where` (Self-Relative Position Reasoning),
  `env_how` (Landmark-Driven Action Decision), each at 4-way and 8-way; answer
  `{{"answer_option_id", "bbox_xyxy_norm"}}`; `reasoning_steps` give GND/PER/QUA/INT/INF steps.
- `{rel["video_qa"]}`: video rows: Flight Behavior Recognition and Temporal Localization
  (`answers[].intervals_sec`) and Landmark Visibility Counting and Interval Reasoning
  (`visible_count`, `visible_intervals_sec`).
- `{rel["image_mcq_tsv"]}`: the image MCQs in VLMEvalKit's TSV layout (`image_path` lists the images).
- `{rel["render_requests"]}`: camera pose and size of every rendered asset; `skyqa refresh`
  re-renders them without changing any id, option or answer.

## Media contract

This run ({media.profile} profile): stills {media.still_width}x{media.still_height} JPEG quality
{media.jpeg_quality}; videos {media.video_width}x{media.video_height} H.264 (libx264, baseline),
yuv420p, {media.fps} FPS, {media.video_bitrate / 1e6:g} Mb/s, MP4 with `+faststart`. (UAV-DualCog's
release contract is 4096x3072 stills at JPEG 80 and 1440x1080 video at 10 Mb/s: the release
profile.) Environment
rows' `env_how` gold is the move that brings the landmark to the image centre: turn towards
its side and climb or descend towards it (4-way: the dominant axis, at least 5 degrees off and
1.5 times the other; 8-way: every axis at least 5 degrees off). `env_where` offers only the
labels a forward camera that shows the landmark allows (left of, at, or right of the forward
direction; straight ahead under 5 degrees). A row is asked only when its answer is at least 2
degrees from every angle boundary and its dominant axis at least 1.95 times the other, and
gives the same answer when the landmark's centre is taken as the centre of its visible pixels.
""".encode()
