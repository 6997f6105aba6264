"""Stage 2 collection: candidates from the fused cloud, a render job of each candidate's orbit
views, the views checked against the rendered pixels, and ``instances.json`` once all are in.

Every step reads and writes the store only, so any replica can take any step of any run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
from numpy.typing import NDArray
from skyqa import keys, scan
from skyqa.blob import BlobInfo, BlobStore
from skyqa.contracts import CollectSummary, InstancesFile, InstanceTable, LandmarkInstance, load_json
from skyqa.contracts.base import dump_json
from skyqa.geometry.pcd import decode_cloud
from skyqa.protojson import to_dict
from skyqa.sim import Intrinsics
from skyqa.v1 import common_pb2, fusion_pb2, render_pb2

from services.landmark.candidates import collect
from services.landmark.config import CollectConfig
from services.landmark.plan import LandmarkPlan, PlannedCandidate, instance_key, plan_all
from services.landmark.views import measure_view

REQUESTER = "landmark"  # the renderer answers on ``render.done.<requester>``


def make_plan(done: fusion_pb2.FusionCompleted, store: BlobStore) -> LandmarkPlan:
    req = scan.stored(store, done.run_id)
    cfg = CollectConfig.for_scan(req)
    cloud = decode_cloud(store.get(done.cloud_npy.key))
    table = load_json(InstanceTable, store.get(done.instances.key), "instance table")
    collected = collect(cloud, table, cfg)
    planned, dropped = plan_all(collected, cloud, cfg)
    plan = LandmarkPlan(
        run_id=done.run_id,
        scene_id=done.scene_id,
        backend=req.backend or "builtin",
        source_pcd=done.cloud_pcd.key,
        cloud_npy=done.cloud_npy.key,
        filters=cfg.model_dump(mode="json"),
        input_points=collected.input_points,
        valid_points=collected.valid_points,
        candidate_pairs=collected.candidate_pairs,
        dropped_small_instances=collected.dropped_small_instances,
        dropped_view_insufficient=dropped,
        candidates=planned,
        scan=to_dict(req, proto_names=True),
    )
    store.put(keys.landmark_plan(done.run_id, done.scene_id), dump_json(plan), "application/json")
    return plan


def render_job(plan: LandmarkPlan, cand: PlannedCandidate) -> render_pb2.RenderJob:
    cfg = CollectConfig.model_validate(plan.filters)
    job = render_pb2.RenderJob(
        run_id=plan.run_id,
        job_id=cand.key,
        scene_id=plan.scene_id,
        backend=plan.backend,
        width=cfg.image_width,
        height=cfg.image_height,
        fov_deg=cfg.camera_fov_deg,
        jpeg_quality=cfg.jpeg_quality,
        modalities=["rgb", "depth"],
        output_prefix=keys.landmark_views(plan.run_id, plan.scene_id, cand.key),
        requester=REQUESTER,
        correlation=cand.key,
    )
    for v in cand.views:
        c = v.camera
        job.views.add(
            view_id=v.view_id,
            pose=common_pb2.Pose(
                x=c.x, y=c.y, z=c.z, yaw_deg=c.yaw_deg, pitch_deg=c.pitch_deg, roll_deg=c.roll_deg
            ),
        )
    return job


def check_views(
    plan: LandmarkPlan, done: render_pb2.RenderDone, cloud: NDArray[np.void], store: BlobStore
) -> LandmarkInstance:
    cfg = CollectConfig.model_validate(plan.filters)
    cand = next(c for c in plan.candidates if c.key == done.correlation)
    keys_ = instance_key(cloud["class_id"].astype(np.int64), cloud["instance_id"].astype(np.int64))
    sel = keys_ == instance_key(cand.class_id, cand.instance_numeric_id)
    points = np.stack([cloud["x"][sel], cloud["y"][sel], cloud["z"][sel]], -1).astype(np.float64)
    k = Intrinsics.from_fov(done.width, done.height, cfg.camera_fov_deg)
    results = {r.view_id: r for r in done.views}
    views = [
        measure_view(
            cand,
            v,
            points,
            results[v.view_id],
            store.get(results[v.view_id].segmentation.key),
            store.get(results[v.view_id].depth.key),
            k,
            cfg,
        )
        for v in cand.views
    ]
    landmark = LandmarkInstance(
        instance_id=cand.key,
        class_id=cand.class_id,
        instance_numeric_id=cand.instance_numeric_id,
        class_name=cand.class_name,
        center_3d=cand.center_3d,
        bbox_3d=cand.bbox_3d,
        point_count=cand.point_count,
        rgb_views=views,
    )
    store.put(
        keys.landmark_part(plan.run_id, plan.scene_id, cand.key), dump_json(landmark), "application/json"
    )
    return landmark


def assemble(plan: LandmarkPlan, store: BlobStore) -> tuple[BlobInfo, int]:
    cfg = CollectConfig.model_validate(plan.filters)
    kept: list[LandmarkInstance] = []
    insufficient = plan.dropped_view_insufficient
    for cand in plan.candidates:
        landmark = load_json(
            LandmarkInstance, store.get(keys.landmark_part(plan.run_id, plan.scene_id, cand.key))
        )
        valid_orbit = [v for v in landmark.rgb_views if v.mode == "orbit" and v.is_valid]
        if len(valid_orbit) >= cfg.min_keep:
            kept.append(landmark)
        else:
            insufficient += 1
    doc = InstancesFile(
        scene_id=plan.scene_id,
        source_pcd=plan.source_pcd,
        filters=plan.filters,
        summary=CollectSummary(
            input_points=plan.input_points,
            valid_points=plan.valid_points,
            candidate_pairs=plan.candidate_pairs,
            dropped_small_instances=plan.dropped_small_instances,
            dropped_view_insufficient=insufficient,
            instances=len(kept),
        ),
        instances=kept,
    )
    info = store.put(keys.landmark_instances(plan.run_id, plan.scene_id), dump_json(doc), "application/json")
    return info, len(kept)


class RunData:
    """The plan and fused cloud of the runs being checked, read once per run: every render
    result of a run needs both, and the cloud is the largest object a run stores."""

    def __init__(self, store: BlobStore, keep: int = 2) -> None:
        self._store = store
        self._keep = keep
        self._cache: OrderedDict[str, tuple[LandmarkPlan, NDArray[np.void]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_id: str, scene_id: str) -> tuple[LandmarkPlan, NDArray[np.void]]:
        with self._lock:
            if run_id not in self._cache:
                key = keys.landmark_plan(run_id, scene_id)
                plan = load_json(LandmarkPlan, self._store.get(key), "landmark plan")
                self._cache[run_id] = (plan, decode_cloud(self._store.get(plan.cloud_npy)))
                while len(self._cache) > self._keep:
                    self._cache.popitem(last=False)
            return self._cache[run_id]
