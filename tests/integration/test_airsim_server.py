"""``skyqa sim serve`` answers AirSim's RPC API: the pinned Cosys-AirSim client drives it as it
would drive Unreal, and what it gets equals the built-in renderer's own frames."""

from __future__ import annotations

import ast
import io
import json
import re
import shutil
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
from skyqa.sim.airsim import quaternion_from_euler
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


def serve(settings: dict[str, Any], folder: Path, *options: str) -> tuple[subprocess.Popen[str], int]:
    """``skyqa sim serve`` on tiny_town with these settings, on a free loopback port."""
    path = folder / "settings.json"
    path.write_text(json.dumps(settings))
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "sim", "serve", "--scene", "tiny_town", "--port", "0",
         "--settings", str(path), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"on 127\.0\.0\.1:(\d+)", line)
    assert m, (line, proc.stderr.read() if proc.stderr else "")
    return proc, int(m.group(1))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    proc, port = serve(SETTINGS, tmp_path_factory.mktemp("airsim"))
    yield port
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def cosys_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The server painting segmentation with Cosys-AirSim's colour map."""
    proc, port = serve(SETTINGS, tmp_path_factory.mktemp("cosys"), "--palette", "cosys")
    yield port
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
    # a thing's id is its instance id; stuff (ground, road) ids follow the largest one; sky is 0
    after = max(o.instance_id for o in load_scene("tiny_town").objects) + 1
    stuff = np.where(frame.semantic > 0, after + frame.semantic.astype(np.uint32), 0)
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


def test_an_airsim_1_palette_paints_ids_0_to_255_with_its_colours(tmp_path: Path) -> None:
    # AirSim 1.x paints ids 0..255 with the table its docs ship as seg_rgbs.txt; this one has
    # 256 distinct colours in that file's format
    rng = np.random.default_rng(7)
    table = np.stack(np.divmod(rng.choice(1 << 24, 256, replace=False), 1 << 8), -1)
    rgb = np.stack([table[:, 0] >> 8, table[:, 0] & 255, table[:, 1]], -1).astype(np.uint8)
    palette = tmp_path / "seg_rgbs.txt"
    palette.write_text("".join(f"{i}\t[{r}, {g}, {b}]\n" for i, (r, g, b) in enumerate(rgb.tolist())))
    proc, port = serve(SETTINGS, tmp_path, "--palette", str(palette))
    try:
        c = airsim.MultirotorClient(ip="127.0.0.1", port=port, timeout_value=60)
        names = c.simListSceneObjects(".*")
        assert all(0 <= c.simGetSegmentationObjectID(n) <= 255 for n in names)  # defaults wrap
        # the classic AirSim recipe: every object to 0, then the one of interest to 42
        pose = airsim.Pose(airsim.Vector3r(-40.0, 10.0, -25.0), airsim.euler_to_quaternion(0.0, -0.45, -0.3))
        c.simSetVehiclePose(pose, True, "drone_1")
        assert c.simSetSegmentationObjectID(r"[\w]*", 0, True) is True
        q = pose.orientation
        here = enu_pose(np.array([-40.0, 10.0, -25.0]), quat_matrix((q.w_val, q.x_val, q.y_val, q.z_val)))
        scene = load_scene("tiny_town")
        frame = BuiltinSimulator(scene).render(here, CameraSpec(160, 120, 72.0))
        things, counts = np.unique(frame.instance[frame.instance > 0], return_counts=True)
        target = int(things[np.argmax(counts)])
        semantic = next(o.semantic.name for o in scene.objects if o.instance_id == target)
        assert c.simSetSegmentationObjectID(f"{semantic}_{target}", 42) is True
        (seg,) = c.simGetImages(
            [airsim.ImageRequest("0", airsim.ImageType.Segmentation, False, False)], "drone_1"
        )
        got = np.frombuffer(seg.image_data_uint8, np.uint8).reshape(120, 160, 3)[:, :, ::-1]
        want = np.where((frame.instance == target)[:, :, None], rgb[42], rgb[0])
        assert np.array_equal(got, want)
        with pytest.raises(msgpackrpc.error.RPCError, match=r"0\.\.255 \(the seg_rgbs\.txt palette\)"):
            c.simSetSegmentationObjectID(f"{semantic}_{target}", 300)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


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


@pytest.mark.parametrize("palette", ["ids", "cosys"])
def test_skyqas_airsim_backend_against_the_server_sees_what_the_builtin_one_sees(
    palette: str, request: pytest.FixtureRequest
) -> None:
    from skyqa.sim import LidarSpec, Pose, open_simulator

    # the backend reads segmentation colours as Cosys-AirSim paints them, or as object ids
    port = request.getfixturevalue("server" if palette == "ids" else "cosys_server")
    cfg = AirSimSettings(
        port=port, vehicle="drone_1", lidar_names=["LidarSensor1"], bgr=True, segmentation=palette
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


def test_skyqas_airsim_backend_scans_with_the_lidars_the_server_has(server: int) -> None:
    from skyqa.errors import InvalidInput
    from skyqa.sim import LidarSpec, Pose, open_simulator

    # SETTINGS names one LiDAR; the backend's defaults name LidarSensor1 and LidarSensor2
    remote = open_simulator(
        "airsim", "tiny_town", airsim=AirSimSettings(port=server, vehicle="drone_1", bgr=True)
    )
    local = BuiltinSimulator(load_scene("tiny_town"))
    try:
        level = Pose(-40.0, -10.0, 25.0, yaw_deg=17.0)
        spec = LidarSpec(
            channels=32, vfov_upper_deg=10, vfov_lower_deg=-60, horizontal_samples=200, range_m=80
        )
        scan, truth = remote.lidar(level, spec), local.lidar(level, spec)
        assert len(scan.points) == len(truth.points) > 100
        assert np.allclose(scan.points, truth.points, atol=1e-3)
    finally:
        remote.close()
    # none of the names there: a one-line error at connect, naming the setting
    with pytest.raises(
        InvalidInput, match=r"none of the LiDARs SKYQA_AIRSIM__LIDAR_NAMES names .*LidarSensor9"
    ):
        open_simulator(
            "airsim",
            "tiny_town",
            airsim=AirSimSettings(port=server, vehicle="drone_1", lidar_names=["LidarSensor9"]),
        )


def test_skyqas_airsim_backend_renders_at_the_asked_fov_and_refuses_another_size(server: int) -> None:
    from skyqa.errors import InvalidInput
    from skyqa.sim import Pose, open_simulator

    # SETTINGS' camera: 160x120 at 72 degrees
    cfg = AirSimSettings(port=server, vehicle="drone_1", lidar_names=["LidarSensor1"], bgr=True)
    remote = open_simulator("airsim", "tiny_town", airsim=cfg)
    local = BuiltinSimulator(load_scene("tiny_town"))
    pose = Pose(-40.0, -10.0, 25.0, yaw_deg=17.0, pitch_deg=-26.0)
    try:
        # a FOV is one API call away, so the job's is set
        cam = CameraSpec(160, 120, 60.0)
        assert np.array_equal(remote.render(pose, cam).rgb, local.render(pose, cam).rgb)
        # a size is settings.json's alone: refused, naming what to change, never resampled
        with pytest.raises(InvalidInput, match=r"captures 160x120, this job asks for 320x240: set Width 320"):
            remote.render(pose, CameraSpec(320, 240, 72.0))
    finally:
        remote.close()


# the LiDARs of small_scan (48 channels, +-45 degrees, 1024 samples, 60 m, mounts at 0 and 90
# degrees pitch) and its 160x120 camera, as an AirSim settings.json describes them
SCAN_SETTINGS = {
    "CameraDefaults": {"CaptureSettings": [{"ImageType": 0, "Width": 160, "Height": 120, "FOV_Degrees": 72}]},
    "Vehicles": {
        "drone_1": {
            "Sensors": {
                name: {
                    "SensorType": 6,
                    "NumberOfChannels": 48,
                    "Range": 60,
                    "PointsPerSecond": 48 * 1024 * 10,
                    "RotationsPerSecond": 10,
                    "VerticalFOVUpper": 45,
                    "VerticalFOVLower": -45,
                    "HorizontalFOVStart": 0,
                    "HorizontalFOVEnd": 359,
                    "Pitch": pitch,
                }
                for name, pitch in (("LidarSensor1", 0.0), ("LidarSensor2", 90.0))
            }
        }
    },
}


async def test_a_capture_scan_through_the_airsim_backend_fuses_what_the_builtin_one_does(
    settings: Any, s3_store: Any, unique: str, tmp_path: Path
) -> None:
    from skyqa.contracts import load_json
    from skyqa.contracts.fusion import InstanceTable
    from stage_helpers import small_scan

    from services.capture import app as capture_app
    from services.embedded import publish_scan, wait_for_run
    from services.fusion import app as fusion_app

    proc, port = serve(SCAN_SETTINGS, tmp_path)
    try:
        airsim_cfg = AirSimSettings(port=port, vehicle="drone_1", bgr=True, segmentation="ids")
        tables = {}
        for backend in ("builtin", "airsim"):
            cfg = settings.model_copy(update={"airsim": airsim_cfg})
            services = [capture_app.create(cfg, s3_store), fusion_app.create(cfg, s3_store)]
            for svc in services:
                await svc.start(http=True)
            try:
                req = small_scan(f"as-{backend}-{unique}")
                req.backend = backend
                await publish_scan(cfg.bus.nats_url, req)
                state = await wait_for_run(cfg.bus.nats_url, req.run_id, "fusion", 300)
                assert state.stages["fusion"].status == "completed", state.errors
                tables[backend] = load_json(InstanceTable, s3_store.get(state.outputs["instances"]))
            finally:
                for svc in services:
                    await svc.stop()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    want, got = tables["builtin"].instances, tables["airsim"].instances
    # the backend numbers instances its own way: match them by class and centre
    assert abs(len(got) - len(want)) <= max(1, len(want) // 20), (len(got), len(want))
    matched = 0
    for w in want:
        near = [g for g in got if g.class_name == w.class_name]
        if near and min(np.linalg.norm(np.array(g.center) - np.array(w.center)) for g in near) < 0.5:
            matched += 1
    assert matched >= 0.95 * len(want), (matched, len(want))


# UAV-DualCog's bridge pins the `airsim` 1.7.0 client, which needs tornado < 5 and so an older
# Python than skyqa's: it runs from its own venv, built once next to the project's
AIRSIM17 = Path(__file__).resolve().parents[2] / ".venv-airsim17"
AIRSIM17_PROBE = """
import json, sys
import numpy as np
import airsim
c = airsim.MultirotorClient(ip="127.0.0.1", port=int(sys.argv[1]), timeout_value=60)
c.confirmConnection()
c.reset()  # cameras as settings.json has them, whatever earlier clients set
c.enableApiControl(True, "drone_1")
c.simSetVehiclePose(airsim.Pose(airsim.Vector3r(-40, 10, -25), airsim.to_quaternion(-0.45, 0, -0.3)), True, "drone_1")
scene, depth, seg = c.simGetImages([airsim.ImageRequest("0", airsim.ImageType.Scene, False, False),
    airsim.ImageRequest("0", airsim.ImageType.DepthPlanar, True, False),
    airsim.ImageRequest("0", airsim.ImageType.Segmentation, False, False)], "drone_1")
d = airsim.list_to_2d_float_array(depth.image_data_float, depth.width, depth.height)
lidar = c.getLidarData("LidarSensor1", "drone_1")
png = c.simGetImage("0", airsim.ImageType.Scene, "drone_1")
z = c.simGetVehiclePose("drone_1").position.z_val
# the camera calls 1.7 sends with its trailing `external` flag
c.simSetCameraFov("0", 60.0, "drone_1")
c.simSetCameraPose("0", airsim.Pose(airsim.Vector3r(0, 0, 0), airsim.to_quaternion(-0.2, 0, 0)), "drone_1")
info = c.simGetCameraInfo("0", "drone_1")
(turned,) = c.simGetImages([airsim.ImageRequest("0", airsim.ImageType.Scene, False, False)], "drone_1")
try:
    c.simSetCameraFov("0", 60.0, "drone_1", external=True)
    external = "accepted"
except Exception as exc:
    external = str(exc)
c.reset()  # the cameras of settings.json again, for the next client
o = info.pose.orientation
print(json.dumps({"z": z, "size": [scene.width, scene.height], "bgr": scene.image_data_uint8.hex(), "depth": d.ravel().tolist(), "lidar": len(lidar.point_cloud) // 3,
    "lidar_ids": len(lidar.segmentation), "png": png[:4].hex(), "fov": info.fov,
    "camera_q": [o.w_val, o.x_val, o.y_val, o.z_val], "turned": turned.image_data_uint8.hex(),
    "external": external}))
"""


def _old_python() -> str | None:
    """A Python 3.8 or 3.9 that runs: on PATH, or one pyenv installed (its shims need a version
    selected, so they may be on PATH and still not run)."""
    found = [shutil.which(n) for n in ("python3.9", "python3.8")]
    found += sorted(str(p) for p in (Path.home() / ".pyenv" / "versions").glob("3.[89].*/bin/python3"))
    for candidate in filter(None, found):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True, timeout=30).returncode == 0:
            return candidate
    return None


def _airsim17_python() -> Path:
    python = AIRSIM17 / "bin" / "python"
    if python.exists():
        return python
    base = _old_python()
    if base is None:
        pytest.skip("the airsim 1.7.0 client needs Python 3.8 or 3.9 (tornado < 5), and neither is here")
    subprocess.run([base, "-m", "venv", str(AIRSIM17)], check=True, timeout=300)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "numpy==1.24.4", "msgpack-rpc-python==0.4.1"], check=True, timeout=600)
    # its setup.py imports numpy and msgpackrpc, so it builds against the venv's own
    subprocess.run([*pip, "--no-build-isolation", "airsim==1.7.0"], check=True, timeout=600)
    return python


def test_the_airsim_1_7_client_captures_from_the_server(server: int, tmp_path: Path) -> None:
    python = _airsim17_python()
    probe = tmp_path / "probe.py"
    probe.write_text(AIRSIM17_PROBE)
    run = subprocess.run([str(python), str(probe), str(server)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["z"] == pytest.approx(-25.0) and got["size"] == [160, 120] and got["png"] == "89504e47"
    q = quaternion_from_euler(-0.45, 0.0, -0.3)  # AirSim's to_quaternion(pitch, roll, yaw)
    here = enu_pose(np.array([-40.0, 10.0, -25.0]), quat_matrix(q))
    frame = BuiltinSimulator(load_scene("tiny_town")).render(here, CameraSpec(160, 120, 72.0))
    assert bytes.fromhex(got["bgr"]) == frame.rgb[:, :, ::-1].tobytes()
    hit = np.isfinite(frame.depth)
    assert np.allclose(np.asarray(got["depth"]).reshape(120, 160)[hit], frame.depth[hit], rtol=1e-6)
    assert got["lidar"] == got["lidar_ids"] > 100
    # simSetCameraFov, simSetCameraPose and simGetCameraInfo with 1.7's `external` argument: the
    # camera pitched 0.2 rad down on the vehicle, at 60 degrees, is what the next image shows
    camera = quat_matrix(quaternion_from_euler(-0.2, 0.0, 0.0))
    assert got["fov"] == pytest.approx(60.0)
    assert np.allclose(quat_matrix(tuple(got["camera_q"])), quat_matrix(q) @ camera, atol=1e-6)
    turned = BuiltinSimulator(load_scene("tiny_town")).render(
        enu_pose(np.array([-40.0, 10.0, -25.0]), quat_matrix(q) @ camera), CameraSpec(160, 120, 60.0)
    )
    assert bytes.fromhex(got["turned"]) == turned.rgb[:, :, ::-1].tobytes()
    assert "external cameras are not served" in got["external"]


def _client_calls(source: Path) -> set[tuple[str, int]]:
    """(method, argument count) of every RPC call an AirSim client's source makes."""
    calls = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "call"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            calls.add((node.args[0].value, len(node.args) - 1 + len(node.keywords)))
    return calls


@pytest.mark.parametrize("client_name", ["cosysairsim 3.5.0", "airsim 1.7.0"])
def test_every_arity_the_pinned_clients_send_is_taken_by_every_method_served(client_name: str) -> None:
    from skyqa.sim.airsim_api import AirSimApi
    from skyqa.sim.airsim_settings import AirSimConfig
    from skyqa.sim.rpc_server import _fits

    if client_name.startswith("cosys"):
        source = Path(airsim.__file__).with_name("client.py")
    else:
        python = _airsim17_python()
        where = subprocess.run(
            [str(python), "-c", "import airsim.client as c; print(c.__file__)"],
            capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        source = Path(where.stdout.strip())
    methods = AirSimApi(None, load_scene("tiny_town"), AirSimConfig()).methods()
    calls = {(name, n) for name, n in _client_calls(source) if name in methods}
    assert {"simSetCameraFov", "simSetCameraPose", "simGetCameraInfo", "simGetImages"} <= {
        c for c, _ in calls
    }
    refused = sorted((name, n) for name, n in calls if not _fits(methods[name], n))
    assert not refused, f"{client_name} sends these argument counts, which the server refuses: {refused}"
