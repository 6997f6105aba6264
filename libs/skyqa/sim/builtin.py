"""The built-in CPU simulator: Open3D ``RaycastingScene`` (Embree) over a labelled scene.

One primary cast per frame yields everything: the hit distance is planar depth (ray
directions have unit forward component), the geometry id gives instance and class, the
primitive id gives the triangle colour and material, and the normal drives shading. Cast
shadows come from the scene's sun shadow map (``shadow``), cast once. Everything per pixel
around the Embree cast runs in the compiled kernels of ``_kernels``, over bands of at most
``TILE_PIXELS`` rays so a 4096x3072 still needs no more ray memory than a small frame.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np
import open3d as o3d
from numpy.typing import NDArray

from skyqa.sim import _kernels as K
from skyqa.sim.camera import Pose, rotation_matrix
from skyqa.sim.classes import SemanticClass
from skyqa.sim.daylight import SUN
from skyqa.sim.protocol import CameraSpec, Frame, LidarScan, LidarSpec
from skyqa.sim.scene import Scene
from skyqa.sim.shadow import ShadowMap, build_shadow_map

# Rays per Embree cast (whole image rows, at least one). Open3D's per-cast outputs then stay
# below glibc's mmap threshold, so they are reused heap memory, not pages faulted in per frame.
TILE_PIXELS = 1 << 20
GROUND_BAND_M = 0.5  # objects no higher than this above the lowest one shade nothing else


@lru_cache(maxsize=8)
def _lidar_directions(spec: LidarSpec) -> NDArray[np.float32]:
    elev = np.radians(np.linspace(spec.vfov_lower_deg, spec.vfov_upper_deg, spec.channels))
    az = np.linspace(0.0, 2 * np.pi, spec.horizontal_samples, endpoint=False)
    ee, aa = np.meshgrid(elev, az, indexing="ij")
    base = np.stack([np.cos(ee) * np.cos(aa), np.cos(ee) * np.sin(aa), np.sin(ee)], -1).reshape(-1, 3)
    mounts = [base @ rotation_matrix(0.0, p, 0.0).T for p in spec.mount_pitch_deg]
    out = np.vstack(mounts).astype(np.float32)
    out.setflags(write=False)
    return out


class BuiltinSimulator:
    backend = "builtin"

    def __init__(self, scene: Scene, *, shadows: bool = True, threads: int = 0) -> None:
        self.scene = scene
        self.scene_id = scene.scene_id
        self.threads = threads
        self._raycaster = o3d.t.geometry.RaycastingScene(nthreads=threads)
        instance: list[int] = []
        semantic: list[int] = []
        offsets: list[int] = []
        offset = 0
        for obj in scene.objects:
            mesh = o3d.t.geometry.TriangleMesh()
            mesh.vertex.positions = o3d.core.Tensor(obj.vertices.astype(np.float32))
            mesh.triangle.indices = o3d.core.Tensor(obj.triangles.astype(np.int32))
            gid = self._raycaster.add_triangles(mesh)
            # Per-geometry ids keep labels stable: Embree primitive order is not (embree#20).
            if gid != len(instance):
                raise RuntimeError("Open3D returned non-sequential geometry ids")
            instance.append(obj.instance_id)
            semantic.append(obj.semantic.id)
            offsets.append(offset)
            offset += len(obj.triangles)
        self._instance = np.asarray([*instance, 0], dtype=np.uint32)
        self._semantic = np.asarray([*semantic, 0], dtype=np.uint16)
        self._offsets = np.asarray([*offsets, 0], dtype=np.int64)
        self._colors = np.vstack([o.tri_colors for o in scene.objects] + [np.zeros((1, 3), np.float32)])
        self._materials = np.concatenate([o.tri_materials for o in scene.objects] + [np.zeros(1, np.uint8)])
        self._lock = threading.Lock()
        self._rays = np.empty((0, 6), dtype=np.float32)
        self.shadow_map = self._shadow_map() if shadows else ShadowMap.empty()

    def _shadow_map(self) -> ShadowMap:
        """The map covers what can cast a shadow: objects rising above the ground band. A ground
        plane or road lies under everything; mapping the 1.5 km ground of a city would make the
        texels of its 300 m of buildings twenty times coarser."""
        floor = min((float(o.aabb_min[2]) for o in self.scene.objects), default=0.0)
        casters = [o.vertices for o in self.scene.objects if o.aabb_max[2] > floor + GROUND_BAND_M]
        if not casters:
            return ShadowMap.empty()
        return build_shadow_map(self._raycaster, np.vstack(casters), SUN, threads=self.threads)

    def classes(self) -> dict[int, SemanticClass]:
        return dict(self.scene.classes)

    def extent(self) -> tuple[float, float, float, float]:
        return self.scene.extent

    def clearance(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """Distance from each point to the nearest surface (metres): what a capsule body
        moving through the scene collides with."""
        query = o3d.core.Tensor(np.ascontiguousarray(points, dtype=np.float32).reshape(-1, 3))
        with self._lock:
            d = self._raycaster.compute_distance(query, nthreads=self.threads)
        out: NDArray[np.float64] = d.numpy().astype(np.float64)
        return out

    def _cast(self, rays: NDArray[np.float32]) -> dict[str, Any]:
        with self._lock:
            ans = self._raycaster.cast_rays(o3d.core.Tensor.from_numpy(rays), nthreads=self.threads)
        return {k: ans[k].numpy() for k in ("t_hit", "geometry_ids", "primitive_ids", "primitive_normals")}

    def _labels(
        self, gid: NDArray[np.uint32], hit: NDArray[np.bool_]
    ) -> tuple[NDArray[np.int64], NDArray[np.uint32], NDArray[np.uint16]]:
        gidx = np.where(hit, gid, len(self._instance) - 1).astype(np.int64)
        return gidx, self._instance[gidx], self._semantic[gidx]

    def _ray_buffer(self, pixels: int) -> NDArray[np.float32]:
        """The reused ray buffer (fresh buffers of a few MB fault in page by page, a tenth of a
        frame). Callers hold ``launch_lock``."""
        if len(self._rays) < pixels:
            self._rays = np.empty((pixels, 6), dtype=np.float32)
        return self._rays[:pixels]

    def render(self, pose: Pose, camera: CameraSpec) -> Frame:
        return self.render_rows(pose, camera, 0, camera.height)

    def render_rows(self, pose: Pose, camera: CameraSpec, first: int, stop: int) -> Frame:
        """Rows ``first``..``stop`` of the frame ``render`` would return, pixel for pixel (each
        ray is computed from its row in the whole image), so an image too large to hold with its
        depth and labels renders band by band."""
        k = camera.intrinsics
        if not 0 <= first < stop <= k.height:
            raise ValueError(f"rows {first}..{stop} are not within the {k.height}-row image")
        h, w = stop - first, k.width
        n = h * w
        cam = np.array([w, k.cx, k.cy, 1.0 / k.fx, 1.0 / k.fy], dtype=np.float32)
        rot, origin = pose.rotation().astype(np.float32), pose.position.astype(np.float32)
        rgb = np.empty((n, 3), dtype=np.uint8)
        depth = np.empty(n, dtype=np.float32)
        instance = np.empty(n, dtype=np.uint32)
        semantic = np.empty(n, dtype=np.uint16)
        scene = (self._offsets, self._colors, self._materials, self._instance, self._semantic)
        sm = self.shadow_map
        band = max(1, TILE_PIXELS // w)  # whole rows per cast
        with K.launch_lock:
            K.set_threads(self.threads)
            for row0 in range(0, h, band):
                start, end = row0 * w, min(h, row0 + band) * w
                rays = self._ray_buffer(end - start)
                K.rotate_rays(cam, rot, origin, first + row0, rays)
                ans = self._cast(rays)
                K.shade(
                    cam,
                    rot,
                    origin,
                    first + row0,
                    ans["t_hit"],
                    ans["geometry_ids"],
                    ans["primitive_ids"],
                    ans["primitive_normals"],
                    scene,
                    (sm.depth, sm.basis, sm.params),
                    K.NOISE,
                    K.PALETTE,
                    SUN,
                    K.HAZE_M,
                    rgb[start:end],
                    depth[start:end],
                    instance[start:end],
                    semantic[start:end],
                )
        return Frame(
            rgb=rgb.reshape(h, w, 3),
            semantic=semantic.reshape(h, w),
            instance=instance.reshape(h, w),
            depth=depth.reshape(h, w),
            pose=pose,
            intrinsics=k,
        )

    def lidar(self, pose: Pose, spec: LidarSpec) -> LidarScan:
        spec.validate()
        dirs = _lidar_directions(spec) @ pose.rotation().T.astype(np.float32)
        rays = np.empty((len(dirs), 6), dtype=np.float32)
        rays[:, :3] = pose.position.astype(np.float32)
        rays[:, 3:] = dirs
        ans = self._cast(rays)
        t = ans["t_hit"]
        keep = np.isfinite(t) & (t <= spec.range_m)
        _, instance, semantic = self._labels(ans["geometry_ids"], keep)
        pts = rays[keep, :3] + dirs[keep] * t[keep, None]
        return LidarScan(pts.astype(np.float32), semantic[keep], instance[keep], pose)

    def close(self) -> None:
        return None
