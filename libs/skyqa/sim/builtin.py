"""The built-in CPU simulator: Open3D ``RaycastingScene`` (Embree) over a labelled scene.

One primary cast per frame yields everything: the hit distance is planar depth (ray
directions have unit forward component), the geometry id gives instance and class, the
primitive id gives the triangle colour and material, and the normal drives shading. One
shadow ray per sunlit hit adds cast shadows. Everything per pixel around the two Embree
casts runs in the compiled kernels of ``_kernels``.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np
import open3d as o3d
from numpy.typing import NDArray

from skyqa.sim import _kernels as K
from skyqa.sim.camera import Pose, _camera_directions, rotation_matrix
from skyqa.sim.classes import SemanticClass
from skyqa.sim.protocol import CameraSpec, Frame, LidarScan, LidarSpec
from skyqa.sim.scene import Scene

SCRATCH_PIXELS = 2_500_000  # 1920x1200; larger stills are rare and allocate per frame


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
        self.shadows = shadows
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
        self._buffers: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None

    def classes(self) -> dict[int, SemanticClass]:
        return dict(self.scene.classes)

    def extent(self) -> tuple[float, float, float, float]:
        return self.scene.extent

    def _cast(self, rays: NDArray[np.float32]) -> dict[str, Any]:
        with self._lock:
            ans = self._raycaster.cast_rays(o3d.core.Tensor.from_numpy(rays), nthreads=self.threads)
        return {k: ans[k].numpy() for k in ("t_hit", "geometry_ids", "primitive_ids", "primitive_normals")}

    def _labels(
        self, gid: NDArray[np.uint32], hit: NDArray[np.bool_]
    ) -> tuple[NDArray[np.int64], NDArray[np.uint32], NDArray[np.uint16]]:
        gidx = np.where(hit, gid, len(self._instance) - 1).astype(np.int64)
        return gidx, self._instance[gidx], self._semantic[gidx]

    def _scratch(self, pixels: int) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        """Primary and shadow ray buffers, kept for the last frame size up to ``SCRATCH_PIXELS``:
        fresh buffers that large come straight from the kernel, and their page faults cost a
        tenth of a frame. Callers hold ``launch_lock``."""
        if self._buffers is not None and len(self._buffers[0]) == pixels:
            return self._buffers
        rays = np.empty((pixels, 6), dtype=np.float32)
        srays = np.empty((pixels if self.shadows else 0, 6), dtype=np.float32)
        self._buffers = (rays, srays) if pixels <= SCRATCH_PIXELS else None
        return rays, srays

    def render(self, pose: Pose, camera: CameraSpec) -> Frame:
        k = camera.intrinsics
        with K.launch_lock:
            K.set_threads(self.threads)
            dirs, rot, origin = (
                _camera_directions(k),
                pose.rotation().astype(np.float32),
                pose.position.astype(np.float32),
            )
            rays, srays = self._scratch(len(dirs))
            K.rotate_rays(dirs, rot, origin, rays)
            ans = self._cast(rays)
            t, normals = ans["t_hit"], ans["primitive_normals"]
            lam, lit = K.sunlight(dirs, rot, origin, t, normals, K.SUN, K.SHADOW_BIAS_M, srays)
            if lit.size:
                with self._lock:
                    occ = self._raycaster.test_occlusions(
                        o3d.core.Tensor.from_numpy(srays[: lit.size]), nthreads=self.threads
                    )
                lam[lit[occ.numpy()]] = 0.0
            rgb, depth, instance, semantic = K.shade(
                dirs,
                rot,
                origin,
                t,
                ans["geometry_ids"],
                ans["primitive_ids"],
                normals,
                lam,
                self._offsets,
                self._colors,
                self._materials,
                self._instance,
                self._semantic,
                K.NOISE,
                K.PALETTE,
                K.HAZE_M,
            )
        h, w = k.height, k.width
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
