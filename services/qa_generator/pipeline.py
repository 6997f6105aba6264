"""The qa-generator's plan: every row decided up front (views, options, letters, env cameras)
and stored in ``image_tasks/qa_plan.json``, with the env observations it asks the renderer for.

:mod:`services.qa_generator.release` then checks the rows against what was rendered and writes
the release.
"""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import numpy as np
from google.protobuf import json_format
from skyqa import keys, scan as scan_rules
from skyqa.blob import BlobStore
from skyqa.contracts import Contract, InstancesFile, ValidInstance, ValidInstancesFile, load_json
from skyqa.contracts.missions import ComposedSegments, MissionIndex, TaskData
from skyqa.contracts.qa import (
    EnvRequest,
    ImageRow,
    OverlayRequest,
    RenderRequests,
    VideoRow,
)
from skyqa.scan import stills
from skyqa.v1 import common_pb2, mission_pb2, render_pb2, scan_pb2
from skyqa.vocab.behaviors import element_label, load_library

from services.qa_generator.image_tasks import (
    LandmarkSkipped,
    StillSpec,
    difficulty_plan,
    option_count,
    plan_landmark,
    usable_views,
)
from services.qa_generator.placement import LabelBalance, Placement
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
    run_id, scene_id = event.run_id, event.scene_id
    scan = scan_rules.stored(store, run_id)
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


def scan_of(p: QAPlan) -> scan_pb2.ScanRequest:
    return json_format.ParseDict(p.scan, scan_pb2.ScanRequest())
