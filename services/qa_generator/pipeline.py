"""The qa-generator's work as plain functions: plan the rows, then finish, check and export them.

``plan`` decides everything (views, options, letters, env cameras) and stores it in
``image_tasks/qa_plan.json``; ``finish`` reads the rendered env observations, fills their boxes,
runs QC, keeps only landmarks with the full lattice (8 image + 4 video rows) and writes the
manifests, the render_requests sidecar, the QC report and the exports. ``finish`` is a pure
function of the plan and the stored assets, which is what makes ``skyqa refresh`` safe.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any, Literal

import numpy as np
from google.protobuf import json_format
from pydantic import BaseModel
from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts import Contract, InstancesFile, ValidInstance, ValidInstancesFile, load_json
from skyqa.contracts.base import dump_json
from skyqa.contracts.missions import ComposedSegments, MissionIndex, TaskData
from skyqa.contracts.qa import (
    BlindGate,
    EnvRequest,
    Funnel,
    ImageRow,
    OverlayRequest,
    QCReport,
    RenderRequests,
    VideoRow,
)
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.scan import stills
from skyqa.v1 import common_pb2, mission_pb2, render_pb2, scan_pb2
from skyqa.vocab.behaviors import element_label, load_library

from services.qa_generator import export, gate, qc
from services.qa_generator.assets import draw_overlay
from services.qa_generator.image_tasks import (
    LandmarkSkipped,
    StillSpec,
    difficulty_plan,
    finish_env_row,
    option_count,
    plan_landmark,
    usable_views,
)
from services.qa_generator.placement import LabelBalance, Placement, count_surplus
from services.qa_generator.video_tasks import joint_row, visibility_row

STILL_FOV_DEG = 72.0
REQUESTER = "qa"


class QAPlan(Contract):
    run_id: str
    scene_id: str
    engine: str
    landmarks: list[str]  # reviewed landmarks, in order
    skipped: dict[str, str]
    image_rows: list[ImageRow]
    video_rows: list[VideoRow]
    requests: RenderRequests
    missions: dict[str, str]  # traj_id -> landmark
    mission_instance_ids: dict[str, int]
    candidates: int
    collected: int
    valid_instances: str
    scan: dict[str, Any]  # the scan request, as protobuf JSON


def plan(event: mission_pb2.MissionsCompleted, store: BlobStore) -> QAPlan:
    run_id, scene_id, scan = event.run_id, event.scene_id, event.scan
    root = keys.run_prefix(run_id)
    lib = load_library()
    valid = load_json(ValidInstancesFile, store.get(event.valid_instances.key), "valid instances")
    collected = load_json(
        InstancesFile, store.get(f"{root}/{_rel_source(valid.source_instances_json, root)}")
    )
    index = load_json(MissionIndex, store.get(event.index.key), "missions index")
    size = stills(scan)
    still = StillSpec(size.width, size.height, STILL_FOV_DEG)
    engine = scan.backend or "builtin"
    landmarks = sorted(valid.valid_instances, key=lambda v: v.instance_id)
    image_rows: list[ImageRow] = []
    env_requests: list[EnvRequest] = []
    overlays: dict[str, OverlayRequest] = {}
    skipped: dict[str, str] = {}
    placement = Placement(
        int(scan.seed), [difficulty_plan(usable_views(vi)) for vi in landmarks], option_count
    )
    balance = LabelBalance(int(scan.seed))
    shared = Counter(_description(vi) for vi in landmarks)
    for i, vi in enumerate(landmarks):
        desc = _description(vi)
        if shared[desc] > 1:
            # a description that fits two landmarks does not say which one a question is about
            skipped[vi.instance_id] = (
                f"description shared with {shared[desc] - 1} other landmark(s): '{desc}'"
            )
            continue
        try:
            # a skipped landmark's rows must not count towards the label balance
            trial = copy.deepcopy(balance)
            lp = plan_landmark(vi, i, scene_id, engine, root, int(scan.seed), still, placement, trial)
        except LandmarkSkipped as exc:
            skipped[vi.instance_id] = str(exc)
            continue
        balance = trial
        image_rows += lp.rows
        env_requests += lp.env_requests
        overlays.update({o.output_image: o for o in lp.overlays})
    by_id = {v.instance_id: v for v in landmarks}
    video_rows: list[VideoRow] = []
    missions: dict[str, str] = {}
    instance_ids: dict[str, int] = {}
    composed_all = {}
    for row in index.missions:
        key = keys.mission_file(run_id, row.traj_id, keys.COMPOSED_SEGMENTS)
        composed_all[row.traj_id] = load_json(ComposedSegments, store.get(key))
    universe = sorted(
        {
            element_label(s.element_class, s.mode_key, s.params)
            for c in composed_all.values()
            for s in c.segments
        }
    )
    for n, row in enumerate(index.missions):
        if row.instance_id not in by_id:
            continue
        vi = by_id[row.instance_id]
        composed = composed_all[row.traj_id]
        task = load_json(TaskData, store.get(row.task_data), "task data")
        main = next((v for v in vi.rgb_views if v.view_id == vi.main_view), vi.rgb_views[0])
        w, h = main.bbox_2d_image_size
        ref_box = [round(a / b, 4) for a, b in zip(main.bbox_2d_xyxy, (w, h, w, h), strict=True)]
        ref_out = keys.reference_overlay(vi.instance_id, main.view_id)
        overlays.setdefault(
            ref_out,
            OverlayRequest(
                output_image=ref_out, source_image=main.path.removeprefix(root + "/"), bbox_xyxy_norm=ref_box
            ),
        )
        common: dict[str, object] = {
            "scene_id": scene_id,
            "engine": engine,
            "mission_id": row.traj_id,
            "mission_kind": composed.mission_kind,
            "set_id": composed.task_subtype,
            "set_name": composed.task_type,
            "landmark_id": vi.instance_id,
            "landmark_category": vi.landmark_category or vi.class_name,
            "landmark_description": vi.landmark_description or vi.class_name,
            "reference_image_with_bbox": ref_out,
            "reference_bbox_xyxy_norm": ref_box,
            "video_path": row.video.removeprefix(root + "/"),
            "fps": task.video.fps,
            "frame_count": task.video.frame_count,
            "duration_sec": task.video.duration_sec,
            "video_width": task.video.width,
            "video_height": task.video.height,
        }
        rng = np.random.default_rng(int(scan.seed) + n * 1009 + 29)
        mine = {element_label(s.element_class, s.mode_key, s.params) for s in composed.segments}
        others = [u for u in universe if u not in mine]
        others = [others[k] for k in rng.permutation(len(others))]
        video_rows.append(joint_row(lib, composed, task, others, common, rng))
        video_rows.append(visibility_row(composed, task, common))
        missions[row.traj_id] = vi.instance_id
        instance_ids[row.traj_id] = composed.rendered_instance_id
    return QAPlan(
        run_id=run_id,
        scene_id=scene_id,
        engine=engine,
        landmarks=[v.instance_id for v in landmarks],
        skipped=skipped,
        image_rows=image_rows,
        video_rows=video_rows,
        requests=RenderRequests(
            scene_id=scene_id,
            run_id=run_id,
            backend=engine,
            env_requests=env_requests,
            overlays=sorted(overlays.values(), key=lambda o: o.output_image),
        ),
        missions=missions,
        mission_instance_ids=instance_ids,
        candidates=collected.summary.candidate_pairs,
        collected=len(collected.instances),
        valid_instances=event.valid_instances.key,
        scan=json_format.MessageToDict(scan),
    )


def _description(vi: ValidInstance) -> str:
    return " ".join((vi.landmark_description or vi.class_name).lower().split())


def _rel_source(key: str, root: str) -> str:
    return key.removeprefix(root + "/")


def render_jobs(p: QAPlan) -> list[render_pb2.RenderJob]:
    """One still-view job per landmark, for its environment observations."""
    root = keys.run_prefix(p.run_id)
    jobs: dict[str, render_pb2.RenderJob] = {}
    for req in p.requests.env_requests:
        job = jobs.get(req.landmark_id)
        if job is None:
            job = render_pb2.RenderJob(
                run_id=p.run_id,
                job_id=f"env-{req.landmark_id}",
                scene_id=p.scene_id,
                backend=p.engine,
                width=req.width,
                height=req.height,
                fov_deg=req.fov_deg,
                jpeg_quality=80,
                modalities=["rgb", "segmentation"],
                output_prefix=f"{root}/{keys.env_observations(req.landmark_id)}",
                requester=REQUESTER,
                correlation=req.landmark_id,
            )
            jobs[req.landmark_id] = job
        x, y, z, yaw, pitch, roll = req.pose
        pose = common_pb2.Pose(x=x, y=y, z=z, yaw_deg=yaw, pitch_deg=pitch, roll_deg=roll)
        job.views.add(view_id=req.request_id, pose=pose)
    return [jobs[k] for k in sorted(jobs)]


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


def scan_of(p: QAPlan) -> scan_pb2.ScanRequest:
    return json_format.ParseDict(p.scan, scan_pb2.ScanRequest())
