"""The built-in CPU simulator: Open3D ``RaycastingScene`` (Embree) over a labelled scene.

One primary cast per frame yields everything: the hit distance is planar depth (ray
directions have unit forward component), the geometry id gives instance and class, the
primitive id gives the triangle colour and material, and the normal drives shading. One
shadow ray per hit towards the sun adds cast shadows.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np
import open3d as o3d
from numpy.typing import NDArray

from skyqa.sim.camera import Intrinsics, Pose, _camera_directions, camera_rays, rotation_matrix
from skyqa.sim.classes import SemanticClass
from skyqa.sim.mesh import ASPHALT, FACADE, FOLIAGE, GRASS
from skyqa.sim.protocol import CameraSpec, Frame, LidarScan, LidarSpec
from skyqa.sim.scene import Scene

SUN = (np.array([0.45, -0.35, 0.82]) / np.linalg.norm([0.45, -0.35, 0.82])).astype(np.float32)
AMBIENT = np.array([0.40, 0.42, 0.47], dtype=np.float32)
SUNLIGHT = np.array([0.68, 0.65, 0.58], dtype=np.float32)
SKY_HORIZON = np.array([0.80, 0.86, 0.92], dtype=np.float32)
SKY_ZENITH = np.array([0.42, 0.60, 0.86], dtype=np.float32)
WINDOW = np.array([0.20, 0.27, 0.35], dtype=np.float32)
HAZE_M = 1800.0


@lru_cache(maxsize=16)
def _ray_lengths(k: Intrinsics) -> NDArray[np.float32]:
    """Length of every pixel's ray direction; a rotation does not change it, so it is cached."""
    d = _camera_directions(k)
    out: NDArray[np.float32] = np.sqrt(np.einsum("ij,ij->i", d, d)).astype(np.float32)
    out.setflags(write=False)
    return out


def _hash01(*cells: NDArray[np.int64]) -> NDArray[np.float32]:
    """Cheap deterministic value noise in [0, 1) from integer cell coordinates."""
    h = np.zeros_like(cells[0])
    for c, prime in zip(cells, (73856093, 19349663, 83492791), strict=False):
        h ^= c * prime
    h = (h ^ (h >> 13)) * 1274126177
    return ((h & 0xFFFF).astype(np.float32)) / 65536.0


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

    def classes(self) -> dict[int, SemanticClass]:
        return dict(self.scene.classes)

    def extent(self) -> tuple[float, float, float, float]:
        return self.scene.extent

    def _cast(self, rays: NDArray[np.float32]) -> dict[str, Any]:
        with self._lock:
            ans = self._raycaster.cast_rays(o3d.core.Tensor(rays), nthreads=self.threads)
        return {k: ans[k].numpy() for k in ("t_hit", "geometry_ids", "primitive_ids", "primitive_normals")}

    def _labels(
        self, gid: NDArray[np.uint32], hit: NDArray[np.bool_]
    ) -> tuple[NDArray[np.int64], NDArray[np.uint32], NDArray[np.uint16]]:
        gidx = np.where(hit, gid, len(self._instance) - 1).astype(np.int64)
        return gidx, self._instance[gidx], self._semantic[gidx]

    def render(self, pose: Pose, camera: CameraSpec) -> Frame:
        k = camera.intrinsics
        rays = camera_rays(pose, k)
        ans = self._cast(rays)
        t = ans["t_hit"].astype(np.float32)
        hit = np.isfinite(t)
        gidx, instance, semantic = self._labels(ans["geometry_ids"], hit)
        rgb = self._shade(
            rays,
            _ray_lengths(k),
            t,
            hit,
            gidx,
            ans["primitive_ids"].astype(np.int64),
            ans["primitive_normals"],
        )
        h, w = k.height, k.width
        return Frame(
            rgb=rgb.reshape(h, w, 3),
            semantic=semantic.reshape(h, w),
            instance=instance.reshape(h, w),
            depth=np.where(hit, t, np.inf).astype(np.float32).reshape(h, w),
            pose=pose,
            intrinsics=k,
        )

    def _shade(
        self,
        rays: NDArray[np.float32],
        dnorm: NDArray[np.float32],
        t: NDArray[np.float32],
        hit: NDArray[np.bool_],
        gidx: NDArray[np.int64],
        prim: NDArray[np.int64],
        normals: NDArray[np.float32],
    ) -> NDArray[np.uint8]:
        # float32 throughout and work only where it is needed: this is the renderer's hot path
        dirs = rays[:, 3:]
        out = np.empty((len(rays), 3), dtype=np.float32)
        # sky: gradient from horizon to zenith by ray elevation
        miss = np.flatnonzero(~hit)
        if miss.size:
            elev = np.clip(dirs[miss, 2] / dnorm[miss], 0.0, 1.0)[:, None]
            out[miss] = SKY_HORIZON + (SKY_ZENITH - SKY_HORIZON) * elev
        idx = np.flatnonzero(hit)
        if idx.size:
            out[idx] = self._surface(rays, dnorm, t, idx, gidx, prim, normals)
        out *= 255.0
        out += 0.5
        np.clip(out, 0.0, 255.0, out=out)
        return out.astype(np.uint8)

    def _surface(
        self,
        rays: NDArray[np.float32],
        dnorm: NDArray[np.float32],
        t: NDArray[np.float32],
        idx: NDArray[np.intp],
        gidx: NDArray[np.int64],
        prim: NDArray[np.int64],
        normals: NDArray[np.float32],
    ) -> NDArray[np.float32]:
        tri = self._offsets[gidx[idx]] + np.maximum(prim[idx], 0)
        albedo = self._colors[tri]
        material = self._materials[tri]
        n = normals[idx]
        d = rays[idx, 3:]
        th = t[idx]
        flip = np.einsum("ij,ij->i", n, d) > 0
        n[flip] *= -1
        pts = rays[idx, :3] + d * th[:, None]
        self._texture(albedo, material, pts, n)
        lam = np.clip(n @ SUN, 0.0, 1.0)
        if self.shadows:
            lit = np.flatnonzero(lam > 0)
            if lit.size:
                srays = np.empty((lit.size, 6), dtype=np.float32)
                srays[:, :3] = pts[lit] + n[lit] * np.float32(0.05)
                srays[:, 3:] = SUN
                with self._lock:
                    occ = self._raycaster.test_occlusions(
                        o3d.core.Tensor(srays), nthreads=self.threads
                    ).numpy()
                lam[lit[occ]] = 0.0
        fog = 1.0 - np.exp(th * dnorm[idx] * np.float32(-1.0 / HAZE_M))
        light = AMBIENT + SUNLIGHT * lam[:, None]
        color: NDArray[np.float32] = albedo * light * (1.0 - fog)[:, None] + SKY_HORIZON * fog[:, None]
        return color

    @staticmethod
    def _texture(
        albedo: NDArray[np.float32],
        material: NDArray[np.uint8],
        pts: NDArray[np.float32],
        n: NDArray[np.float32],
    ) -> None:
        """Procedural detail so views are not flat colour: windows, grass, asphalt, foliage."""
        facade = np.flatnonzero((material == FACADE) & (np.abs(n[:, 2]) < 0.3))
        if facade.size:
            p = pts[facade]
            along = np.where(np.abs(n[facade, 0]) > np.abs(n[facade, 1]), p[:, 1], p[:, 0])
            fz = np.mod(p[:, 2], 3.2) / 3.2
            fa = np.mod(along, 2.6) / 2.6
            win = (fz > 0.35) & (fz < 0.8) & (fa > 0.2) & (fa < 0.75) & (p[:, 2] > 1.0)
            albedo[facade[win]] = WINDOW
        for mat, cell, amp in ((GRASS, 2.0, 0.10), (ASPHALT, 0.7, 0.06), (FOLIAGE, 0.6, 0.18)):
            sel = np.flatnonzero(material == mat)
            if sel.size:
                c = np.floor(pts[sel] / cell).astype(np.int64)
                noise = _hash01(c[:, 0], c[:, 1], c[:, 2])
                albedo[sel] *= (1.0 - amp + 2 * amp * noise)[:, None]

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
