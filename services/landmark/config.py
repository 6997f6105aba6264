"""Stage-2 collection parameters (UAV-DualCog's ``stage2.collect_*`` keys and defaults).

They are written into ``instances.json`` as ``filters`` so every release records how its
candidates were chosen. Deviations from UAV-DualCog's defaults are commented.
"""

from __future__ import annotations

from pydantic import BaseModel
from skyqa.scan import stills
from skyqa.v1 import scan_pb2


class CollectConfig(BaseModel):
    exclude_class_ids: list[int] = [0]
    ground_percentile: float = 15.0
    # UAV-DualCog cuts 1.2 m above the ground percentile, which removes most of a car; the
    # built-in city's vehicles are landmarks too, so the cut is lower
    ground_margin_m: float = 0.5
    # UAV-DualCog uses 50 points at 1 cm voxels from 128-channel LiDARs; preview scans are sparser
    min_points: int = 40
    max_instances: int = 0  # 0 = all; the scan's landmark_count sets it
    camera_fov_deg: float = 72.0
    camera_distance_min_m: float = 9.0
    camera_distance_scale: float = 2.5
    height_base_m: float = 3.0
    height_obj_scale: float = 0.35
    height_scale: float = 0.10
    height_min_m: float = 1.8
    height_max_m: float = 18.0
    look_at_z_ratio: float = 0.55
    pitch_offsets_deg: list[float] = [0.0, 8.0, 16.0, 24.0]
    neighbour_radius_min_m: float = 12.0
    neighbour_min_points: int = 8
    occlusion_depth_margin_m: float = 0.8
    visibility_image_size: int = 640
    visibility_neighbour_px: int = 2
    min_visible_points: int = 20  # UAV-DualCog: 80 at its density
    min_visible_ratio: float = 0.02
    views_count: int = 8
    min_keep: int = 4
    add_topdown: bool = True
    # the size views are rendered and checked at (the stills' working size) and the size they
    # ship at: the QA stage renders the reviewed landmarks' valid views again at that one
    image_width: int = 4096
    image_height: int = 3072
    ship_width: int = 0  # 0: the size checked at
    ship_height: int = 0
    jpeg_quality: int = 80
    # validity of a rendered view (measured on the instance mask); pixels at the shipped size
    min_box_pixels: int = 64
    min_visible_ratio_2d: float = 0.15
    # skyqa's own: orbit views vary their distance (times UAV-DualCog's) and turn the camera so
    # the landmark is not always centred and the same size (a constant box would answer)
    distance_scale_range: tuple[float, float] = (1.0, 1.7)
    framing: bool = True
    seed: int = 0

    def box_pixels_here(self) -> int:
        """``min_box_pixels`` at the size views are checked at: the same share of the shipped
        frame, so a view valid at the working size is valid at the shipped one."""
        shipped = (self.ship_width or self.image_width) * (self.ship_height or self.image_height)
        return max(1, round(self.min_box_pixels * self.image_width * self.image_height / shipped))

    @classmethod
    def for_scan(cls, scan: scan_pb2.ScanRequest) -> CollectConfig:
        size = stills(scan)
        return cls(
            image_width=size.working_width,
            image_height=size.working_height,
            ship_width=size.width,
            ship_height=size.height,
            jpeg_quality=size.jpeg_quality,
            max_instances=scan.landmark_count,
            seed=scan.seed,
        )
