"""Mission files: the plan (``composed_segments.json``, ``constraint_report.json``, arrays,
``poses.csv``), the video job, and after rendering the ``final_task/`` bundle
(``frames_manifest.json``, ``frame_index_map.json``, ``task_data.json``).
"""

from __future__ import annotations

import io

import numpy as np
from numpy.typing import NDArray
from skyqa import keys
from skyqa.blob import BlobInfo, BlobStore
from skyqa.contracts import ValidInstance, dump_json
from skyqa.contracts.missions import (
    BehaviorInterval,
    BehaviorVocab,
    Checks,
    CollisionCheck,
    ComposedSegments,
    ConstraintReport,
    ElementInstance,
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
    MissionSegment,
    MissionSummary,
    PresenceTarget,
    RepairReport,
    RepairStats,
    SelfTrack,
    SetInstance,
    TargetPresence,
    TaskData,
    TaskTracks,
    VideoInfo,
    VisibilityParams,
)
from skyqa.geometry import visibility as vis
from skyqa.v1 import common_pb2, mission_pb2
from skyqa.video import CODEC, PIX_FMT

from services.mission_planner.compose import (
    BASE_HZ,
    FORWARD_WINDOW,
    POSE_HZ,
    SAMPLES_PER_SEGMENT,
    SMOOTH_WINDOW,
    forwards,
    frame_sources,
    path_length,
    yaw_pitch,
)
from services.mission_planner.config import MissionConfig
from services.mission_planner.library import Library, behavior_id, behavior_label
from services.mission_planner.planner import Planned, self_difficulty
from services.mission_planner.shapes import Target
from services.renderer import video as rv

F64 = NDArray[np.float64]
FINAL = "final_task"


def mission_id(scene_id: str, instance_id: str, kind: str, index: int) -> str:
    return f"batch_{scene_id}_{instance_id}_{kind}_{index:04d}"


def target_of(vi: ValidInstance, safety_m: float) -> Target:
    lo, hi = np.array(vi.bbox_3d.min), np.array(vi.bbox_3d.max)
    c, s = (lo + hi) / 2, hi - lo
    return Target((float(c[0]), float(c[1]), float(c[2])), (float(s[0]), float(s[1]), float(s[2])), safety_m)


def rendered_id(vi: ValidInstance) -> int:
    """The instance id the landmark has in rendered segmentation: its main view's, else the most common."""
    views = {v.view_id: v for v in vi.rgb_views}
    main = views.get(vi.main_view)
    if main is not None and main.rendered_instance_id:
        return main.rendered_instance_id
    ids = [v.rendered_instance_id for v in vi.rgb_views if v.rendered_instance_id]
    return max(set(ids), key=ids.count) if ids else vi.instance_numeric_id


def _bbox7(t: Target) -> list[float]:
    return [0.0, 0.0, 0.0, *(round(v, 4) for v in t.size), 0.0]


def _r(v: F64) -> list[float]:
    return [round(float(x), 4) for x in v]


def _npy(arr: F64) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr.astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def describe(
    lib: Library,
    planned: Planned,
    vi: ValidInstance,
    scene_id: str,
    traj_id: str,
    kind: str,
) -> tuple[ComposedSegments, ConstraintReport]:
    t = target_of(vi, lib.safety_distance_m)
    traj = planned.trajectory
    landmark = vi.instance_id
    desc = vi.landmark_description or vi.class_name
    category = vi.landmark_category or vi.class_name
    elements, segments = [], []
    for i, (el, seg, adapt, lift) in enumerate(
        zip(planned.elements, traj.segments, planned.adaptations, planned.segment_lifts, strict=True)
    ):
        spec = lib.elements[seg.element]
        ei_id = f"ei_{i:02d}_{seg.element}"
        params = {**seg.params, **{k: round(v, 4) for k, v in seg.effective.items()}}
        elements.append(
            ElementInstance(
                element_instance_id=ei_id,
                element_class=seg.element,
                element_display_name=behavior_label(lib, seg.element, seg.camera_mode),
                description=spec.description,
                family=spec.family,
                camera_mode=seg.camera_mode,
                target_instance_id=landmark,
                params=params,
                class_instance_index=sum(1 for e in planned.elements[:i] if e.step.element == seg.element),
                seed=planned.seed,
                obstacle_adaptation=adapt,
                target_center_3d=list(t.center),
                target_bbox_3d=_bbox7(t),
                target_category=category,
                target_description=desc,
            )
        )
        label = behavior_label(lib, seg.element, seg.camera_mode)
        segments.append(
            MissionSegment(
                segment_id=f"seg_{i:02d}",
                element_instance_id=ei_id,
                element_class=seg.element,
                element_display_name=label,
                target_instance_id=landmark,
                params=params,
                start=_r(traj.waypoints[seg.start]),
                end=_r(traj.waypoints[seg.end]),
                num_points=seg.end - seg.start + 1,
                shared_start_with_previous=i > 0,
                waypoint_start_idx=seg.start,
                waypoint_end_idx=seg.end,
                projected_start=el.bridged,
                project_distance_m=seg.project_distance_m,
                repair=RepairStats(
                    repair_applied=lift.lifted_points > 0,
                    lifted_points=lift.lifted_points,
                    max_lift_m=lift.max_lift_m,
                ),
                behavior_id=behavior_id(seg.element, seg.camera_mode),
                event_id=f"evt_{i:02d}",
                event_label=label,
                mode_key=seg.camera_mode,
                mode_name="look forward" if seg.camera_mode == "look_forward" else "track landmark",
                target_class_name=vi.class_name,
                target_description=desc,
            )
        )
    n_frames = len(frame_sources(len(traj.waypoints)))
    score, band = self_difficulty(n_frames / BASE_HZ, 1, len(segments))
    summary = MissionSummary(
        segment_count=len(segments),
        raw_points=len(traj.raw),
        waypoints=len(traj.waypoints),
        fps=float(BASE_HZ),
        source_pose_fps=float(POSE_HZ),
        base_pose_fps=float(BASE_HZ),
        samples_per_segment=SAMPLES_PER_SEGMENT,
        duration_sec=round(traj.duration_s, 3),
        path_length_m=round(path_length(traj.waypoints), 3),
    )
    identity = {
        "scene_id": scene_id,
        "traj_id": traj_id,
        "task_type": lib.set_display(planned.set_name),
        "task_subtype": planned.set_name,
        "mission_kind": kind,
        "task_difficulty": band,
        "task_difficulty_score": score,
        "instance_id": landmark,
        "rendered_instance_id": rendered_id(vi),
    }
    composed = ComposedSegments(
        **identity,
        set_class=planned.set_name,
        set_instance=SetInstance(
            set_id=planned.set_name,
            set_name=lib.set_display(planned.set_name),
            landmark_order=[landmark],
            max_total_elements=len(segments),
            element_template=[s.element_class for s in segments],
        ),
        element_instances=elements,
        element_plan=[e.element_instance_id for e in elements],
        mode_sequence=[s.mode_key for s in segments],
        event_sequence=[s.event_id for s in segments],
        behavior_sequence=[s.behavior_id for s in segments],
        seed=planned.seed,
        attempt=planned.attempt,
        summary=summary,
        segments=segments,
    )
    chk = planned.check
    report = ConstraintReport(
        **identity,
        landmark_class_id=vi.class_id,
        landmark_class_name=vi.class_name,
        landmark_subcategory=vi.landmark_subcategory,
        landmark_description=desc,
        landmark_center_3d=list(t.center),
        landmark_bbox_3d=_bbox7(t),
        event_count=len(segments),
        flight_description=flight_description(segments, traj.duration_s, desc),
        limits={"v_max": 8.0, "a_max": 10.0, "yaw_rate_max": 120.0, "safety_distance": lib.safety_distance_m},
        checks=Checks(
            kinematics={"checked": "false"},
            collision=CollisionCheck(
                collision_free=chk.collision_free,
                min_distance=chk.min_distance_m,
                violation_count=chk.violation_count,
                violations=[
                    {"index": v.index, "kind": v.kind, "distance_m": v.distance_m} for v in chk.violations
                ],
            ),
            repair=RepairReport(
                repaired_segments=sum(1 for s in segments if s.repair.repair_applied),
                lifted_points=planned.repair.lifted_points,
                lifted_fraction=planned.repair.lifted_fraction,
                max_lift_m=planned.repair.max_lift_m,
            ),
        ),
        acceptance={"attempts": planned.attempt + 1.0, "collision_free": float(chk.collision_free)},
        accepted=planned.accepted,
        files={
            "waypoints": "waypoints.npy",
            "forwards": "forwards.npy",
            "composed_path_raw": "composed_path_raw.npy",
            "poses": "poses.csv",
            "composed_segments": "composed_segments.json",
            "final_task": f"{FINAL}/",
        },
        summary=summary,
    )
    return composed, report


def flight_description(segments: list[MissionSegment], duration_s: float, landmark: str) -> str:
    steps = ", then ".join(
        f"{s.event_label.lower()} for {(s.waypoint_end_idx - s.waypoint_start_idx) / POSE_HZ:.1f} s"
        for s in segments
    )
    return f"Around {landmark}: {steps} ({duration_s:.1f} s in all)."


def write_plan(
    store: BlobStore,
    run_id: str,
    planned: Planned,
    composed: ComposedSegments,
    report: ConstraintReport,
    t: Target,
) -> F64:
    """Write the mission files; returns the camera forwards."""
    root = keys.mission_root(run_id, composed.traj_id)
    traj = planned.trajectory
    fwd = forwards(traj, t)
    yaw, pitch = yaw_pitch(fwd)
    store.put(f"{root}/waypoints.npy", _npy(traj.waypoints))
    store.put(f"{root}/forwards.npy", _npy(fwd))
    store.put(f"{root}/composed_path_raw.npy", _npy(traj.raw))
    lines = ["frame,t,x,y,z,yaw,pitch,roll"]
    for i, (p, y, pt) in enumerate(zip(traj.waypoints, yaw, pitch, strict=True)):
        lines.append(f"{i},{i / POSE_HZ:.4f},{p[0]:.4f},{p[1]:.4f},{p[2]:.4f},{y:.4f},{pt:.4f},0.0000")
    store.put(f"{root}/poses.csv", ("\n".join(lines) + "\n").encode(), "text/csv")
    store.put(f"{root}/composed_segments.json", dump_json(composed), "application/json")
    store.put(f"{root}/constraint_report.json", dump_json(report), "application/json")
    return fwd


def video_job(
    run_id: str,
    scene_id: str,
    backend: str,
    composed: ComposedSegments,
    waypoints: F64,
    fwd: F64,
    t: Target,
    cfg: MissionConfig,
    archive: bool,
    requester: str,
) -> mission_pb2.VideoJob:
    yaw, pitch = yaw_pitch(fwd)
    job = mission_pb2.VideoJob(
        run_id=run_id,
        job_id=composed.traj_id,
        scene_id=scene_id,
        backend=backend,
        width=cfg.video_width,
        height=cfg.video_height,
        fov_deg=cfg.video_fov_deg,
        fps=float(cfg.video_fps),
        bitrate=cfg.video_bitrate,
        jpeg_quality=cfg.jpeg_quality,
        output_prefix=f"{keys.mission_root(run_id, composed.traj_id)}/{FINAL}",
        requester=requester,
        correlation=composed.traj_id,
        archive_width=cfg.archive_width if archive else 0,
        archive_height=cfg.archive_height if archive else 0,
    )
    for i in frame_sources(len(waypoints), cfg.video_fps):
        p = waypoints[i]
        job.poses.append(
            common_pb2.Pose(
                x=float(p[0]), y=float(p[1]), z=float(p[2]), yaw_deg=float(yaw[i]), pitch_deg=float(pitch[i])
            )
        )
    job.targets.add(
        landmark_id=composed.instance_id,
        instance_id=composed.rendered_instance_id,
        center=t.center,
        size=t.size,
    )
    return job


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
    done: mission_pb2.VideoDone,
    cfg: MissionConfig,
) -> tuple[FramesManifest, FrameIndexMap, TaskData]:
    fps, w, h = done.fps, done.width, done.height
    n = done.frame_count
    if len(rows) != n:
        raise ValueError(f"{composed.traj_id}: {len(rows)} visibility rows for {n} frames")
    sources = frame_sources(composed.summary.waypoints, int(fps))[:n]
    manifest = FramesManifest(
        fps=fps, frame_count=n, width=w, height=h, frames=[f"frames/frame_{i:06d}.jpg" for i in range(n)]
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
    boxes, norms, vis_rows = [], [], []
    for i, (r, s) in enumerate(zip(rows, stats, strict=True)):
        vis_rows.append(
            FrameVisibilityRow(
                frame=r.frame,
                time_sec=r.time_sec,
                target_instance_id=landmark,
                is_visible=s.is_visible,
                visible_ratio=s.visible_ratio,
                visible_point_count=s.visible_point_count,
                target_inframe_point_count=s.target_inframe_point_count,
            )
        )
        if flags[i] and s.pixels:
            x0, y0, x1, y1 = s.bbox_xyxy
            norm = [round(x0 / w, 4), round(y0 / h, 4), round(x1 / w, 4), round(y1 / h, 4)]
            boxes.append(
                FrameBox(
                    frame=r.frame,
                    time_sec=r.time_sec,
                    bbox_xywh=[x0, y0, x1 - x0, y1 - y0],
                    bbox_xyxy=[x0, y0, x1, y1],
                    bbox_xyxy_norm=norm,
                    visible_ratio=s.visible_ratio,
                    visible_point_count=s.visible_point_count,
                )
            )
            norms.append(FrameBoxNorm(frame=r.frame, time_sec=r.time_sec, bbox_xyxy_norm=norm))
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
        path=rv.VIDEO_NAME,
        frames_manifest="frames_manifest.json",
        frame_index_map="frame_index_map.json",
        frame_visibility=rv.VISIBILITY_NAME,
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
    root = f"{keys.mission_root(run_id, traj_id)}/{FINAL}"
    store.put(f"{root}/frames_manifest.json", dump_json(manifest), "application/json")
    store.put(f"{root}/frame_index_map.json", dump_json(index_map), "application/json")
    return store.put(f"{root}/task_data.json", dump_json(task), "application/json")


def spread_order(centers: list[tuple[float, float]]) -> list[int]:
    """Order jobs so each next one is as far as possible from the recent ones (farthest-point).

    Renderer replicas pull jobs in order, so jobs that run at the same time fly far apart;
    this matters for simulators that draw every vehicle (UAV-DualCog's multi-drone AirSim).
    """
    if not centers:
        return []
    pts = np.asarray(centers, dtype=np.float64)
    order = [0]
    dist = np.linalg.norm(pts - pts[0], axis=1)
    while len(order) < len(pts):
        nxt = int(np.argmax(np.where(np.isin(np.arange(len(pts)), order), -1.0, dist)))
        order.append(nxt)
        dist = np.minimum(dist, np.linalg.norm(pts - pts[nxt], axis=1))
    return order
