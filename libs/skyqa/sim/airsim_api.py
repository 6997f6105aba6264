"""The AirSim API on skyqa's built-in simulator: what AirSim-protocol clients call, answered from
a :class:`~skyqa.sim.scene.Scene` and its ray-cast renderer.

Vehicles appear when first named (or come from ``settings.json``); each has a pose in NED, API
control and arming flags, and cameras with their size, FOV and pose relative to the vehicle.
Scene objects are named ``<class>_<instance id>`` (stuff: ``<class>``) and keep a segmentation id
(a thing's instance id, stuff after the largest one, until ``simSetSegmentationObjectID``
changes it). A Segmentation image paints an object's id with the server's palette (see
:mod:`skyqa.sim.airsim_palette`), and LiDAR returns carry ids (``segmentation``, AirSim's field)
and names (``groundtruth``, Cosys-AirSim's).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import re2
from numpy.typing import NDArray
from PIL import Image

from skyqa.sim._airsim_kernels import gather_slots
from skyqa.sim.airsim_palette import Palette
from skyqa.sim.airsim_settings import AirSimConfig, CameraConfig
from skyqa.sim.airsim_wire import (
    S,
    WireError,
    enu_pose,
    matrix_quat,
    nan_pose,
    ned_rotation,
    pose_map,
    quat_matrix as _quat_matrix,
    quaternion,
    read_fov,
    read_pose,
    vector,
)
from skyqa.sim.camera import Intrinsics, Pose
from skyqa.sim.protocol import CameraSpec, LidarSpec
from skyqa.sim.rpc_server import float32_array
from skyqa.sim.scene import Scene, SceneObject

SCENE, DEPTH_PLANAR, DEPTH_PERSPECTIVE, DEPTH_VIS, SEGMENTATION = 0, 1, 2, 3, 5
SERVED_IMAGES = {SCENE: "Scene", DEPTH_PLANAR: "DepthPlanar", DEPTH_PERSPECTIVE: "DepthPerspective",
                 DEPTH_VIS: "DepthVis", SEGMENTATION: "Segmentation"}  # fmt: skip
NO_HIT_M = 65504.0  # what AirSim reports where a ray hits nothing
SERVER_VERSION = 4  # Cosys-AirSim 3.x clients need 4; AirSim 1.x clients need 1 or more
MIN_CLIENT_VERSION = 1
MAX_IMAGE_PIXELS = 8192 * 8192
MAX_PATTERN_CHARS = 256
# RE2 matches in time linear in the name, whatever the pattern; its memory per pattern is
# bounded by max_mem, and the module caches 128 compiled patterns
RE2_MAX_MEM = 1 << 18


class ApiError(Exception):
    """A call the server answers with an error (AirSim clients raise it as ``RPCError``)."""


@dataclass
class Vehicle:
    position: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    rotation: NDArray[np.float64] = field(default_factory=lambda: np.eye(3))
    api_control: bool = False
    armed: bool = False
    cameras: dict[str, CameraConfig] = field(default_factory=dict)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool) or len(str(value)) > 256:
        raise ApiError(f"{what} must be a name (a string), got {value!r}")
    return str(value)


def _regex(value: Any, what: str) -> Any:
    """A client's name pattern compiled by RE2: Python's backtracking engine would let one
    pattern (``((.*)*)*x``) hold a worker and the GIL for minutes."""
    if not isinstance(value, str):
        raise ApiError(f"{what} must be a string, got {value!r}")
    if len(value) > MAX_PATTERN_CHARS:
        raise ApiError(f"{what} is {len(value)} characters; at most {MAX_PATTERN_CHARS} are taken")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    try:
        return re2.compile(value, options)
    except re2.error as exc:
        detail = b" ".join(a for a in exc.args if isinstance(a, bytes)).decode("utf-8", "replace")
        raise ApiError(
            f"{what} {value!r} is not one this server runs (RE2 syntax: no backreferences or "
            f"lookaround): {detail or exc}"
        ) from None


def _vehicle_camera(external: Any) -> None:
    """AirSim 1.7 clients name an external camera (one of settings.json's ExternalCameras) by a
    trailing ``external`` flag; this server has vehicle cameras only."""
    if external not in (False, None, 0, ""):
        raise ApiError("external cameras are not served: skyqa's simulator has vehicle cameras only")


class AirSimApi:
    """The methods an AirSim client calls, by their RPC names (see :meth:`methods`)."""

    def __init__(self, sim: Any, scene: Scene, config: AirSimConfig, palette: Palette | None = None) -> None:
        self.sim, self.scene, self.config = sim, scene, config
        self.palette = palette or Palette("ids")
        self._lock = threading.Lock()  # one render at a time; calls from many clients interleave
        self.vehicles: dict[str, Vehicle] = {}
        # an object's key: its instance id, or minus its class id for stuff (one object per class)
        self.objects: dict[str, int] = {}
        self.seg_ids: dict[str, int] = {}
        self._bounds: dict[str, SceneObject] = {}
        # per-pixel lookups go through a dense table: slot i for instance i, the semantic
        # classes after the instances, one slot past each for ids no object has
        self._n_inst = max((o.instance_id for o in scene.objects), default=0) + 1
        self._n_sem = max((o.semantic.id for o in scene.objects), default=0) + 1
        for obj in scene.objects:
            thing = obj.instance_id > 0
            name = f"{obj.semantic.name}_{obj.instance_id}" if thing else obj.semantic.name
            key = obj.instance_id if thing else -obj.semantic.id
            self.objects.setdefault(name, key)
            wanted = key if thing else self._n_inst + obj.semantic.id
            self.seg_ids.setdefault(name, self.palette.default_id(wanted))
            self._bounds.setdefault(name, obj)
        for name in config.vehicles or ["SimpleFlight"]:
            self._vehicle(name)

    def methods(self) -> dict[str, Any]:
        return {
            "ping": lambda: True,
            "getServerVersion": lambda: SERVER_VERSION,
            "getMinRequiredClientVersion": lambda: MIN_CLIENT_VERSION,
            "reset": self.reset,
            "enableApiControl": self.enable_api_control,
            "isApiControlEnabled": lambda vehicle="": self._vehicle(vehicle).api_control,
            "armDisarm": self.arm_disarm,
            "simSetVehiclePose": self.set_vehicle_pose,
            "simGetVehiclePose": self.get_vehicle_pose,
            "simSetCameraFov": self.set_camera_fov,
            "simSetCameraPose": self.set_camera_pose,
            "simGetCameraInfo": self.get_camera_info,
            "simGetImages": self.get_images,
            "simGetImage": self.get_image,
            "getLidarData": self.get_lidar_data,
            "simListSceneObjects": self.list_scene_objects,
            "simListInstanceSegmentationObjects": lambda: sorted(self.objects),
            "simGetObjectPose": self.get_object_pose,
            "simGetSegmentationObjectID": lambda name: self.seg_ids.get(_name(name, "mesh name"), -1),
            "simSetSegmentationObjectID": self.set_segmentation_id,
            "getMultirotorState": self.get_multirotor_state,
        }

    # -- vehicles and cameras ------------------------------------------------------------------

    def _vehicle(self, name: Any) -> Vehicle:
        key = _name(name, "vehicle name") or (self.config.vehicles or ["SimpleFlight"])[0]
        if key not in self.vehicles:
            if len(self.vehicles) >= 64:
                raise ApiError(f"no vehicle {key!r} (this server holds at most 64)")
            self.vehicles[key] = Vehicle()
        return self.vehicles[key]

    def _camera(self, vehicle: Vehicle, name: Any) -> CameraConfig:
        key = _name(name, "camera name")
        if key not in vehicle.cameras:
            if len(vehicle.cameras) >= 16:
                raise ApiError(f"no camera {key!r} (a vehicle holds at most 16)")
            vehicle.cameras[key] = self.config.camera(key)
        return vehicle.cameras[key]

    def reset(self) -> None:
        for v in self.vehicles.values():
            v.position, v.rotation, v.api_control, v.armed = np.zeros(3), np.eye(3), False, False
            v.cameras.clear()  # back to settings.json's cameras

    def enable_api_control(self, is_enabled: Any, vehicle: Any = "") -> None:
        self._vehicle(vehicle).api_control = bool(is_enabled)

    def arm_disarm(self, arm: Any, vehicle: Any = "") -> bool:
        self._vehicle(vehicle).armed = bool(arm)
        return True

    def set_vehicle_pose(self, pose: Any, ignore_collision: Any = True, vehicle: Any = "") -> None:
        v = self._vehicle(vehicle)
        position, q = read_pose(pose, "a vehicle pose")
        v.position, v.rotation = position, _quat_matrix(q)

    def get_vehicle_pose(self, vehicle: Any = "") -> dict[str, Any]:
        v = self._vehicle(vehicle)
        return pose_map(v.position, v.rotation)

    def set_camera_fov(self, camera: Any, fov: Any, vehicle: Any = "", external: Any = False) -> None:
        _vehicle_camera(external)
        value = read_fov(fov)
        self._camera(self._vehicle(vehicle), camera).fov_deg = value

    def set_camera_pose(self, camera: Any, pose: Any, vehicle: Any = "", external: Any = False) -> None:
        _vehicle_camera(external)
        position, q = read_pose(pose, "a camera pose")
        cam = self._camera(self._vehicle(vehicle), camera)
        cam.position, cam.rotation = position, _quat_matrix(q)

    def _camera_pose(
        self, vehicle: Vehicle, cam: CameraConfig
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The camera's NED position and body-to-world rotation."""
        return vehicle.position + vehicle.rotation @ cam.position, vehicle.rotation @ cam.rotation

    def get_camera_info(self, camera: Any, vehicle: Any = "", external: Any = False) -> dict[str, Any]:
        _vehicle_camera(external)
        v = self._vehicle(vehicle)
        cam = self._camera(v, camera)
        position, rotation = self._camera_pose(v, cam)
        k = Intrinsics.from_fov(cam.width, cam.height, cam.fov_deg)
        proj = [[k.fx, 0.0, k.cx, 0.0], [0.0, k.fy, k.cy, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
        return {"pose": pose_map(position, rotation), "fov": cam.fov_deg, "proj_mat": {"matrix": proj}}

    # -- images ------------------------------------------------------------------------------

    def get_images(self, requests: Any, vehicle: Any = "", external: Any = False) -> list[dict[str, Any]]:
        _vehicle_camera(external)
        if not isinstance(requests, list) or not 1 <= len(requests) <= 16:
            raise ApiError("simGetImages takes a list of 1..16 image requests")
        v = self._vehicle(vehicle)
        frames: dict[str, Any] = {}  # one render per camera serves all its image types
        return [self._image(v, r, frames) for r in requests]

    def get_image(self, camera: Any, image_type: Any, vehicle: Any = "", fourth: Any = False) -> bytes:
        # AirSim 1.7 sends its external flag here, Cosys-AirSim an annotation layer's name
        # (for image type Annotation, which this server does not serve)
        if not isinstance(fourth, str):
            _vehicle_camera(fourth)
        request = {
            "camera_name": camera,
            "image_type": image_type,
            "pixels_as_float": False,
            "compress": True,
        }
        return bytes(self._image(self._vehicle(vehicle), request, {})["image_data_uint8"])

    def _image(self, v: Vehicle, r: Any, frames: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(r, dict):
            raise ApiError("an image request is a map (camera_name, image_type, pixels_as_float, compress)")
        kind = r.get("image_type", SCENE)
        if kind not in SERVED_IMAGES:
            served = ", ".join(f"{n} ({k})" for k, n in SERVED_IMAGES.items())
            raise ApiError(f"image type {kind!r} is not served by skyqa's simulator; it serves {served}")
        name = _name(r.get("camera_name", "0"), "camera name")
        cam = self._camera(v, name)
        if cam.width * cam.height > MAX_IMAGE_PIXELS:
            raise ApiError(f"camera size {cam.width}x{cam.height} is over {MAX_IMAGE_PIXELS} pixels")
        position, rotation = self._camera_pose(v, cam)
        pose = enu_pose(position, rotation)
        if name not in frames:
            with self._lock:
                frames[name] = self.sim.render(pose, CameraSpec(cam.width, cam.height, cam.fov_deg))
        frame = frames[name]
        as_float, compress = bool(r.get("pixels_as_float", False)), bool(r.get("compress", False))
        data_u8: bytes | memoryview = b""
        data_f: Any = []
        if kind == SCENE:
            data_u8 = _png(frame.rgb) if compress else _bytes(frame.rgb[:, :, ::-1])  # BGR, as AirSim
        elif kind == SEGMENTATION:
            colours = self.palette.rgb(self._table(self.seg_ids, 0, np.int64))
            if compress:
                data_u8 = _png(self._lookup(frame.instance, frame.semantic, colours))
            else:  # BGR, as AirSim
                data_u8 = _bytes(self._lookup(frame.instance, frame.semantic, colours[:, ::-1]))
        else:
            depth = frame.depth if kind == DEPTH_PLANAR else _perspective(frame.depth, frame.intrinsics)
            depth = np.where(np.isfinite(depth), depth, NO_HIT_M).astype(np.float32)
            if as_float:
                data_f = float32_array(depth)
            else:
                vis = np.clip(depth / 100.0 * 255.0, 0, 255).astype(np.uint8)  # DepthVis: 100 m is white
                data_u8 = _png(np.repeat(vis[:, :, None], 3, -1)) if compress else _bytes(vis)
        return {
            "image_data_uint8": data_u8,
            "image_data_float": data_f,
            "camera_position": vector(*position.tolist()),
            "camera_orientation": quaternion(*matrix_quat(rotation)),
            "time_stamp": 0,
            "message": "",
            "pixels_as_float": as_float,
            "compress": compress,
            "width": cam.width,
            "height": cam.height,
            "image_type": kind,
            "camera_name": str(r.get("camera_name", "0")),
        }

    def _slot(self, key: int) -> int:
        return key if key > 0 else self._n_inst + 1 - key

    def _table(self, by_name: dict[str, Any], default: Any, dtype: Any) -> NDArray[Any]:
        """``by_name``'s value for each object, at its slot (``default`` elsewhere: sky, no hit)."""
        table = np.full(self._n_inst + self._n_sem + 2, default, dtype=dtype)
        for name, key in self.objects.items():
            table[self._slot(key)] = by_name[name]
        return table

    def _lookup(
        self, instance: NDArray[np.integer[Any]], semantic: NDArray[np.integer[Any]], table: NDArray[Any]
    ) -> NDArray[Any]:
        """Per pixel or point, ``table`` at its object's slot."""
        if table.dtype == object:  # names: the kernel gathers their slot numbers, numpy the names
            slots = gather_slots(instance, semantic, self._n_inst, self._n_sem, np.arange(len(table)))
            named: NDArray[Any] = table[slots]
            return named
        return gather_slots(instance, semantic, self._n_inst, self._n_sem, table)

    # -- LiDAR -------------------------------------------------------------------------------

    def get_lidar_data(self, lidar: Any = "", vehicle: Any = "") -> dict[str, Any]:
        v = self._vehicle(vehicle)
        cfg = self.config.lidar(_name(lidar, "lidar name"))
        position = v.position + v.rotation @ cfg.position
        rotation = v.rotation @ cfg.rotation
        spec = LidarSpec(
            channels=cfg.channels,
            vfov_upper_deg=cfg.vfov_upper_deg,
            vfov_lower_deg=cfg.vfov_lower_deg,
            horizontal_samples=cfg.horizontal_samples,
            range_m=cfg.range_m,
        )
        with self._lock:
            scan = self.sim.lidar(enu_pose(position, rotation), spec)
        world_ned = scan.points.astype(np.float64) @ S  # ENU -> NED flips y and z
        local = (world_ned - position) @ rotation  # rows: R^T (p - c)
        az = np.degrees(np.arctan2(local[:, 1], local[:, 0])) % 360.0
        lo, hi = cfg.hfov_start_deg % 360.0, cfg.hfov_end_deg % 360.0
        if cfg.hfov_end_deg - cfg.hfov_start_deg >= 359.0:  # AirSim's default 0..359 is all around
            keep = np.ones(len(az), dtype=bool)
        else:
            keep = (az >= lo) & (az <= hi) if lo <= hi else (az >= lo) | (az <= hi)
        points = local[keep] if cfg.sensor_local else world_ned[keep]
        inst, sem = scan.instance[keep], scan.semantic[keep]
        names = {name: name for name in self.objects}
        return {
            "point_cloud": float32_array(points),
            "time_stamp": 0,
            "pose": pose_map(position, rotation),
            "segmentation": self._lookup(inst, sem, self._table(self.seg_ids, 0, np.int64)).tolist(),
            "groundtruth": self._lookup(inst, sem, self._table(names, "", object)).tolist(),
        }

    # -- scene objects ---------------------------------------------------------------------------

    def list_scene_objects(self, regex: Any = ".*") -> list[str]:
        rx = _regex(regex, "name regex")
        return sorted(n for n in self.objects if rx.fullmatch(n))

    def get_object_pose(self, name: Any, ned: Any = True) -> dict[str, Any]:
        obj = self._bounds.get(_name(name, "object name"))
        if obj is None:
            return nan_pose()  # what AirSim answers for an unknown object
        centre = (obj.aabb_min + obj.aabb_max) / 2.0
        position = S @ centre if ned else centre
        return pose_map(position, ned_rotation(Pose(0, 0, 0, obj.yaw_deg)))

    def set_segmentation_id(self, name: Any, object_id: Any, is_regex: Any = False) -> bool:
        top = self.palette.size - 1
        if isinstance(object_id, bool) or not isinstance(object_id, int) or not 0 <= object_id <= top:
            raise ApiError(
                f"a segmentation id is 0..{top} (the {self.palette.name} palette), got {object_id!r}"
            )
        if is_regex:
            rx = _regex(name, "mesh regex")
            hits = [n for n in self.objects if rx.fullmatch(n)]
        else:
            pattern = _name(name, "mesh name")
            hits = [n for n in self.objects if n == pattern]
        for n in hits:
            self.seg_ids[n] = object_id
        return bool(hits)

    def get_multirotor_state(self, vehicle: Any = "") -> dict[str, Any]:
        v = self._vehicle(vehicle)
        zero = vector(0, 0, 0)
        pose = pose_map(v.position, v.rotation)
        kinematics = {
            "position": pose["position"],
            "orientation": pose["orientation"],
            "linear_velocity": zero,
            "angular_velocity": zero,
            "linear_acceleration": zero,
            "angular_acceleration": zero,
        }
        return {
            "collision": {"has_collided": False, "normal": zero, "impact_point": zero, "position": zero,
                          "penetration_depth": 0.0, "time_stamp": 0, "object_name": "", "object_id": -1},
            "kinematics_estimated": kinematics,
            "gps_location": {"latitude": 0.0, "longitude": 0.0, "altitude": 0.0},
            "timestamp": 0,
            "landed_state": 0,
            "rc_data": {"timestamp": 0, "pitch": 0.0, "roll": 0.0, "throttle": 0.0, "yaw": 0.0,
                        "switches": 0, "vendor_id": "", "is_initialized": False, "is_valid": False},
            "ready": True,
            "ready_message": "",
            "can_arm": True,
        }  # fmt: skip


def _bytes(image: NDArray[np.uint8]) -> memoryview:
    """An image's bytes in C order, without a further copy on their way to the socket."""
    return np.ascontiguousarray(image).reshape(-1).data


def _png(rgb: NDArray[np.uint8]) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "PNG", compress_level=1)
    return buf.getvalue()


def _perspective(depth: NDArray[np.float32], k: Intrinsics) -> NDArray[np.float32]:
    """Distance along each pixel's ray from planar depth."""
    u = (np.arange(k.width) + 0.5 - k.cx) / k.fx
    v = (np.arange(k.height) + 0.5 - k.cy) / k.fy
    scale = np.sqrt(1.0 + u[None, :] ** 2 + v[:, None] ** 2).astype(np.float32)
    return depth * scale


__all__ = ["AirSimApi", "ApiError", "WireError"]
