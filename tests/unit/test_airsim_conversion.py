import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from skyqa.sim import Pose, rotation_matrix
from skyqa.sim.airsim import (
    LabelMap,
    decode_depth,
    decode_lidar,
    decode_rgb,
    decode_segmentation,
    enu_to_ned,
    pose_to_ned,
    quaternion_from_euler,
)


def quat_to_matrix(w: float, x: float, y: float, z: float) -> np.ndarray:
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def test_enu_to_ned() -> None:
    assert enu_to_ned(1.0, 2.0, 3.0) == (1.0, -2.0, -3.0)


@pytest.mark.parametrize(
    "pose", [Pose(0, 0, 0, 0, 0, 0), Pose(5, -3, 40, 30, -20, 0), Pose(0, 0, 0, -120, 45, 10)]
)
def test_ned_orientation_matches_enu_forward(pose: Pose) -> None:
    """The vehicle's forward axis must point the same way in both frames."""
    _, q = pose_to_ned(pose)
    fwd_ned = quat_to_matrix(*q)[:, 0]
    fwd_enu = rotation_matrix(pose.yaw_deg, pose.pitch_deg, pose.roll_deg)[:, 0]
    # NED (north-ish x, y right, z down) vs our ENU with (x, y, z)_ned = (x, -y, -z)_enu;
    # AirSim pitch is positive nose-up, which points -z in NED
    np.testing.assert_allclose(fwd_ned, [fwd_enu[0], -fwd_enu[1], -fwd_enu[2]], atol=1e-9)


def test_quaternion_is_unit() -> None:
    q = quaternion_from_euler(0.3, -0.2, 1.1)
    assert math.isclose(sum(v * v for v in q), 1.0)


def test_decode_rgb_bgr_flavour() -> None:
    bgr = bytes([1, 2, 3] * 4)
    img = decode_rgb(bgr, 2, 2, bgr=True)
    assert img[0, 0].tolist() == [3, 2, 1]
    with pytest.raises(ValueError, match="does not match"):
        decode_rgb(b"\x00" * 5, 2, 2, bgr=False)


def test_decode_depth_marks_no_hit() -> None:
    d = decode_depth([1.0, 2.0, 65504.0, 4.0], 2, 2)
    assert d[0, 1] == 2.0
    assert np.isinf(d[1, 0])


def test_segmentation_and_lidar_labels() -> None:
    labels = LabelMap([(r"Building_.*", "office_tower"), (r"Ground.*", "ground")])
    rgb = np.array([[[10, 20, 30], [40, 50, 60]], [[10, 20, 30], [0, 0, 0]]], dtype=np.uint8)
    sem, inst = decode_segmentation(rgb, {(10, 20, 30): "Building_12", (40, 50, 60): "Ground_3"}, labels)
    assert sem.tolist() == [[11, 1], [11, 0]]
    assert inst.tolist() == [[1, 0], [1, 0]]
    pts, s, i = decode_lidar([1, 2, 3, 4, 5, 6], ["building_12", "Tree_1"], labels)
    assert pts.tolist() == [[1, -2, -3], [4, -5, -6]]
    assert s.tolist() == [11, 0]
    assert i.tolist() == [1, 0]
    with pytest.raises(ValueError, match="labels"):
        decode_lidar([1, 2, 3], ["a", "b"], labels)


def test_airsim_backend_without_client_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from skyqa.errors import SimulatorUnavailable
    from skyqa.sim import open_simulator

    monkeypatch.setitem(sys.modules, "cosysairsim", None)  # as if the extra were not installed
    with pytest.raises(SimulatorUnavailable, match=r"skyqa\[airsim\]"):
        open_simulator("airsim", "env_7")


def test_the_servers_ned_pose_reads_back_what_the_backend_sends() -> None:
    from skyqa.sim.airsim_wire import enu_pose, matrix_quat, ned_rotation, quat_matrix

    rng = np.random.default_rng(3)
    for _ in range(50):
        x, y, z = rng.uniform(-100, 100, 3).tolist()
        p = Pose(x, y, z, rng.uniform(-179, 179), rng.uniform(-85, 85), rng.uniform(-40, 40))
        position, q = pose_to_ned(p)
        back = enu_pose(np.array(position), quat_matrix(q))
        assert np.allclose(
            [back.x, back.y, back.z, back.yaw_deg, back.pitch_deg, back.roll_deg],
            [p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg],
            atol=1e-6,
        )
        assert np.allclose(quat_matrix(matrix_quat(ned_rotation(p))), ned_rotation(p), atol=1e-9)


def test_settings_give_camera_size_and_lidars_and_name_a_bad_key(tmp_path: Path) -> None:
    from skyqa.errors import InvalidInput
    from skyqa.sim.airsim_settings import load_settings

    doc = {
        "CameraDefaults": {
            "CaptureSettings": [{"ImageType": 0, "Width": 640, "Height": 480, "FOV_Degrees": 72}]
        },
        "Vehicles": {"drone_1": {"Sensors": {"L": {"SensorType": 6, "NumberOfChannels": 64, "Range": 60}}}},
    }
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(doc))
    cfg = load_settings(path)
    assert cfg.vehicles == ["drone_1"]
    cam = cfg.camera("0")
    assert (cam.width, cam.height, cam.fov_deg) == (640, 480, 72.0)
    assert cfg.lidar("L").channels == 64 and cfg.lidar("").range_m == 60.0
    with pytest.raises(InvalidInput, match="no LiDAR 'X'"):
        cfg.lidar("X")
    doc["Vehicles"]["drone_1"]["Sensors"]["L"]["VerticalFOVLower"] = 30  # type: ignore[index]
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInput, match="VerticalFOVLower must be below"):
        load_settings(path)
    path.write_text("[1, 2]")
    with pytest.raises(InvalidInput, match="JSON object"):
        load_settings(path)
