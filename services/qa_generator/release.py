"""The release of a QA plan: ``finish`` reads the rendered env observations, fills their boxes,
runs QC and the blind gate, keeps only landmarks with the full lattice (8 image + 4 video rows)
and writes the manifests, the render_requests sidecar, the QC report and the exports. It is a
pure function of the plan and the stored assets, which is what makes ``skyqa refresh`` safe.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Literal

import numpy as np
from pydantic import BaseModel
from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts import ValidInstance, ValidInstancesFile, load_json
from skyqa.contracts.base import dump_json
from skyqa.contracts.qa import (
    BlindGate,
    Funnel,
    ImageRow,
    QCReport,
    VideoRow,
)
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.scan import stills

from services.qa_generator import export, gate, qc
from services.qa_generator.assets import draw_overlay
from services.qa_generator.image_tasks import (
    LandmarkSkipped,
    finish_env_row,
)
from services.qa_generator.pipeline import QAPlan, scan_of
from services.qa_generator.placement import count_surplus


def _jsonl(rows: list[BaseModel]) -> bytes:
    return b"".join(json.dumps(r.model_dump(mode="json"), sort_keys=True).encode() + b"\n" for r in rows)


class ReleaseLeaks(InvalidInput):
    """Solvers that never see a pixel answer the release better than chance."""

    reason = "blind_gate_failed"


def finish(
    p: QAPlan, store: BlobStore, gate_mode: Literal["enforce", "report"]
) -> tuple[QCReport, dict[str, str]]:
    """Fill env boxes, run QC and the blind gate, keep complete landmarks, write manifests and
    exports. With ``gate_mode="enforce"`` a leaking release raises :class:`ReleaseLeaks` after
    writing its QC report and before writing any manifest."""
    root = keys.run_prefix(p.run_id)
    for o in p.requests.overlays:
        if not store.exists(f"{root}/{o.output_image}"):
            draw_overlay(store, root, o)
    requests = {r.request_id: r for r in p.requests.env_requests}
    masks: dict[str, np.ndarray] = {}
    for r in p.requests.env_requests:
        key = f"{root}/{r.output_segmentation}"
        if store.exists(key):
            masks[r.request_id] = media.decode_segmentation(store.get(key))[1]
    drop: dict[str, str] = {}
    rows: list[ImageRow] = []
    for row in p.image_rows:
        if row.task_type.startswith("env"):
            rid = str(row.metadata["env_request_id"])
            if rid not in masks:
                drop[row.sample_id] = "environment observation missing"
                rows.append(row)
                continue
            try:
                row = finish_env_row(row, requests[rid], masks[rid])
            except LandmarkSkipped as exc:
                drop[row.sample_id] = str(exc)
        rows.append(row)
    valid = load_json(ValidInstancesFile, store.get(p.valid_instances), "valid instances")
    landmarks: dict[str, ValidInstance] = {v.instance_id: v for v in valid.valid_instances}
    kept = [r for r in rows if r.sample_id not in drop]
    image_verdict = qc.check_image_rows(kept, landmarks, requests, masks)
    drop.update(qc.check_reasoning(kept).reasons)
    shares = {
        r.mission_id: _pixel_shares(store, p.run_id, r.mission_id, r.frame_count, p.mission_instance_ids)
        for r in p.video_rows
        if r.form == "env_visibility_reasoning"
    }
    video_verdict, ambiguous = qc.check_video_rows(p.video_rows, shares)
    drop.update(image_verdict.reasons)
    drop.update(video_verdict.reasons)
    # a landmark is released only with its whole lattice: 8 image rows and 2 missions x 2 rows
    incomplete = dict(p.skipped)
    for lm in p.landmarks:
        if lm in incomplete:
            continue
        img = [r for r in rows if r.landmark_id == lm]
        vid = [r for r in p.video_rows if r.landmark_id == lm]
        both: list[ImageRow | VideoRow] = [*img, *vid]
        bad = [drop[r.sample_id] for r in both if r.sample_id in drop]
        if bad:
            incomplete[lm] = bad[0]
        elif len(img) != 8 or len(vid) != 4:
            incomplete[lm] = (
                f"{len(img)} image rows and {len(vid)} video rows (needs 8 and 4: missions rejected)"
            )
    final_img = [r for r in rows if r.landmark_id not in incomplete]
    # an ambiguous count costs its row, not the landmark's lattice (like an over-represented one)
    unsure = {
        r.sample_id
        for r in p.video_rows
        if r.landmark_id not in incomplete and r.sample_id in ambiguous.reasons
    }
    final_vid = [r for r in p.video_rows if r.landmark_id not in incomplete and r.sample_id not in unsure]
    surplus = set(
        count_surplus(
            [
                (r.sample_id, r.mission_kind, _visible_count(r))
                for r in final_vid
                if r.form == "env_visibility_reasoning"
            ]
        )
    )
    final_vid = [r for r in final_vid if r.sample_id not in surplus]
    blind = gate.run_gate(final_img, final_vid, qc.letter_balance(final_img))
    solved = set(blind.solved_by_all)
    final_img = [r for r in final_img if r.sample_id not in solved]
    final_vid = [r for r in final_vid if r.sample_id not in solved]
    reasons = Counter(drop.values())
    reasons.update(ambiguous.reasons[s] for s in unsure)
    every: list[ImageRow | VideoRow] = [*rows, *p.video_rows]
    lost = [r for r in every if r.landmark_id in incomplete and r.sample_id not in drop]
    reasons.update({"landmark incomplete": len(lost)} if lost else {})
    reasons.update({"every blind solver answers it": len(solved)} if solved else {})
    reasons.update({"visible count over-represented": len(surplus)} if surplus else {})
    final: list[ImageRow | VideoRow] = [*final_img, *final_vid]
    released = {r.landmark_id: r.landmark_category for r in final}
    report = QCReport(
        scene_id=p.scene_id,
        run_id=p.run_id,
        funnel=Funnel(
            candidates=p.candidates,
            collected=p.collected,
            reviewed=len(p.landmarks),
            released_landmarks=len(released),
            image_rows=len(final_img),
            video_rows=len(final_vid),
            blind_dropped=len(solved),
            count_balance_dropped=len(surplus),
            count_margin_dropped=len(unsure),
        ),
        blind_gate=BlindGate(
            mode=gate_mode,
            passed=blind.passed,
            margin=gate.MARGIN,
            alpha=gate.ALPHA,
            box_prior_max=gate.BOX_PRIOR_MAX,
            failures=blind.failures,
            dropped_rows=len(solved),
            tasks=blind.tasks,
        ),
        category_mix=dict(sorted(Counter(released.values()).items())),
        checked_rows=len(rows) + len(p.video_rows),
        dropped_rows=len(rows) + len(p.video_rows) - len(final_img) - len(final_vid),
        drop_reasons=dict(sorted(reasons.items())),
        dropped_landmarks=dict(sorted(incomplete.items())),
        answer_letter_balance=qc.letter_balance(final_img),
        max_option_similarity=qc.max_similarity(
            [[o.label for o in r.label_options] for r in final_img if r.task_type != "self_what"]
            + [[o.label for o in r.choice_options] for r in final_vid]
        ),
        duplicate_questions=sum(1 for x in drop.values() if x == "duplicate question"),
    )
    out = keys.manifests(p.run_id, p.scene_id)
    if not blind.passed and gate_mode == "enforce":
        # the report says what leaks and nothing new is released
        store.put(out["qc_report"], dump_json(report), "application/json")
        raise ReleaseLeaks(
            "the blind gate failed, nothing was released (see qc_report.json): " + "; ".join(blind.failures)
        )
    store.put(out["image_qa"], _jsonl(list(final_img)), "application/x-ndjson")
    store.put(out["video_qa"], _jsonl(list(final_vid)), "application/x-ndjson")
    store.put(out["render_requests"], dump_json(p.requests), "application/json")
    store.put(out["qc_report"], dump_json(report), "application/json")
    store.put(out["image_mcq_tsv"], export.mcq_tsv(final_img), "text/tab-separated-values")
    store.put(
        out["dataset_card"],
        export.dataset_card(p.scene_id, p.run_id, report, out, root, media_of(p)),
        "text/markdown",
    )
    return report, out


def _visible_count(row: VideoRow) -> int:
    """A visibility row's gold count (the answer's other entry is its intervals)."""
    count = row.gold_environment_answer.get("visible_count", 0)
    assert isinstance(count, int), row.sample_id
    return count


def _pixel_shares(
    store: BlobStore, run_id: str, mission_id: str, frames: int, instance_ids: dict[str, int]
) -> list[float] | None:
    """The landmark's instance-pixel share in each stored segmentation frame of a mission, or
    None when a frame is missing or unreadable (QC then rejects the row)."""
    iid = instance_ids.get(mission_id)
    if iid is None:
        return None
    root = keys.final_task(run_id, mission_id)
    out = []
    for i in range(frames):
        try:
            instance = media.decode_segmentation(store.get(f"{root}/{keys.video_frame('seg', i)}"))[1]
        except (BlobNotFound, OSError, ValueError):
            return None
        out.append(float((instance == iid).mean()))
    return out


def media_of(p: QAPlan) -> export.Media:
    scan = scan_of(p)
    size = stills(scan)
    rates = sorted({r.fps for r in p.video_rows})
    return export.Media(
        profile=scan.profile,
        still_width=size.width,
        still_height=size.height,
        jpeg_quality=size.jpeg_quality,
        video_width=scan.video.width,
        video_height=scan.video.height,
        video_bitrate=scan.video.bitrate,
        fps=", ".join(f"{r:g}" for r in rates) or "no videos",
    )
