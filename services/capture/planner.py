"""Scan request -> capture jobs. Rejects bad requests before anything is stored."""

from __future__ import annotations

from pathlib import Path

from skyqa import scan
from skyqa.errors import InvalidScanRequest
from skyqa.settings import EvaluationSettings
from skyqa.sim import load_scene
from skyqa.v1 import capture_pb2, common_pb2, scan_pb2


def plan_jobs(
    req: scan_pb2.ScanRequest, scenes_dir: Path | None, evaluation: EvaluationSettings
) -> tuple[scan_pb2.ScanRequest, list[capture_pb2.CaptureJob]]:
    """Validate the request against its scene and this deployment (the full request, defaults
    applied, is returned to be stored) and split its pose grid into jobs."""
    full = scan.apply_defaults(req)
    scan.validate(full)
    scan.admit(full, scenes_dir, evaluation)
    if full.backend == "builtin":
        extent = load_scene(full.scene_id, scenes_dir).extent
        if not scan.overlaps(full, extent):
            raise InvalidScanRequest(
                f"MapBound does not overlap scene {full.scene_id!r}, whose extent is "
                f"x [{extent[0]:.0f}, {extent[1]:.0f}], y [{extent[2]:.0f}, {extent[3]:.0f}]"
            )
    poses = scan.poses(full)
    size = full.poses_per_job
    count = (len(poses) + size - 1) // size
    jobs = []
    for j in range(count):
        job = capture_pb2.CaptureJob(run_id=full.run_id, job_index=j, job_count=count)
        for i, pose in enumerate(poses[j * size : (j + 1) * size], start=j * size):
            job.poses.add(
                frame_idx=i,
                pose=common_pb2.Pose(
                    x=pose.x,
                    y=pose.y,
                    z=pose.z,
                    yaw_deg=pose.yaw_deg,
                    pitch_deg=pose.pitch_deg,
                    roll_deg=pose.roll_deg,
                ),
            )
        jobs.append(job)
    return full, jobs
