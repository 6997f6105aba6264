"""The ``final_task/`` bundle of a rendered mission: ``frames_manifest.json``,
``frame_index_map.json`` and ``task_data.json`` with the behavior timeline and the target's
visibility, as UAV-DualCog's Stage 3 writes them.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from skyqa import keys
from skyqa.blob import BlobInfo, BlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.missions import (
    BehaviorInterval,
    BehaviorVocab,
    ComposedSegments,
    ConstraintReport,
    EnvTrack,
    FrameBehavior,
    FrameBox,
    FrameBoxNorm,
    FrameIndexMap,
    FrameIndexRow,
    FramesManifest,
    FrameVisibility,
    FrameVisibilityRow,
    IntervalFrames,
    IntervalSec,
    MaskRow,
    PresenceTarget,
    SelfTrack,
    TargetPresence,
    TaskData,
    TaskTracks,
    VideoInfo,
    VisibilityParams,
)
from skyqa.geometry import visibility as vis
from skyqa.geometry.boxes import norm_xyxy
from skyqa.v1 import render_pb2
from skyqa.video import CODEC, PIX_FMT
from skyqa.vocab.behaviors import Library

from services.mission_planner.compose import (
    FORWARD_WINDOW,
    POSE_HZ,
    SMOOTH_WINDOW,
    frame_sources,
)
from services.mission_planner.config import MissionConfig

F64 = NDArray[np.float64]


def _iv(runs: list[tuple[int, int]], fps: float) -> tuple[list[IntervalFrames], list[IntervalSec]]:
    return (
        [IntervalFrames(start_frame=a, end_frame=b) for a, b in runs],
        [IntervalSec(start_sec=round(a / fps, 4), end_sec=round((b + 1) / fps, 4)) for a, b in runs],
    )


def env_difficulty(
    duration_s: float, count: int, mean_area: float, visible_ratio: float
) -> tuple[float, str]:
    score = (
        0.30 * min(duration_s / 80.0, 1.0)
        + 0.35 * min(count / 8.0, 1.0)
        + 0.35 * (1.0 - 0.5 * (mean_area + visible_ratio))
    )
    band = "easy" if score < 0.35 else "medium" if score < 0.68 else "hard"
    return round(score, 4), band


def build_final_task(
    lib: Library,
    composed: ComposedSegments,
    report: ConstraintReport,
    rows: list[FrameVisibility],
    done: render_pb2.VideoDone,
    cfg: MissionConfig,
) -> tuple[FramesManifest, FrameIndexMap, TaskData]:
    fps, w, h = done.fps, done.width, done.height
    n = done.frame_count
    if len(rows) != n:
        raise ValueError(f"{composed.traj_id}: {len(rows)} visibility rows for {n} frames")
    sources = frame_sources(composed.summary.waypoints, int(fps))[:n]
    manifest = FramesManifest(
        fps=fps, frame_count=n, width=w, height=h, frames=[keys.video_frame("frames", i) for i in range(n)]
    )
    index_map = FrameIndexMap(
        fps=fps,
        frame_count=n,
        frames=[
            FrameIndexRow(out_frame=i, source_idx=s, time_sec=round(i / fps, 4))
            for i, s in enumerate(sources)
        ],
    )
    landmark = composed.instance_id
    stats = [next(t for t in r.targets if t.instance_id == composed.rendered_instance_id) for r in rows]
    runs = vis.sightings([s.pixels / (w * h) for s in stats], fps)
    # frames inside a sighting: a bridged gap counts, a glimpse too short to be one does not
    flags = np.zeros(n, dtype=bool)
    for a, b in runs:
        flags[a : b + 1] = True
    iv_f, iv_s = _iv(runs, fps)
    boxes, norms, vis_rows, masks = [], [], [], []
    for i, (r, stat) in enumerate(zip(rows, stats, strict=True)):
        vis_rows.append(
            FrameVisibilityRow(
                frame=r.frame,
                time_sec=r.time_sec,
                target_instance_id=landmark,
                is_visible=stat.is_visible,
                visible_ratio=stat.visible_ratio,
                visible_point_count=stat.visible_point_count,
                target_inframe_point_count=stat.target_inframe_point_count,
            )
        )
        if flags[i] and stat.pixels:
            x0, y0, x1, y1 = stat.bbox_xyxy
            norm = norm_xyxy(stat.bbox_xyxy, w, h)
            boxes.append(
                FrameBox(
                    frame=r.frame,
                    time_sec=r.time_sec,
                    bbox_xywh=[x0, y0, x1 - x0, y1 - y0],
                    bbox_xyxy=[x0, y0, x1, y1],
                    bbox_xyxy_norm=norm,
                    visible_ratio=stat.visible_ratio,
                    visible_point_count=stat.visible_point_count,
                )
            )
            norms.append(FrameBoxNorm(frame=r.frame, time_sec=r.time_sec, bbox_xyxy_norm=norm))
            masks.append(
                MaskRow(
                    frame=r.frame,
                    time_sec=r.time_sec,
                    visible_ratio=stat.visible_ratio,
                    visible_point_count=stat.visible_point_count,
                    target_inframe_point_count=stat.target_inframe_point_count,
                )
            )
    visible = int(flags.sum())
    params = VisibilityParams(
        grid_n=vis.GRID_N,
        min_visible_points=vis.MIN_VISIBLE_POINTS,
        min_visible_ratio=vis.MIN_VISIBLE_RATIO,
        min_bbox_px=vis.MIN_BBOX_PX,
        depth_margin_m=vis.DEPTH_MARGIN_M,
        occluders="rendered depth buffer",
        decided_by="instance pixels",
        min_visible_share=vis.MIN_VISIBLE_SHARE,
        min_sighting_sec=vis.MIN_SIGHTING_SEC,
    )
    presence = TargetPresence(
        intervals_frame=iv_f,
        intervals_sec=iv_s,
        bboxes=boxes,
        frame_visibility=vis_rows,
        frame_bboxes_xyxy_norm=norms,
        keyframe_gt_dense=norms,
        masks=masks,
        # the encoding skyqa.media.encode_segmentation writes: instance id = G + 256 * B
        mask_source=f"seg/frame_<frame:06d>.png pixels whose G + 256 * B is {composed.rendered_instance_id}",
        visible_frame_count=visible,
        visibility_params=params,
    )
    duration = n / fps
    mean_area = (
        float(
            np.mean(
                [
                    (b.bbox_xyxy_norm[2] - b.bbox_xyxy_norm[0]) * (b.bbox_xyxy_norm[3] - b.bbox_xyxy_norm[1])
                    for b in boxes
                ]
            )
        )
        if boxes
        else 0.0
    )
    env_score, env_band = env_difficulty(duration, len(runs), mean_area, visible / n)
    # behaviors: frame f belongs to the segment holding its source waypoint
    seg_of = np.zeros(composed.summary.waypoints, dtype=int)
    for k, s in enumerate(composed.segments):
        seg_of[s.waypoint_start_idx : s.waypoint_end_idx + 1] = k
    frame_seg = [int(seg_of[src]) for src in sources]
    frame_rows = []
    for f, k in enumerate(frame_seg):
        s = composed.segments[k]
        frame_rows.append(
            FrameBehavior(
                frame=f,
                time_sec=round(f / fps, 4),
                event_id=s.event_id,
                event_label=s.event_label,
                behavior_id=s.behavior_id,
                target_instance_id=landmark,
            )
        )
    behavior_intervals = []
    for k, s in enumerate(composed.segments):
        seg_runs = vis.runs([x == k for x in frame_seg])
        if not seg_runs:
            continue
        bf, bs = _iv(seg_runs, fps)
        behavior_intervals.append(
            BehaviorInterval(
                event_id=s.event_id,
                event_label=s.event_label,
                behavior_id=s.behavior_id,
                target_instance_id=landmark,
                intervals_frame=bf,
                intervals_sec=bs,
                start_sec=bs[0].start_sec,
                end_sec=bs[-1].end_sec,
            )
        )
    vocab = sorted({(s.behavior_id, s.event_label) for s in composed.segments})
    whole_seconds = [frame_rows[f] for f in range(0, n, max(1, round(fps)))]
    video = VideoInfo(
        path=keys.VIDEO,
        path_web=keys.VIDEO,
        frame_width=w,
        frame_height=h,
        frames_manifest=keys.FINAL_FRAMES_MANIFEST,
        frame_index_map=keys.FRAME_INDEX_MAP,
        frame_visibility=keys.FRAME_VISIBILITY,
        fps=fps,
        source_pose_fps=float(POSE_HZ),
        width=w,
        height=h,
        frame_count=n,
        duration_sec=round(duration, 4),
        bitrate=cfg.video_bitrate,
        codec=CODEC,
        pix_fmt=PIX_FMT,
        archive_width=done.archive_width,
        archive_height=done.archive_height,
        pose_smooth_window=SMOOTH_WINDOW,
        camera_forward_smooth_window=FORWARD_WINDOW,
    )
    target = PresenceTarget(
        target_instance_id=landmark,
        target_center_3d=report.landmark_center_3d,
        target_bbox_list=report.landmark_bbox_3d,
        target_category=report.landmark_class_name,
        target_description=report.landmark_description,
        intervals_frame=iv_f,
        intervals_sec=iv_s,
        frame_bboxes_xyxy_norm=norms,
        visible_frame_count=visible,
    )
    task = TaskData(
        scene_id=composed.scene_id,
        traj_id=composed.traj_id,
        video=video,
        target_presence=presence,
        target_presence_targets={landmark: target},
        task_tracks=TaskTracks(
            environmental_awareness=EnvTrack(
                visible_count=len(runs),
                difficulty_score=env_score,
                difficulty_band=env_band,
                visible_duration_ratio=round(visible / n, 4),
                mean_visible_bbox_area_ratio=round(mean_area, 4),
                intervals_frame=iv_f,
                intervals_sec=iv_s,
                frame_visibility=vis_rows,
                frame_bboxes_xyxy_norm=norms,
                keyframe_gt_dense=norms,
                targets={landmark: target},
                visible_frame_count=visible,
            ),
            self_state_awareness=SelfTrack(
                task_type=composed.task_type,
                task_subtype=composed.task_subtype,
                task_difficulty=composed.task_difficulty,
                task_difficulty_score=composed.task_difficulty_score,
                set_instance=composed.set_instance,
                element_instances=composed.element_instances,
                landmark_order=composed.set_instance.landmark_order,
                mode_sequence=composed.mode_sequence,
                event_sequence=composed.event_sequence,
                behavior_sequence=composed.behavior_sequence,
                behavior_intervals_sec=behavior_intervals,
                frame_behavior_labels=frame_rows,
                keyframe_gt_dense=whole_seconds,
                behavior_vocab=[BehaviorVocab(behavior_id=b, event_label=e) for b, e in vocab],
            ),
        ),
    )
    return manifest, index_map, task


def write_final_task(
    store: BlobStore,
    run_id: str,
    traj_id: str,
    manifest: FramesManifest,
    index_map: FrameIndexMap,
    task: TaskData,
) -> BlobInfo:
    root = keys.final_task(run_id, traj_id)
    store.put(f"{root}/{keys.FINAL_FRAMES_MANIFEST}", dump_json(manifest), "application/json")
    store.put(f"{root}/{keys.FRAME_INDEX_MAP}", dump_json(index_map), "application/json")
    return store.put(f"{root}/{keys.TASK_DATA}", dump_json(task), "application/json")
