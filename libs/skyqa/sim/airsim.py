"""AirSim / Cosys-AirSim / Colosseum backend over the simulator's RPC API.

Uses the maintained ``cosysairsim`` client (install ``skyqa[airsim]``); the ``airsim`` PyPI
client does not build on Python >= 3.10 and decodes float images quadratically. The pure
conversion functions below (ENU <-> NED, Euler -> quaternion, image and LiDAR decoding) carry
the logic and are unit tested without a running Unreal.

Frames: AirSim speaks NED (x north... as configured, y right, z down); skyqa speaks ENU with the
mapping used by UAV-DualCog: ``(x, y, z)_ned = (x, -y, -z)_enu``, yaw negated.
"""

from __future__ import annotations

import logging
import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skyqa.errors import InvalidInput
from skyqa.sim.airsim_wire import quat_matrix
from skyqa.sim.camera import Intrinsics, Pose
from skyqa.sim.classes import BY_NAME, SemanticClass
from skyqa.sim.protocol import CameraSpec, Frame, LidarScan, LidarSpec

SCENE, DEPTH_PLANAR, SEGMENTATION = 0, 1, 5

log = logging.getLogger("skyqa.sim.airsim")


def enu_to_ned(x: float, y: float, z: float) -> tuple[float, float, float]:
    return x, -y, -z


def ned_to_enu_points(points: NDArray[np.floating[Any]]) -> NDArray[np.float32]:
    p = np.asarray(points, dtype=np.float32).reshape(-1, 3).copy()
    p[:, 1:] *= -1.0
    return p


def quaternion_from_euler(
    pitch_rad: float, roll_rad: float, yaw_rad: float
) -> tuple[float, float, float, float]:
    """AirSim's ``to_quaternion`` (ZYX order); returns (w, x, y, z)."""
    cy, sy = math.cos(yaw_rad / 2), math.sin(yaw_rad / 2)
    cp, sp = math.cos(pitch_rad / 2), math.sin(pitch_rad / 2)
    cr, sr = math.cos(roll_rad / 2), math.sin(roll_rad / 2)
    return (
        cy * cr * cp + sy * sr * sp,
        cy * sr * cp - sy * cr * sp,
        cy * cr * sp + sy * sr * cp,
        sy * cr * cp - cy * sr * sp,
    )


def pose_to_ned(pose: Pose) -> tuple[tuple[float, float, float], tuple[float, float, float, float]]:
    """Vehicle position and orientation quaternion in NED for ``simSetVehiclePose``."""
    position = enu_to_ned(pose.x, pose.y, pose.z)
    q = quaternion_from_euler(
        math.radians(pose.pitch_deg), math.radians(pose.roll_deg), math.radians(-pose.yaw_deg)
    )
    return position, q


def decode_rgb(data: bytes, width: int, height: int, bgr: bool) -> NDArray[np.uint8]:
    img = np.frombuffer(data, dtype=np.uint8)
    channels = img.size // max(1, width * height)
    if channels not in (3, 4) or img.size != width * height * channels:
        raise ValueError(f"image payload of {img.size} bytes does not match {width}x{height}")
    img = img.reshape(height, width, channels)[:, :, :3]
    return np.ascontiguousarray(img[:, :, ::-1] if bgr else img)


def decode_depth(values: list[float], width: int, height: int) -> NDArray[np.float32]:
    depth = np.asarray(values, dtype=np.float32)
    if depth.size != width * height:
        raise ValueError(f"depth has {depth.size} values, expected {width * height}")
    depth = depth.reshape(height, width)
    # AirSim reports "no hit" as a very large value.
    return np.where(depth >= 1e4, np.inf, depth).astype(np.float32)


@dataclass
class LabelMap:
    """Maps simulator object names to skyqa classes and instance ids (regex, first match wins)."""

    rules: list[tuple[str, str]]
    _ids: dict[str, int] = field(default_factory=dict)

    def resolve(self, name: str) -> tuple[int, int]:
        for pattern, cls in self.rules:
            if re.fullmatch(pattern, name, flags=re.IGNORECASE):
                semantic = BY_NAME[cls]
                if semantic.stuff:
                    return semantic.id, 0
                iid = self._ids.setdefault(name.lower(), len(self._ids) + 1)
                return semantic.id, iid
        return 0, 0


def decode_segmentation(
    rgb: NDArray[np.uint8], colour_to_name: dict[tuple[int, int, int], str], labels: LabelMap
) -> tuple[NDArray[np.uint16], NDArray[np.uint32]]:
    """Instance-colour segmentation (Cosys) to per-pixel class and instance ids."""
    h, w, _ = rgb.shape
    flat = rgb.reshape(-1, 3).astype(np.uint32)
    packed = (flat[:, 0] << 16) | (flat[:, 1] << 8) | flat[:, 2]
    uniq, inverse = np.unique(packed, return_inverse=True)
    sem_lut = np.zeros(len(uniq), np.uint16)
    inst_lut = np.zeros(len(uniq), np.uint32)
    for i, code in enumerate(uniq):
        name = colour_to_name.get((int(code >> 16), int((code >> 8) & 255), int(code & 255)))
        if name is not None:
            sem_lut[i], inst_lut[i] = labels.resolve(name)
    return sem_lut[inverse].reshape(h, w), inst_lut[inverse].reshape(h, w)


def decode_lidar(
    point_cloud: list[float], groundtruth: list[str], labels: LabelMap
) -> tuple[NDArray[np.float32], NDArray[np.uint16], NDArray[np.uint32]]:
    """Cosys ``LidarData`` (NED xyz triples + per-point object names) to ENU labelled points."""
    pts = ned_to_enu_points(np.asarray(point_cloud, dtype=np.float32))
    if groundtruth and len(groundtruth) != len(pts):
        raise ValueError(f"{len(groundtruth)} labels for {len(pts)} LiDAR points")
    sem = np.zeros(len(pts), np.uint16)
    inst = np.zeros(len(pts), np.uint32)
    for i, name in enumerate(groundtruth):
        sem[i], inst[i] = labels.resolve(name)
    return pts, sem, inst


def segmentation_colours(
    ids: dict[str, int], colormap: NDArray[np.integer[Any]] | None
) -> dict[tuple[int, int, int], str]:
    """Segmentation colour -> object name: Cosys-AirSim's ``colormap`` at each object's id, or
    (with no colormap) the id itself as ``(id & 255, id >> 8 & 255, id >> 16)``."""
    out: dict[tuple[int, int, int], str] = {}
    for name, i in sorted(ids.items()):
        if i < 0:
            continue
        if colormap is None:
            out.setdefault((i & 255, (i >> 8) & 255, (i >> 16) & 255), name)
        elif i < len(colormap):
            r, g, b = (int(c) for c in colormap[i][:3])
            out.setdefault((r, g, b), name)
    return out


class AirSimSimulator:
    """Captures from a running AirSim-family simulator. Needs ``pip install 'skyqa[airsim]'``."""

    backend = "airsim"

    def __init__(
        self,
        scene_id: str,
        labels: LabelMap,
        *,
        host: str = "127.0.0.1",
        port: int = 41451,
        vehicle: str = "",
        camera: str = "0",
        lidar_names: tuple[str, ...] = ("LidarSensor1",),
        bgr: bool = False,
        extent: tuple[float, float, float, float] = (-500.0, 500.0, -500.0, 500.0),
        segmentation: str = "cosys",
        lidar_frame: str = "sensor",
    ) -> None:
        try:
            import cosysairsim as airsim
            from msgpackrpc.error import RPCError
        except ImportError as exc:
            raise RuntimeError(
                "the airsim backend needs the cosysairsim package: pip install 'skyqa[airsim]'"
            ) from exc
        self._airsim = airsim
        self._rpc_error: type[Exception] = RPCError
        # the client's msgpack-rpc session lives on the I/O loop of the thread that made it, and
        # services call the simulator from a pool of threads: every call goes through this one
        self._rpc = ThreadPoolExecutor(max_workers=1, thread_name_prefix="airsim-rpc")
        self.client = self._rpc.submit(airsim.MultirotorClient, ip=host, port=port).result()
        self._on_rpc(self.client.confirmConnection)
        self.scene_id = scene_id
        self.labels = labels
        self.vehicle = vehicle
        self.camera = camera
        try:
            self.lidar_names = self._lidars_present(lidar_names, host, port)
        except InvalidInput:
            self.close()
            raise
        self.bgr = bgr
        self._extent = extent
        self.lidar_frame = lidar_frame
        names = self._on_rpc(self.client.simListInstanceSegmentationObjects)
        ids = {str(n): int(self._on_rpc(self.client.simGetSegmentationObjectID, n)) for n in names}
        self.colour_to_name = segmentation_colours(
            ids, self.client.simGetSegmentationColorMap() if segmentation == "cosys" else None
        )

    def _on_rpc(self, fn: Any, *args: Any) -> Any:
        return self._rpc.submit(fn, *args).result()

    def _lidars_present(self, names: tuple[str, ...], host: str, port: int) -> tuple[str, ...]:
        """The configured LiDARs the simulator has: a settings.json naming fewer sensors than
        SKYQA_AIRSIM__LIDAR_NAMES would otherwise fail every scan on the first one missing."""
        present, why = [], {}
        for name in names:
            try:
                self._on_rpc(self.client.getLidarData, name, self.vehicle)
            except self._rpc_error as exc:  # AirSim: "No lidar with name ... exist on vehicle"
                why[name] = " ".join(str(exc).split())
            else:
                present.append(name)
        if not present:
            detail = "; ".join(f"{n}: {w}" for n, w in why.items()) or "no names given"
            raise InvalidInput(
                f"the simulator at {host}:{port} has none of the LiDARs SKYQA_AIRSIM__LIDAR_NAMES names "
                f"for vehicle {self.vehicle!r} ({detail}); set it to the LiDARs of its settings.json"
            )
        if why:
            log.warning(
                "the simulator has no LiDAR %s; scanning with %s only (SKYQA_AIRSIM__LIDAR_NAMES)",
                ", ".join(why),
                ", ".join(present),
            )
        return tuple(present)

    def classes(self) -> dict[int, SemanticClass]:
        return {c.id: c for c in BY_NAME.values()}

    def extent(self) -> tuple[float, float, float, float]:
        return self._extent

    def _set_pose(self, pose: Pose, with_pitch: bool) -> None:
        a = self._airsim
        (x, y, z), _ = pose_to_ned(pose)
        q = quaternion_from_euler(0.0, 0.0, math.radians(-pose.yaw_deg))
        self._on_rpc(
            self.client.simSetVehiclePose,
            a.Pose(a.Vector3r(x, y, z), a.Quaternionr(q[1], q[2], q[3], q[0])),
            True,
            self.vehicle,
        )
        if with_pitch:
            cq = quaternion_from_euler(math.radians(pose.pitch_deg), math.radians(pose.roll_deg), 0.0)
            self._on_rpc(
                self.client.simSetCameraPose,
                self.camera,
                a.Pose(a.Vector3r(0, 0, 0), a.Quaternionr(cq[1], cq[2], cq[3], cq[0])),
                self.vehicle,
            )

    def render(self, pose: Pose, camera: CameraSpec) -> Frame:
        a = self._airsim
        self._set_pose(pose, with_pitch=True)
        # the FOV is an API call away; without it the frame would keep settings.json's FOV while
        # its intrinsics said the job's
        self._on_rpc(self.client.simSetCameraFov, self.camera, camera.fov_deg, self.vehicle)
        responses = self._on_rpc(
            self.client.simGetImages,
            [
                a.ImageRequest(self.camera, SCENE, False, False),
                a.ImageRequest(self.camera, SEGMENTATION, False, False),
                a.ImageRequest(self.camera, DEPTH_PLANAR, True, False),
            ],
            self.vehicle,
        )
        scene, seg, depth = responses
        if (scene.width, scene.height) != (camera.width, camera.height):
            # the capture size is settings.json's alone (no API call sets it), and a resampled
            # frame would no longer be the simulator's pixels, depth or segmentation
            raise InvalidInput(
                f"the simulator's camera {self.camera!r} captures {scene.width}x{scene.height}, this "
                f"job asks for {camera.width}x{camera.height}: set Width {camera.width} and Height "
                f"{camera.height} in that camera's CaptureSettings (ImageType 0, or CameraDefaults) of "
                f"the simulator's settings.json, or ask for {scene.width}x{scene.height}"
            )
        rgb = decode_rgb(scene.image_data_uint8, scene.width, scene.height, self.bgr)
        seg_rgb = decode_rgb(seg.image_data_uint8, seg.width, seg.height, self.bgr)
        semantic, instance = decode_segmentation(seg_rgb, self.colour_to_name, self.labels)
        return Frame(
            rgb=rgb,
            semantic=semantic,
            instance=instance,
            depth=decode_depth(depth.image_data_float, depth.width, depth.height),
            pose=pose,
            intrinsics=Intrinsics.from_fov(scene.width, scene.height, camera.fov_deg),
        )

    def lidar(self, pose: Pose, spec: LidarSpec) -> LidarScan:
        self._set_pose(pose, with_pitch=False)
        parts = []
        for name in self.lidar_names:
            data = self._on_rpc(self.client.getLidarData, name, self.vehicle)
            cloud = np.asarray(data.point_cloud, dtype=np.float64).reshape(-1, 3)
            if self.lidar_frame == "sensor" and len(cloud):
                p, o = data.pose.position, data.pose.orientation
                rotation = quat_matrix((o.w_val, o.x_val, o.y_val, o.z_val))
                cloud = cloud @ rotation.T + np.array([p.x_val, p.y_val, p.z_val])
            labels = list(getattr(data, "groundtruth", []) or [])
            parts.append(decode_lidar(cloud.ravel().tolist(), labels, self.labels))
        pts = np.vstack([p[0] for p in parts]) if parts else np.zeros((0, 3), np.float32)
        return LidarScan(
            pts,
            np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.uint16),
            np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.uint32),
            pose,
        )

    def close(self) -> None:
        self._rpc.shutdown(wait=False)
