"""A planned mission's files (waypoints, camera forwards, ``poses.csv``, the plan documents), its
video job for the renderer, and the order the jobs go out in.
"""

from __future__ import annotations

import io

import numpy as np
from numpy.typing import NDArray
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.missions import (
    ComposedSegments,
    ConstraintReport,
)
from skyqa.v1 import common_pb2, render_pb2

from services.mission_planner.compose import POSE_HZ, frame_sources
from services.mission_planner.config import MissionConfig
from services.mission_planner.kinematics import Flown
from services.mission_planner.planner import Planned
from services.mission_planner.shapes import Target

F64 = NDArray[np.float64]


def _npy(arr: F64) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr.astype(np.float32), allow_pickle=False)
    return buf.getvalue()


def write_plan(
    store: BlobStore,
    run_id: str,
    planned: Planned,
    flown: Flown,
    composed: ComposedSegments,
    report: ConstraintReport,
) -> None:
    """Write the mission files: the flown waypoints and camera (timed within the kinematic
    limits) and the composed path before smoothing and timing."""
    root = keys.mission_root(run_id, composed.traj_id)
    store.put(f"{root}/{keys.WAYPOINTS}", _npy(flown.waypoints))
    store.put(f"{root}/{keys.FORWARDS}", _npy(flown.forwards()))
    store.put(f"{root}/{keys.RAW_PATH}", _npy(planned.trajectory.raw))
    lines = ["frame,t,x,y,z,yaw,pitch,roll"]
    for i, (p, y, pt) in enumerate(zip(flown.waypoints, flown.yaw, flown.pitch, strict=True)):
        lines.append(f"{i},{i / POSE_HZ:.4f},{p[0]:.4f},{p[1]:.4f},{p[2]:.4f},{y:.4f},{pt:.4f},0.0000")
    store.put(f"{root}/{keys.POSES}", ("\n".join(lines) + "\n").encode(), "text/csv")
    store.put(f"{root}/{keys.COMPOSED_SEGMENTS}", dump_json(composed), "application/json")
    store.put(f"{root}/{keys.CONSTRAINT_REPORT}", dump_json(report), "application/json")


def video_job(
    run_id: str,
    scene_id: str,
    backend: str,
    composed: ComposedSegments,
    flown: Flown,
    t: Target,
    cfg: MissionConfig,
    archive: bool,
    requester: str,
) -> render_pb2.VideoJob:
    waypoints, yaw, pitch = flown.waypoints, flown.yaw, flown.pitch
    job = render_pb2.VideoJob(
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
        output_prefix=keys.final_task(run_id, composed.traj_id),
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
