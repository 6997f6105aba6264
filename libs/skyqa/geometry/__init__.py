"""Point-cloud geometry: voxel fusion, instances, PCD I/O, coverage and previews."""

from skyqa.geometry.boxes import Box2D, instance_boxes
from skyqa.geometry.instances import connected_instances, instance_stats, oriented_extent, pca_yaw_deg
from skyqa.geometry.pcd import CLOUD_DTYPE, read_pcd, write_pcd
from skyqa.geometry.preview import render_oblique, render_topdown
from skyqa.geometry.voxel import coverage_ratio, voxel_fuse

__all__ = [
    "CLOUD_DTYPE",
    "Box2D",
    "connected_instances",
    "coverage_ratio",
    "instance_boxes",
    "instance_stats",
    "oriented_extent",
    "pca_yaw_deg",
    "read_pcd",
    "render_oblique",
    "render_topdown",
    "voxel_fuse",
    "write_pcd",
]
