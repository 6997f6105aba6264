import numpy as np
import pytest
from skyqa.errors import InvalidInput
from skyqa.geometry import (
    CLOUD_DTYPE,
    connected_instances,
    coverage_ratio,
    instance_stats,
    pca_yaw_deg,
    read_pcd,
    voxel_fuse,
    write_pcd,
)


def test_voxel_fuse_centroid_and_majority_label() -> None:
    pts = np.array([[0.1, 0.1, 0.1], [0.3, 0.3, 0.3], [0.2, 0.2, 0.2], [1.5, 0.1, 0.1]])
    sem = np.array([5, 5, 6, 7])
    inst = np.array([2, 2, 3, 0])
    fused = voxel_fuse(pts, sem, inst, 1.0)
    assert len(fused.points) == 2
    np.testing.assert_allclose(fused.points[0], [0.2, 0.2, 0.2], atol=1e-6)
    assert (fused.semantic[0], fused.instance[0], fused.observed[0]) == (5, 2, 3)
    assert (fused.semantic[1], fused.instance[1], fused.observed[1]) == (7, 0, 1)


def test_voxel_fuse_tie_breaks_deterministically() -> None:
    pts = np.array([[0.1, 0, 0], [0.2, 0, 0]])
    a = voxel_fuse(pts, np.array([9, 4]), np.array([1, 8]), 1.0)
    b = voxel_fuse(pts[::-1], np.array([4, 9]), np.array([8, 1]), 1.0)
    assert (a.semantic[0], a.instance[0]) == (b.semantic[0], b.instance[0]) == (4, 8)


def test_voxel_fuse_matches_bruteforce() -> None:
    rng = np.random.default_rng(0)
    pts = rng.uniform(-5, 5, size=(3000, 3))
    sem = rng.integers(1, 4, 3000)
    inst = rng.integers(0, 3, 3000)
    fused = voxel_fuse(pts, sem, inst, 2.0)
    cells: dict[tuple[int, ...], list[int]] = {}
    for i, k in enumerate(map(tuple, np.floor(pts / 2.0).astype(int))):
        cells.setdefault(k, []).append(i)
    assert len(fused.points) == len(cells) and fused.observed.sum() == 3000
    # voxels in order of their first point
    firsts = sorted(cells.values(), key=lambda m: m[0])
    for v, members in enumerate(firsts):
        np.testing.assert_allclose(fused.points[v], pts[members].mean(0), rtol=1e-6)
        votes: dict[tuple[int, int], int] = {}
        for i in members:
            votes[(sem[i], inst[i])] = votes.get((sem[i], inst[i]), 0) + 1
        top = max(votes.values())
        assert (fused.semantic[v], fused.instance[v]) == min(k for k, c in votes.items() if c == top)
        assert fused.observed[v] == len(members)


def test_voxel_fuse_edge_cases() -> None:
    empty = voxel_fuse(np.zeros((0, 3)), np.zeros(0, int), np.zeros(0, int), 0.5)
    assert empty.points.shape == (0, 3) and len(empty.semantic) == 0
    with pytest.raises(ValueError, match="extent"):
        voxel_fuse(np.array([[0.0, 0, 0], [1e9, 0, 0]]), np.zeros(2, int), np.zeros(2, int), 0.5)


def test_voxel_fuse_rejects_bad_voxel() -> None:
    with pytest.raises(ValueError, match="positive"):
        voxel_fuse(np.zeros((1, 3)), np.zeros(1, int), np.zeros(1, int), 0.0)


def test_coverage_ratio() -> None:
    grid = np.array([[x + 0.5, y + 0.5, 0] for x in range(10) for y in range(10) if x < 5])
    grid = np.vstack([grid, [[9.5, 9.5, 0]]])
    assert coverage_ratio(grid, 1.0) == pytest.approx(51 / 100)


def test_connected_instances_split_and_min_points() -> None:
    a = np.column_stack([np.linspace(0, 5, 60), np.zeros(60), np.zeros(60)])
    b = a + np.array([20.0, 0.0, 0.0])
    tiny = np.array([[50.0, 0, 0], [50.2, 0, 0]])
    ground = np.array([[0.0, 5, 0]] * 10)
    pts = np.vstack([a, b, tiny, ground])
    sem = np.array([3] * 120 + [3, 3] + [1] * 10)
    inst = connected_instances(pts, sem, 1.0, min_points=10, stuff={1})
    assert len(set(inst[:60])) == 1
    assert len(set(inst[60:120])) == 1
    assert inst[0] != inst[60]
    assert inst[0] > 0
    assert not inst[120:].any()


def test_pca_yaw_and_instance_stats() -> None:
    t = np.linspace(-10, 10, 200)
    xy = np.column_stack([t * np.cos(np.radians(30)), t * np.sin(np.radians(30))])
    assert pca_yaw_deg(xy) == pytest.approx(30.0, abs=0.01)
    assert pca_yaw_deg(-xy) == pytest.approx(30.0, abs=0.01)  # 180 degree ambiguity folded
    pts = np.column_stack([xy, np.zeros(200)])
    stats = instance_stats(pts, np.array([4] * 200))
    assert stats[4]["point_count"] == 200
    assert stats[4]["center"] == pytest.approx([0, 0, 0], abs=1e-6)


def test_pcd_roundtrip_binary_and_ascii() -> None:
    cloud = np.zeros(3, dtype=CLOUD_DTYPE)
    cloud["x"], cloud["class_id"], cloud["instance_id"] = [1.5, 2.5, 3.5], [1, 2, 3], [0, 7, 9]
    data = write_pcd(cloud)
    assert b"FIELDS x y z class_id instance_id" in data
    back = read_pcd(data)
    assert back.tobytes() == cloud.tobytes()
    ascii_pcd = (
        b"VERSION 0.7\nFIELDS x y z class_id instance_id\nSIZE 4 4 4 4 4\nTYPE F F F U U\nCOUNT 1 1 1 1 1\n"
        b"WIDTH 2\nHEIGHT 1\nPOINTS 2\nDATA ascii\n1 2 3 4 5\n6 7 8 9 10\n"
    )
    parsed = read_pcd(ascii_pcd)
    assert parsed["instance_id"].tolist() == [5, 10]
    with pytest.raises(InvalidInput):
        read_pcd(b"VERSION 0.7\nFIELDS x\n")
