"""Stage-3 settings per profile (UAV-DualCog's ``stage3_runtime_defaults`` and pipeline spec).

Release is the media contract: 1440x1080 H.264 at 10 FPS and 10 Mb/s (the scan request's
``video`` settings, defaulted per profile). Preview keeps the frame rate and timing, so
durations and intervals are the same, at a size a laptop renders in minutes.
"""

from __future__ import annotations

from pydantic import BaseModel
from skyqa.v1 import scan_pb2

from services.mission_planner.planner import Acceptance


class MissionConfig(BaseModel):
    video_width: int = 1440
    video_height: int = 1080
    video_fps: int = 10
    video_bitrate: int = 10_000_000
    # AirSim's default camera field of view
    video_fov_deg: float = 90.0
    jpeg_quality: int = 90
    archive_width: int = 4096
    archive_height: int = 3072
    attempts: int = 8
    max_repair_lift_m: float = 50.0
    max_repair_fraction: float = 0.5
    # UrbanVideo-Bench-style navigation missions per run (see navigation.py), from the scan request
    navigation_goals: int = 3
    navigation_routes: int = 2
    # AirCopBench-style UAV groups (see group_missions.py): their sizes, each planned per_size times
    group_sizes: tuple[int, ...] = (3, 5, 6)
    groups_per_size: int = 1

    @classmethod
    def for_scan(cls, scan: scan_pb2.ScanRequest) -> MissionConfig:
        """Video size, bitrate and field of view come from the (defaulted) scan request."""
        v = scan.video
        return cls(
            video_width=v.width or cls.model_fields["video_width"].default,
            video_height=v.height or cls.model_fields["video_height"].default,
            video_bitrate=v.bitrate or cls.model_fields["video_bitrate"].default,
            video_fov_deg=v.fov_deg or cls.model_fields["video_fov_deg"].default,
            jpeg_quality=90 if scan.profile == "release" else 85,
            navigation_goals=scan.navigation.goals,
            navigation_routes=scan.navigation.routes,
            group_sizes=tuple(scan.groups.sizes),
            groups_per_size=scan.groups.per_size,
        )

    @property
    def acceptance(self) -> Acceptance:
        return Acceptance(self.attempts, self.max_repair_lift_m, self.max_repair_fraction)
