"""``skyqa sim serve`` answers AirSim's RPC API: the pinned Cosys-AirSim client drives it as it
would drive Unreal, and what it gets equals the built-in renderer's own frames."""

from __future__ import annotations

import io
import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from skyqa.settings import AirSimSettings
from skyqa.sim import BuiltinSimulator, CameraSpec, load_scene
from skyqa.sim.airsim_api import STUFF_IDS
from skyqa.sim.airsim_wire import enu_pose, quat_matrix

pytestmark = pytest.mark.integration
airsim: Any = pytest.importorskip("cosysairsim")
msgpackrpc: Any = pytest.importorskip("msgpackrpc")

SETTINGS = {
    "SettingsVersion": 2.0,
    "CameraDefaults": {"CaptureSettings": [{"ImageType": 0, "Width": 160, "Height": 120, "FOV_Degrees": 72}]},
    "Vehicles": {
        "drone_1": {
            "VehicleType": "SimpleFlight",
            "Sensors": {
                "LidarSensor1": {
                    "SensorType": 6,
                    "Enabled": True,
                    "NumberOfChannels": 32,
                    "Range": 80,
                    "PointsPerSecond": 64000,
                    "RotationsPerSecond": 10,
                    "VerticalFOVUpper": 10,
                    "VerticalFOVLower": -60,
                    "DataFrame": "SensorLocalFrame",
                }
            },
        }
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    settings = tmp_path_factory.mktemp("airsim") / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "sim", "serve", "--scene", "tiny_town", "--port", "0",
         "--settings", str(settings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"on 127\.0\.0\.1:(\d+)", line)
    assert m, (line, proc.stderr.read() if proc.stderr else "")
    yield int(m.group(1))
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def client(server: int) -> Any:
    c = airsim.MultirotorClient(ip="127.0.0.1", port=server, timeout_value=60)
    c.confirmConnection()
    return c


def test_the_client_connects_and_controls_a_vehicle(client: Any) -> None:
    assert client.ping() is True
    assert client.getServerVersion() >= client.getMinRequiredServerVersion()
    client.enableApiControl(True, "drone_1")
    assert client.isApiControlEnabled("drone_1") is True
    assert client.armDisarm(True, "drone_1") is True
    pose = airsim.Pose(airsim.Vector3r(5.0, -3.0, -30.0), airsim.euler_to_quaternion(0.0, -0.5, 1.2))
    client.simSetVehiclePose(pose, True, "drone_1")
    got = client.simGetVehiclePose("drone_1")
    assert np.allclose([got.position.x_val, got.position.y_val, got.position.z_val], [5.0, -3.0, -30.0])
    q = got.orientation
    assert np.allclose(
        np.abs([q.w_val, q.x_val, q.y_val, q.z_val]),
        np.abs(
            [pose.orientation.w_val, pose.orientation.x_val, pose.orientation.y_val, pose.orientation.z_val]
        ),
        atol=1e-6,
    )
    state = client.getMultirotorState("drone_1")
    assert state.kinematics_estimated.position.z_val == pytest.approx(-30.0)


def test_images_equal_the_built_in_renderer_at_the_same_pose(client: Any) -> None:
    pose = airsim.Pose(airsim.Vector3r(-40.0, 10.0, -25.0), airsim.euler_to_quaternion(0.0, -0.45, -0.3))
    client.simSetVehiclePose(pose, True, "drone_1")
    client.simSetCameraFov("0", 72.0, "drone_1")
    scene, depth, seg = client.simGetImages(
        [
            airsim.ImageRequest("0", airsim.ImageType.Scene, False, False),
            airsim.ImageRequest("0", airsim.ImageType.DepthPlanar, True, False),
            airsim.ImageRequest("0", airsim.ImageType.Segmentation, False, False),
        ],
        "drone_1",
    )
    assert (scene.width, scene.height) == (160, 120)
    q = pose.orientation
    rotation = quat_matrix((q.w_val, q.x_val, q.y_val, q.z_val))
    here = enu_pose(np.array([-40.0, 10.0, -25.0]), rotation)
    frame = BuiltinSimulator(load_scene("tiny_town")).render(here, CameraSpec(160, 120, 72.0))
    bgr = np.frombuffer(scene.image_data_uint8, np.uint8).reshape(120, 160, 3)
    assert np.array_equal(bgr[:, :, ::-1], frame.rgb)
    d = np.asarray(depth.image_data_float, np.float32).reshape(120, 160)
    hit = np.isfinite(frame.depth)
    assert hit.any() and np.allclose(d[hit], frame.depth[hit], rtol=1e-6) and np.all(d[~hit] > 1e4)
    ids = np.frombuffer(seg.image_data_uint8, np.uint8).reshape(120, 160, 3)[:, :, ::-1].astype(np.uint32)
    # a thing's id is its instance id; stuff (ground, road) ids start at STUFF_IDS; sky is 0
    stuff = np.where(frame.semantic > 0, STUFF_IDS + frame.semantic.astype(np.uint32), 0)
    expected = np.where(frame.instance > 0, frame.instance, stuff)
    assert np.array_equal(ids[:, :, 0] | ids[:, :, 1] << 8 | ids[:, :, 2] << 16, expected)
    png = client.simGetImage("0", airsim.ImageType.Scene, "drone_1")
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), frame.rgb)


def test_lidar_returns_sensor_local_points_with_object_ids_and_names(client: Any) -> None:
    pose = airsim.Pose(airsim.Vector3r(0.0, 0.0, -40.0), airsim.euler_to_quaternion(0.0, 0.0, 0.0))
    client.simSetVehiclePose(pose, True, "drone_1")
    data = client.getLidarData("LidarSensor1", "drone_1")
    points = np.asarray(data.point_cloud, np.float32).reshape(-1, 3)
    assert len(points) > 100
    # sensor-local NED: the ground lies below (positive z), about 40 m down
    assert np.median(points[:, 2]) > 10.0 and np.max(np.linalg.norm(points, axis=1)) <= 80.0 + 1e-3
    assert len(data.segmentation) == len(points) == len(data.groundtruth)
    named = {n for n in data.groundtruth if n}
    assert named and named <= set(client.simListSceneObjects(".*"))
    assert data.pose.position.z_val == pytest.approx(-40.0)


def test_scene_objects_have_names_poses_and_segmentation_ids(client: Any) -> None:
    names = client.simListSceneObjects("residential_building_.*")
    assert names and all(n.startswith("residential_building_") for n in names)
    pose = client.simGetObjectPose(names[0])
    assert np.isfinite(pose.position.x_val) and pose.position.z_val < 0  # above ground in NED
    assert np.isnan(client.simGetObjectPose("no_such_object").position.x_val)
    sid = client.simGetSegmentationObjectID(names[0])
    assert sid == int(names[0].rsplit("_", 1)[1])
    assert client.simSetSegmentationObjectID(names[0], 7, False) is True
    assert client.simGetSegmentationObjectID(names[0]) == 7


def test_unknown_calls_and_bad_arguments_get_rpclib_errors(client: Any, server: int) -> None:
    with pytest.raises(msgpackrpc.error.RPCError, match="could not find function 'simFlyToTheMoon'"):
        client.client.call("simFlyToTheMoon", 1)
    with pytest.raises(msgpackrpc.error.RPCError, match="argument count 5"):
        client.client.call("ping", 1, 2, 3, 4, 5)
    with pytest.raises(msgpackrpc.error.RPCError, match="image type 99 is not served"):
        client.simGetImages([airsim.ImageRequest("0", 99, False, False)], "drone_1")
    with pytest.raises(msgpackrpc.error.RPCError, match=r"a camera FOV is 1\.\.170"):
        client.simSetCameraFov("0", 500.0, "drone_1")
    with pytest.raises(msgpackrpc.error.RPCError, match="position"):
        client.client.call("simSetVehiclePose", {"orientation": {}}, True, "drone_1")
    # bytes that are not msgpack-rpc close that connection, and the server goes on
    with socket.create_connection(("127.0.0.1", server), timeout=10) as s:
        s.sendall(b"\xc1\xc1 this is not msgpack")
        assert s.recv(16) == b""
    assert client.ping() is True


def test_a_bad_settings_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "settings.json"
    bad.write_text(json.dumps({"CameraDefaults": {"CaptureSettings": [{"ImageType": 0, "Width": "wide"}]}}))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.cli",
            "sim",
            "serve",
            "--scene",
            "tiny_town",
            "--settings",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "CameraDefaults.Width must be a number" in done.stderr


def test_skyqas_airsim_backend_against_the_server_sees_what_the_builtin_one_sees(server: int) -> None:
    from skyqa.sim import LidarSpec, Pose, open_simulator

    cfg = AirSimSettings(
        port=server, vehicle="drone_1", lidar_names=["LidarSensor1"], bgr=True, segmentation="ids"
    )
    remote = open_simulator("airsim", "tiny_town", airsim=cfg)
    local = BuiltinSimulator(load_scene("tiny_town"))
    pose = Pose(-40.0, -10.0, 25.0, yaw_deg=17.0, pitch_deg=-26.0)
    cam = CameraSpec(160, 120, 72.0)  # the server's camera: settings.json above
    got, want = remote.render(pose, cam), local.render(pose, cam)
    assert np.array_equal(got.rgb, want.rgb)
    assert np.array_equal(got.semantic, want.semantic)
    hit = np.isfinite(want.depth)
    assert np.allclose(got.depth[hit], want.depth[hit], rtol=1e-6) and np.all(np.isinf(got.depth[~hit]))
    # instance ids are the backend's own, one per object: the same partition of the pixels
    pairs = {(int(a), int(b)) for a, b in zip(got.instance.ravel(), want.instance.ravel(), strict=True)}
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}) > 2
    # LiDAR: the settings' sensor at the vehicle, in the world frame again
    spec = LidarSpec(channels=32, vfov_upper_deg=10, vfov_lower_deg=-60, horizontal_samples=200, range_m=80)
    level = Pose(pose.x, pose.y, pose.z, yaw_deg=pose.yaw_deg)
    scan, truth = remote.lidar(level, spec), local.lidar(level, spec)
    assert len(scan.points) == len(truth.points) > 100
    assert np.allclose(scan.points, truth.points, atol=1e-3)
    assert np.array_equal(scan.semantic, truth.semantic)
