"""Capture of one pose batch: RGB, segmentation, depth and labelled LiDAR per pose.

Resumable: a frame whose files are all stored is not captured again, and a job whose
manifest exists is skipped, so redelivery after a crash produces no duplicate chunk.
"""

from __future__ import annotations

from collections.abc import Callable

from skyqa import keys, media, scan
from skyqa.blob import BlobStore
from skyqa.contracts import FrameRow, PoseENU
from skyqa.contracts.base import dump_jsonl, load_jsonl
from skyqa.sim import CameraSpec, Pose, Simulator
from skyqa.v1 import capture_pb2, scan_pb2


def capture_job(
    job: capture_pb2.CaptureJob,
    req: scan_pb2.ScanRequest,
    sim: Simulator,
    store: BlobStore,
    on_frame: Callable[[], None] | None = None,
) -> list[FrameRow]:
    manifest_key = keys.capture_job_manifest(job.run_id, req.scene_id, job.job_index)
    if store.exists(manifest_key):
        return load_jsonl(FrameRow, store.get(manifest_key), "job manifest")
    camera = CameraSpec(req.camera.width, req.camera.height, req.camera.fov_deg)
    lidar = scan.lidar_spec(req)
    rows = []
    for sample in job.poses:
        p = sample.pose
        pose = Pose(p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg)
        fk = keys.chunk_files(job.run_id, req.scene_id, req.backend, sample.frame_idx)
        if all(store.exists(k) for k in fk.values()):
            points = len(media.decode_lidar(store.get(fk["lidarseg.npy"])))
        else:
            frame = sim.render(pose, camera)
            # the LiDAR rides level on the vehicle; only the camera is pitched
            scan_ = sim.lidar(Pose(p.x, p.y, p.z, p.yaw_deg, 0.0, 0.0), lidar)
            points = len(scan_.points)
            store.put(fk["rgb.jpg"], media.encode_jpeg(frame.rgb, req.camera.jpeg_quality), "image/jpeg")
            store.put(
                fk["seg.png"],
                media.encode_segmentation(frame.semantic, frame.instance),
                "image/png",
            )
            store.put(fk["depth.png"], media.encode_depth(frame.depth), "image/png")
            # written last: its presence marks the frame complete
            store.put(fk["lidarseg.npy"], media.encode_lidar(scan_.points, scan_.semantic, scan_.instance))
            if on_frame is not None:
                on_frame()
        rows.append(
            FrameRow(
                scene_id=req.scene_id,
                engine=req.backend,
                worker_id=job.job_index,
                vehicle_or_actor=f"job_{job.job_index}",
                frame_idx=sample.frame_idx,
                timestamp=round(sample.frame_idx * 0.1, 3),
                pose_enu=PoseENU(x=p.x, y=p.y, z=p.z, yaw=p.yaw_deg, pitch=p.pitch_deg, roll=p.roll_deg),
                rgb_path=keys.release_path(fk["rgb.jpg"]),
                segmentation_path=keys.release_path(fk["seg.png"]),
                depth_path=keys.release_path(fk["depth.png"]),
                lidar_segmentation_path=keys.release_path(fk["lidarseg.npy"]),
                lidar_segmentation_count=points,
                point_count=points,
                point_source="lidar" if points else "lidar_empty",
                intrinsics=camera.intrinsics.as_dict(),
            )
        )
    store.put(manifest_key, dump_jsonl(rows), "application/x-ndjson")
    return rows
