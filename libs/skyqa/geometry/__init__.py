"""Point-cloud geometry: voxel fusion, instances, PCD I/O, coverage and previews.

The names below are imported on first use: the qa-generator needs only
:mod:`skyqa.geometry.visibility`, not the numba fusion, scipy's labelling or OpenCV.
"""

from typing import TYPE_CHECKING

from skyqa._lazy import lazy_exports

if TYPE_CHECKING:
    from skyqa.geometry.boxes import Box2D, instance_boxes
    from skyqa.geometry.instances import connected_instances, instance_stats, oriented_extent, pca_yaw_deg
    from skyqa.geometry.pcd import CLOUD_DTYPE, decode_cloud, read_pcd, write_pcd
    from skyqa.geometry.preview import render_oblique, render_topdown
    from skyqa.geometry.voxel import coverage_ratio, voxel_fuse
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "skyqa.geometry.boxes": ("Box2D", "instance_boxes"),
            "skyqa.geometry.instances": (
                "connected_instances",
                "instance_stats",
                "oriented_extent",
                "pca_yaw_deg",
            ),
            "skyqa.geometry.pcd": ("CLOUD_DTYPE", "decode_cloud", "read_pcd", "write_pcd"),
            "skyqa.geometry.preview": ("render_oblique", "render_topdown"),
            "skyqa.geometry.voxel": ("coverage_ratio", "voxel_fuse"),
        },
    )

__all__ = [
    "CLOUD_DTYPE",
    "Box2D",
    "connected_instances",
    "coverage_ratio",
    "decode_cloud",
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
