"""What ``skyqa sim serve`` reads from an AirSim ``settings.json``: vehicle names, camera size,
FOV and mounting, and LiDAR sensors. Everything else in the file is ignored; a value of the wrong
type or out of range is an error naming its key.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skyqa.errors import InvalidInput
from skyqa.sim.airsim_wire import S
from skyqa.sim.camera import rotation_matrix

LIDAR = 6  # AirSim's SensorType for a LiDAR
MAX_SETTINGS_BYTES = 1 << 20


def _mount(d: dict[str, Any], where: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A mount offset (NED metres) and rotation from X, Y, Z, Pitch, Roll, Yaw (degrees)."""
    v = [_num(d, k, 0.0, where, -1e4, 1e4) for k in ("X", "Y", "Z", "Pitch", "Roll", "Yaw")]
    # AirSim's angles act in NED; skyqa's rotation_matrix is ENU with yaw counter-clockwise
    rotation = S @ rotation_matrix(-v[5], v[3], v[4]) @ S
    return np.array(v[:3]), rotation


def _num(d: dict[str, Any], key: str, default: float, where: str, lo: float, hi: float) -> float:
    value = d.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"settings.json {where}.{key} must be a number, got {value!r}")
    if not lo <= value <= hi:
        raise InvalidInput(f"settings.json {where}.{key} must be within [{lo:g}, {hi:g}], got {value!r}")
    return float(value)


@dataclass
class CameraConfig:
    width: int = 256  # AirSim's default capture size
    height: int = 144
    fov_deg: float = 90.0
    position: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    rotation: NDArray[np.float64] = field(default_factory=lambda: np.eye(3))


@dataclass
class LidarConfig:
    channels: int = 16
    range_m: float = 100.0
    horizontal_samples: int = 625  # PointsPerSecond / RotationsPerSecond / channels (100000 / 10 / 16)
    vfov_upper_deg: float = -15.0
    vfov_lower_deg: float = -25.0
    hfov_start_deg: float = 0.0
    hfov_end_deg: float = 359.0
    sensor_local: bool = True  # DataFrame "SensorLocalFrame"; else "VehicleInertialFrame"
    position: NDArray[np.float64] = field(default_factory=lambda: np.zeros(3))
    rotation: NDArray[np.float64] = field(default_factory=lambda: np.eye(3))


@dataclass
class AirSimConfig:
    vehicles: list[str] = field(default_factory=list)
    cameras: dict[str, CameraConfig] = field(default_factory=dict)
    default_camera: CameraConfig = field(default_factory=CameraConfig)
    lidars: dict[str, LidarConfig] = field(default_factory=dict)

    def camera(self, name: str) -> CameraConfig:
        return copy.deepcopy(self.cameras.get(name, self.default_camera))

    def lidar(self, name: str) -> LidarConfig:
        if name in self.lidars:
            return self.lidars[name]
        if not name and self.lidars:
            return next(iter(self.lidars.values()))
        if not self.lidars:
            return LidarConfig()  # no settings: AirSim's default LiDAR
        raise InvalidInput(f"no LiDAR {name!r}; settings.json names {', '.join(sorted(self.lidars))}")


def _capture(d: Any, base: CameraConfig, where: str) -> CameraConfig:
    cam = copy.deepcopy(base)
    if not isinstance(d, dict):
        return cam
    for entry in d.get("CaptureSettings", []) or []:
        if isinstance(entry, dict) and entry.get("ImageType", 0) == 0:
            cam.width = int(_num(entry, "Width", cam.width, where, 1, 8192))
            cam.height = int(_num(entry, "Height", cam.height, where, 1, 8192))
            cam.fov_deg = _num(entry, "FOV_Degrees", cam.fov_deg, where, 1, 170)
    if any(k in d for k in ("X", "Y", "Z", "Pitch", "Roll", "Yaw")):
        cam.position, cam.rotation = _mount(d, where)
    return cam


def _lidar(d: dict[str, Any], where: str) -> LidarConfig:
    channels = int(_num(d, "NumberOfChannels", 16, where, 1, 256))
    pps = _num(d, "PointsPerSecond", 100000, where, 100, 1e8)
    rps = _num(d, "RotationsPerSecond", 10, where, 0.1, 1000)
    upper = _num(d, "VerticalFOVUpper", -15, where, -90, 90)
    lower = _num(d, "VerticalFOVLower", -25, where, -90, 90)
    if lower >= upper:
        raise InvalidInput(f"settings.json {where}: VerticalFOVLower must be below VerticalFOVUpper")
    frame = d.get("DataFrame", "SensorLocalFrame")
    if frame not in ("SensorLocalFrame", "VehicleInertialFrame"):
        raise InvalidInput(f"settings.json {where}.DataFrame is SensorLocalFrame or VehicleInertialFrame")
    position, rotation = _mount(d, where)
    return LidarConfig(
        channels=channels,
        range_m=_num(d, "Range", 100, where, 1, 2000),
        horizontal_samples=int(min(8192, max(8, round(pps / rps / channels)))),
        vfov_upper_deg=upper,
        vfov_lower_deg=lower,
        hfov_start_deg=_num(d, "HorizontalFOVStart", 0, where, -360, 360),
        hfov_end_deg=_num(d, "HorizontalFOVEnd", 359, where, -360, 360),
        sensor_local=frame == "SensorLocalFrame",
        position=position,
        rotation=rotation,
    )


def load_settings(path: Path | None) -> AirSimConfig:
    """The parts of an AirSim ``settings.json`` the server uses; no file gives AirSim's defaults."""
    cfg = AirSimConfig()
    if path is None:
        return cfg
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            raise InvalidInput(f"{path} is larger than {MAX_SETTINGS_BYTES} bytes")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"{path} cannot be read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidInput(f"{path} must hold a JSON object")
    cfg.default_camera = _capture(doc.get("CameraDefaults"), CameraConfig(), "CameraDefaults")
    vehicles = doc.get("Vehicles") or {}
    if not isinstance(vehicles, dict):
        raise InvalidInput("settings.json Vehicles must be an object")
    for vname, vd in vehicles.items():
        if not isinstance(vd, dict):
            raise InvalidInput(f"settings.json Vehicles.{vname} must be an object")
        cfg.vehicles.append(str(vname))
        for cname, cd in (vd.get("Cameras") or {}).items():
            cfg.cameras[str(cname)] = _capture(cd, cfg.default_camera, f"Vehicles.{vname}.Cameras.{cname}")
        for sname, sd in (vd.get("Sensors") or {}).items():
            if isinstance(sd, dict) and sd.get("SensorType") == LIDAR and sd.get("Enabled", True):
                cfg.lidars[str(sname)] = _lidar(sd, f"Vehicles.{vname}.Sensors.{sname}")
    return cfg
