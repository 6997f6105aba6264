"""Landmark service wiring: fusion completed -> plan -> render jobs -> checked views -> instances.json."""

from __future__ import annotations

import asyncio
import io
import threading
from collections import OrderedDict

import numpy as np
from google.protobuf import json_format
from numpy.typing import NDArray
from skyqa import keys
from skyqa.blob import BlobInfo, BlobStore
from skyqa.bus import Delivery, topology
from skyqa.contracts import CollectSummary, InstancesFile, InstanceTable, LandmarkInstance, load_json
from skyqa.contracts.base import dump_json
from skyqa.runtime import Service, Settings
from skyqa.sim import Intrinsics
from skyqa.v1 import common_pb2, fusion_pb2, render_pb2, scan_pb2

from services.landmark.candidates import collect
from services.landmark.config import CollectConfig
from services.landmark.plan import LandmarkPlan, PlannedCandidate, instance_key, plan_all
from services.landmark.review_app import setup_review
from services.landmark.views import measure_view
from services.landmark.web import mount_review_web

NAME = "landmark"
STAGE = "landmark"
REQUESTER = "landmark"
FUSED = topology.ConsumerSpec("landmark-collect", topology.EVENTS_STREAM, topology.FUSION_COMPLETED)
RENDERED = topology.ConsumerSpec(
    "landmark-rendered", topology.EVENTS_STREAM, topology.render_done_subject(REQUESTER)
)


def raw_root(run_id: str, scene_id: str) -> str:
    return f"{keys.scene_root(run_id, scene_id)}/landmarks_raw"


def plan_key(run_id: str, scene_id: str) -> str:
    return f"{raw_root(run_id, scene_id)}/parts/plan.json"


def part_key(run_id: str, scene_id: str, key: str) -> str:
    return f"{raw_root(run_id, scene_id)}/parts/{key}.json"


def instances_key(run_id: str, scene_id: str) -> str:
    return f"{raw_root(run_id, scene_id)}/{scene_id}.instances.json"


def load_cloud(store: BlobStore, key: str) -> NDArray[np.void]:
    arr: NDArray[np.void] = np.load(io.BytesIO(store.get(key)), allow_pickle=False)
    return arr


def make_plan(done: fusion_pb2.FusionCompleted, store: BlobStore) -> LandmarkPlan:
    cfg = CollectConfig.for_scan(done.scan)
    cloud = load_cloud(store, done.cloud_npy.key)
    table = load_json(InstanceTable, store.get(done.instances.key), "instance table")
    collected = collect(cloud, table, cfg)
    planned, dropped = plan_all(collected, cloud, cfg)
    plan = LandmarkPlan(
        run_id=done.run_id,
        scene_id=done.scene_id,
        backend=done.scan.backend or "builtin",
        source_pcd=done.cloud_pcd.key,
        cloud_npy=done.cloud_npy.key,
        filters=cfg.model_dump(mode="json"),
        input_points=collected.input_points,
        valid_points=collected.valid_points,
        candidate_pairs=collected.candidate_pairs,
        dropped_small_instances=collected.dropped_small_instances,
        dropped_view_insufficient=dropped,
        candidates=planned,
        scan=json_format.MessageToDict(done.scan, preserving_proto_field_name=True),
    )
    store.put(plan_key(done.run_id, done.scene_id), dump_json(plan), "application/json")
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
        output_prefix=f"{raw_root(plan.run_id, plan.scene_id)}/rgb_views/{cand.key}",
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
    store.put(part_key(plan.run_id, plan.scene_id, cand.key), dump_json(landmark), "application/json")
    return landmark


def assemble(plan: LandmarkPlan, store: BlobStore) -> tuple[BlobInfo, int]:
    cfg = CollectConfig.model_validate(plan.filters)
    kept: list[LandmarkInstance] = []
    insufficient = plan.dropped_view_insufficient
    for cand in plan.candidates:
        landmark = load_json(LandmarkInstance, store.get(part_key(plan.run_id, plan.scene_id, cand.key)))
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
    info = store.put(instances_key(plan.run_id, plan.scene_id), dump_json(doc), "application/json")
    return info, len(kept)


async def setup(svc: Service) -> None:
    progress, fanin = svc.require()
    cache: OrderedDict[str, tuple[LandmarkPlan, NDArray[np.void]]] = OrderedDict()
    lock = threading.Lock()

    def run_data(run_id: str, scene_id: str) -> tuple[LandmarkPlan, NDArray[np.void]]:
        with lock:
            if run_id not in cache:
                plan = load_json(LandmarkPlan, svc.store.get(plan_key(run_id, scene_id)), "landmark plan")
                cache[run_id] = (plan, load_cloud(svc.store, plan.cloud_npy))
                while len(cache) > 2:
                    cache.popitem(last=False)
            return cache[run_id]

    async def finish(plan: LandmarkPlan, trace_id: str) -> None:
        info, kept = await asyncio.to_thread(assemble, plan, svc.store)
        event = fusion_pb2.LandmarksCollected(
            run_id=plan.run_id,
            scene_id=plan.scene_id,
            instances=info.to_ref(),
            candidates=plan.candidate_pairs,
            kept=kept,
            scan=json_format.ParseDict(plan.scan, scan_pb2.ScanRequest()),
        )
        await svc.bus.publish(
            topology.LANDMARKS_COLLECTED,
            event,
            msg_id=f"landmarks-collected:{plan.run_id}",
            run_id=plan.run_id,
            trace_id=trace_id,
        )
        await fanin.mark_announced(f"{plan.run_id}.{STAGE}")
        total = len(plan.candidates)
        await progress.report(
            plan.run_id,
            STAGE,
            total,
            total,
            common_pb2.RUN_STATUS_COMPLETED,
            f"{kept} landmarks kept of {plan.candidate_pairs} candidates",
            outputs={"landmarks_raw": info.key},
        )

    async def on_fused(done: fusion_pb2.FusionCompleted, d: Delivery) -> None:
        plan = await asyncio.to_thread(make_plan, done, svc.store)
        total = len(plan.candidates)
        await progress.report(done.run_id, STAGE, 0, total, message=f"rendering views of {total} candidates")
        jobs = [(f"{REQUESTER}:{cand.key}", render_job(plan, cand)) for cand in plan.candidates]
        if not await svc.fan_out(done.run_id, STAGE, topology.RENDER_JOB, jobs, d.trace_id):
            await finish(plan, d.trace_id)

    async def on_rendered(done: render_pb2.RenderDone, d: Delivery) -> None:
        plan, cloud = await asyncio.to_thread(run_data, done.run_id, done.scene_id)
        await asyncio.to_thread(check_views, plan, done, cloud, svc.store)
        fan = await fanin.mark_done(f"{done.run_id}.{STAGE}", done.correlation, len(plan.candidates))
        await progress.report(done.run_id, STAGE, fan.done, fan.total, message=f"checked {done.correlation}")
        if fan.complete and not fan.announced:
            await finish(plan, d.trace_id)

    mount_review_web(svc, await setup_review(svc))
    svc.bus.handle(FUSED, fusion_pb2.FusionCompleted, on_fused, stage=STAGE)
    svc.bus.handle(
        RENDERED, render_pb2.RenderDone, on_rendered, stage=STAGE, concurrency=svc.settings.concurrency
    )


def create(settings: Settings, store: BlobStore | None = None) -> Service:
    return Service(NAME, settings, setup, store=store)
