from collections import Counter
from pathlib import Path

import numpy as np
import open3d as o3d
import pytest
import yaml
from skyqa.errors import InvalidInput, UnknownScene
from skyqa.sim import (
    CATEGORIES,
    BuiltinSimulator,
    CameraSpec,
    LidarSpec,
    Pose,
    load_mesh_scene,
    load_scene,
    project,
)
from skyqa.sim.city import generate_city


@pytest.fixture(scope="module")
def town() -> BuiltinSimulator:
    return BuiltinSimulator(load_scene("tiny_town"))


def test_city_covers_types_and_categories() -> None:
    scene = load_scene("demo_city")
    things = scene.things()
    assert len({o.semantic.name for o in things}) >= 8
    assert {o.semantic.category for o in things} == set(CATEGORIES)
    heights = {round(float(o.size[2])) for o in things if o.semantic.category == "building"}
    assert len(heights) >= 4  # buildings of several heights
    colours = {o.colour_name for o in things if o.semantic.category == "building"}
    assert len(colours) >= 3
    ids = [o.instance_id for o in things]
    assert len(ids) == len(set(ids))
    assert min(ids) == 1


def test_city_is_seeded() -> None:
    a, b, c = generate_city("x", 11, 3), generate_city("x", 11, 3), generate_city("x", 12, 3)
    assert [o.vertices.tobytes() for o in a.objects] == [o.vertices.tobytes() for o in b.objects]
    assert [o.vertices.tobytes() for o in a.objects] != [o.vertices.tobytes() for o in c.objects]


@pytest.mark.parametrize("scene_id", ["demo_city", "procedural_1_4", "procedural_2_4", "procedural_3_4"])
def test_objects_do_not_overlap(scene_id: str) -> None:
    scene = load_scene(scene_id)
    boxes = [(o.aabb_min, o.aabb_max, o) for o in scene.things() if o.semantic.name != "bridge"]
    for i, (lo1, hi1, o1) in enumerate(boxes):
        for lo2, hi2, o2 in boxes[i + 1 :]:
            overlap = np.clip(np.minimum(hi1, hi2) - np.maximum(lo1, lo2), 0, None)
            smaller = min(np.prod(hi1 - lo1), np.prod(hi2 - lo2))
            # boxes of round objects may touch at their corners; a real intersection
            # shares a sizeable part of the smaller box
            assert np.prod(overlap) < 0.05 * smaller, (o1.semantic.name, o2.semantic.name)


def test_unknown_scene_is_a_clear_error() -> None:
    with pytest.raises(UnknownScene, match="known: demo_city"):
        load_scene("atlantis")


def test_render_is_deterministic_and_labelled(town: BuiltinSimulator) -> None:
    cam = CameraSpec(160, 120, 72.0)
    pose = Pose(-40, -40, 35, 45, -35)
    a, b = town.render(pose, cam), town.render(pose, cam)
    assert np.array_equal(a.rgb, b.rgb)
    assert np.array_equal(a.instance, b.instance)
    assert a.rgb.shape == (120, 160, 3)
    assert a.rgb.std() > 10
    assert set(np.unique(a.semantic)) >= {1, 2}  # ground and road in view
    # stuff has no instance id; things keep their class consistently
    assert not np.any(a.instance[np.isin(a.semantic, [1, 2])])
    by_id = {o.instance_id: o.semantic.id for o in town.scene.things()}
    for iid in np.unique(a.instance[a.instance > 0]):
        assert set(np.unique(a.semantic[a.instance == iid])) == {by_id[int(iid)]}


def test_nadir_depth_is_planar_distance(town: BuiltinSimulator) -> None:
    scene = town.scene
    # find a spot of open ground: the camera looks straight down from 50 m
    frame = town.render(Pose(0.0, 0.0, 50.0, 0.0, -90.0), CameraSpec(64, 48, 60.0))
    ground = frame.semantic <= 2
    assert ground.any()
    top_of_ground = 0.06 if (frame.semantic == 2).any() else 0.0
    assert np.all(frame.depth[ground] <= 50.0 + 1e-3)
    assert np.all(frame.depth[ground] >= 50.0 - top_of_ground - 0.01)
    assert scene.extent[0] < 0 < scene.extent[1]


def test_projected_object_centre_is_labelled_with_that_object(town: BuiltinSimulator) -> None:
    cam = CameraSpec(200, 150, 60.0)
    tanks = [o for o in town.scene.things() if o.size[2] > 6]
    obj = tanks[0]
    c = obj.center
    eye = c + np.array([-30.0, -30.0, 25.0])
    from skyqa.sim import look_at

    x, y, z = eye
    pose = Pose(x, y, z, *look_at(eye, c))
    frame = town.render(pose, cam)
    px, _ = project(c[None, :], pose, cam.intrinsics)
    u, v = int(px[0, 0]), int(px[0, 1])
    assert frame.instance[v, u] == obj.instance_id


def test_lidar_points_lie_on_their_labelled_objects(town: BuiltinSimulator) -> None:
    spec = LidarSpec(channels=16, horizontal_samples=256, range_m=80.0, mount_pitch_deg=(0.0, 90.0))
    scan = town.lidar(Pose(0, 0, 30, 0, 0, 0), spec)
    assert len(scan.points) > 1000
    dist = np.linalg.norm(scan.points - np.array([0, 0, 30]), axis=1)
    assert dist.max() <= 80.0 + 1e-3
    objects = {o.instance_id: o for o in town.scene.things()}
    counts = Counter(int(i) for i in scan.instance if i > 0)
    assert counts
    for iid in counts:
        pts = scan.points[scan.instance == iid]
        o = objects[iid]
        assert np.all(pts >= o.aabb_min - 0.05)
        assert np.all(pts <= o.aabb_max + 0.05)


def test_lidar_spec_validation() -> None:
    with pytest.raises(ValueError, match="channels"):
        LidarSpec(channels=0).validate()
    with pytest.raises(ValueError, match="vertical FOV"):
        LidarSpec(vfov_lower_deg=10, vfov_upper_deg=5).validate()


def test_mesh_scene_from_ply_and_label_map(tmp_path: Path) -> None:
    import open3d as o3d

    box = o3d.geometry.TriangleMesh.create_box(4, 4, 10)
    box.translate((-2, -2, 0))
    o3d.io.write_triangle_mesh(str(tmp_path / "tower.ply"), box)
    ground = o3d.geometry.TriangleMesh.create_box(100, 100, 0.1)
    ground.translate((-50, -50, -0.1))
    o3d.io.write_triangle_mesh(str(tmp_path / "ground.obj"), ground)
    (tmp_path / "scene.yaml").write_text(
        yaml.safe_dump(
            {
                "objects": [
                    {
                        "mesh": "tower.ply",
                        "class": "office_tower",
                        "colour": "blue",
                        "instance_id": 5,
                    },
                    {"mesh": "ground.obj", "class": "ground"},
                ]
            }
        )
    )
    scene = load_mesh_scene(tmp_path / "scene.yaml", "block")
    sim = BuiltinSimulator(scene)
    frame = sim.render(Pose(0, 0, 40, 0, -90), CameraSpec(32, 32, 40.0))
    assert frame.instance[16, 16] == 5
    assert frame.depth[16, 16] == pytest.approx(30.0, abs=1e-3)
    assert frame.semantic[0, 0] == 1
    assert frame.instance[0, 0] == 0


def test_mesh_scene_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "scene.yaml").write_text("objects: [{mesh: missing.ply, class: tree}]")
    with pytest.raises(InvalidInput, match="missing"):
        load_mesh_scene(tmp_path / "scene.yaml")
    (tmp_path / "scene.yaml").write_text("objects: [{mesh: a.ply, class: spaceship}]")
    with pytest.raises(InvalidInput, match="not built in"):
        load_mesh_scene(tmp_path / "scene.yaml")


def _map_light(sim: BuiltinSimulator, p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The shadow-map lookup in numpy on the plain row-major map: the 2x2 texels around the
    point lifted off its surface, weighted bilinearly, that have no surface above it."""
    from skyqa.sim.shadow import BLOCK

    sm = sim.shadow_map
    blocks_r, blocks_c = sm.depth.shape[:2]
    flat = sm.depth.transpose(0, 2, 1, 3).reshape(blocks_r * BLOCK, blocks_c * BLOCK)
    u0, v0, inv_texel, offset, bias = sm.params.astype(np.float64)
    basis = sm.basis.astype(np.float64)
    q = p + n * offset
    fu, fv = (q @ basis[0] - u0) * inv_texel - 0.5, (q @ basis[1] - v0) * inv_texel - 0.5
    wq = q @ basis[2] + bias
    iu, iv = np.floor(fu).astype(int), np.floor(fv).astype(int)
    au, av = fu - iu, fv - iv
    light = np.zeros(len(p))
    for dv in (0, 1):
        for du in (0, 1):
            r, c = iv + dv, iu + du
            inside = (r >= 0) & (c >= 0) & (r < flat.shape[0]) & (c < flat.shape[1])
            top = np.full(len(p), -np.inf)
            top[inside] = flat[r[inside], c[inside]]
            light += (top <= wq) * (au if du else 1 - au) * (av if dv else 1 - av)
    return light


def _surface(sim: BuiltinSimulator, pose: Pose, cam: CameraSpec) -> dict[str, np.ndarray]:
    """Cast the camera's rays in numpy: hit mask, points, camera-facing normals and more."""
    from skyqa.sim.camera import camera_rays

    rays = camera_rays(pose, cam.intrinsics)
    ans = sim._raycaster.cast_rays(o3d.core.Tensor(rays))
    t = ans["t_hit"].numpy()
    hit = np.isfinite(t)
    d = rays[:, 3:].astype(np.float64)
    n = ans["primitive_normals"].numpy()[hit].astype(np.float64)
    n[np.einsum("ij,ij->i", n, d[hit]) > 0] *= -1
    p = rays[hit, :3] + d[hit] * t[hit, None]
    g = ans["geometry_ids"].numpy()[hit].astype(np.int64)
    tri = sim._offsets[g] + ans["primitive_ids"].numpy()[hit]
    return {"t": t, "hit": hit, "d": d, "n": n, "p": p, "tri": tri}


def _reference_shading(sim: BuiltinSimulator, pose: Pose, cam: CameraSpec) -> np.ndarray:
    """The shading model written as plain numpy, one step per line: the oracle for the kernel."""
    from skyqa.sim import _kernels as K
    from skyqa.sim.daylight import AMBIENT, SUN, SUNLIGHT
    from skyqa.sim.mesh import WINDOW

    s = _surface(sim, pose, cam)
    t, hit, d, n, p, tri = s["t"], s["hit"], s["d"], s["n"], s["p"], s["tri"]
    dnorm = np.linalg.norm(d, axis=1)
    out = np.empty((len(t), 3))
    elev = np.clip(d[:, 2] / dnorm, 0, 1)[:, None]
    out[:] = K.SKY_HORIZON + (K.SKY_ZENITH - K.SKY_HORIZON) * elev
    albedo = sim._colors[tri].astype(np.float64)
    mat = sim._materials[tri]
    facade = (mat == 1) & (np.abs(n[:, 2]) < 0.3)
    along = np.where(np.abs(n[:, 0]) > np.abs(n[:, 1]), p[:, 1], p[:, 0])
    fz, fa = np.mod(p[:, 2], 3.2) / 3.2, np.mod(along, 2.6) / 2.6
    albedo[facade & (fz > 0.35) & (fz < 0.8) & (fa > 0.2) & (fa < 0.75) & (p[:, 2] > 1)] = WINDOW
    for m, cell, amp in K.NOISE:
        c = np.floor(p / cell + 0.5).astype(np.int64)
        h = (c[:, 0] * 73856093) ^ (c[:, 1] * 19349663) ^ (c[:, 2] * 83492791)
        noise = (((h ^ (h >> 13)) * 1274126177) & 0xFFFF) / 65536.0
        albedo[mat == m] *= (1 - amp + 2 * amp * noise[mat == m])[:, None]
    lam = np.clip(n @ SUN, 0, 1)
    lit = lam > 0
    lam[lit] *= _map_light(sim, p[lit], n[lit])
    fog = (1 - np.exp(-t[hit] * dnorm[hit] / K.HAZE_M))[:, None]
    out[hit] = albedo * (AMBIENT + SUNLIGHT * lam[:, None]) * (1 - fog) + K.SKY_HORIZON * fog
    return np.clip(out * 255 + 0.5, 0, 255).astype(np.uint8).reshape(cam.height, cam.width, 3)


VIEWS = [Pose(-40, -40, 35, 45, -35), Pose(0, 0, 60, 10, -90), Pose(30, -20, 6, 120, 5)]


@pytest.mark.parametrize("pose", VIEWS)
def test_compiled_shading_matches_the_numpy_model(town: BuiltinSimulator, pose: Pose) -> None:
    cam = CameraSpec(200, 150, 72.0)
    got = town.render(pose, cam).rgb.astype(int)
    want = _reference_shading(town, pose, cam).astype(int)
    diff = np.abs(got - want).max(axis=-1)
    # float32 vs float64 rounding flips a level here and there; a window edge or a shadow
    # texel may move by a pixel where a sample sits exactly on it
    assert np.mean(diff > 1) < 0.002, np.mean(diff > 1)
    assert np.mean(diff) < 0.05


@pytest.mark.parametrize("pose", VIEWS)
def test_the_shadow_map_agrees_with_exact_shadow_rays(town: BuiltinSimulator, pose: Pose) -> None:
    """The map against one Embree shadow ray per sunlit pixel (the renderer before the map)."""
    from skyqa.sim.daylight import SUN

    s = _surface(town, pose, CameraSpec(400, 300, 72.0))
    n, p = s["n"], s["p"]
    lit = n @ SUN > 0
    rays = np.hstack([p[lit] + n[lit] * 0.05, np.broadcast_to(SUN, (int(lit.sum()), 3))])
    exact = ~town._raycaster.test_occlusions(o3d.core.Tensor(rays.astype(np.float32))).numpy()
    assert 0.02 < np.mean(~exact) < 0.95  # the view has sun and shadow
    by_map = _map_light(town, p[lit], n[lit]) > 0.5
    # measured 0.3-0.8 %: light leaking at the foot of walls, within the lookup's normal offset
    assert np.mean(by_map != exact) < 0.015


def test_shadows_only_darken_and_frames_do_not_depend_on_threads() -> None:
    scene = load_scene("tiny_town")
    pose, cam = Pose(-40, -40, 35, 45, -35), CameraSpec(240, 180, 72.0)
    lit = BuiltinSimulator(scene, shadows=False).render(pose, cam).rgb.astype(int)
    shadowed = BuiltinSimulator(scene).render(pose, cam).rgb.astype(int)
    assert np.all(shadowed <= lit)
    assert 0.02 < np.mean(shadowed.sum(-1) < lit.sum(-1)) < 0.6  # buildings cast some shadow
    one = BuiltinSimulator(scene, threads=1).render(pose, cam)
    assert np.array_equal(one.rgb.astype(int), shadowed)
