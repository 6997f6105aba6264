import numpy as np
import pytest
from skyqa.sim import Intrinsics, Pose, look_at, project, rotation_matrix, unproject


def forward(yaw: float, pitch: float, roll: float = 0.0) -> np.ndarray:
    return rotation_matrix(yaw, pitch, roll)[:, 0]


def test_pose_convention_axes() -> None:
    np.testing.assert_allclose(forward(0, 0), [1, 0, 0], atol=1e-12)  # east
    np.testing.assert_allclose(forward(90, 0), [0, 1, 0], atol=1e-12)  # north
    np.testing.assert_allclose(forward(0, -90), [0, 0, -1], atol=1e-12)  # straight down
    np.testing.assert_allclose(forward(0, 30), [np.cos(np.radians(30)), 0, 0.5], atol=1e-12)  # nose up
    # roll right-side-down: the left axis rises
    left = rotation_matrix(0, 0, 20)[:, 1]
    assert left[2] > 0


def test_rotation_is_orthonormal() -> None:
    r = rotation_matrix(37, -22, 11)
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)
    assert np.isclose(np.linalg.det(r), 1.0)


def test_intrinsics_from_fov() -> None:
    k = Intrinsics.from_fov(640, 480, 90.0)
    assert k.fx == pytest.approx(320.0)
    assert (k.cx, k.cy) == (320.0, 240.0)
    with pytest.raises(ValueError, match="positive"):
        Intrinsics.from_fov(-1, 480, 90)
    with pytest.raises(ValueError, match="FOV"):
        Intrinsics.from_fov(640, 480, 0.1)


def test_project_unproject_roundtrip() -> None:
    k = Intrinsics.from_fov(64, 48, 72.0)
    pose = Pose(3.0, -2.0, 40.0, 30.0, -50.0, 5.0)
    depth = np.full((48, 64), 25.0, dtype=np.float32)
    pts = unproject(depth, pose, k)
    px, d = project(pts, pose, k)
    np.testing.assert_allclose(d, 25.0, atol=1e-4)
    v, u = np.divmod(np.arange(64 * 48), 64)
    np.testing.assert_allclose(px[:, 0], u + 0.5, atol=1e-4)
    np.testing.assert_allclose(px[:, 1], v + 0.5, atol=1e-4)


def test_project_puts_point_ahead_at_centre_and_up_is_up() -> None:
    k = Intrinsics.from_fov(100, 100, 90.0)
    pose = Pose(0, 0, 10, 90, 0, 0)  # looking north
    px, depth = project(np.array([[0.0, 20.0, 10.0], [0.0, 20.0, 15.0], [5.0, 20.0, 10.0]]), pose, k)
    np.testing.assert_allclose(px[0], [50, 50])
    assert depth[0] == pytest.approx(20.0)
    assert px[1, 1] < 50  # higher point is nearer the top row
    assert px[2, 0] > 50  # east is to the right when looking north


def test_look_at() -> None:
    yaw, pitch = look_at(np.array([0.0, 0.0, 10.0]), np.array([10.0, 10.0, 0.0]))
    assert yaw == pytest.approx(45.0)
    assert pitch == pytest.approx(-np.degrees(np.arctan2(10, np.hypot(10, 10))))
