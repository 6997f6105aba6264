import json
import math
from pathlib import Path

import pytest
from skyqa import scan
from skyqa.errors import InvalidScanRequest
from skyqa.v1 import scan_pb2


def valid(**changes: object) -> scan_pb2.ScanRequest:
    req = scan.default_request("demo_city")
    req.run_id = "r1"
    for path, value in changes.items():
        target = req
        *parents, leaf = path.split("__")
        for p in parents:
            target = getattr(target, p)
        setattr(target, leaf, value)
    return req


def test_defaults_are_valid_and_keep_explicit_values() -> None:
    req = valid()
    scan.validate(req)
    assert req.camera.pitch_deg == -60.0
    explicit = scan_pb2.ScanRequest(scene_id="demo_city", run_id="r")
    explicit.camera.pitch_deg = 0.0  # level camera is a real choice, not "unset"
    assert scan.apply_defaults(explicit).camera.pitch_deg == 0.0
    assert scan.default_request("demo_city", "release").camera.width == 4096


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"bound__xmin": 10.0, "bound__xmax": -10.0}, "xmin < xmax"),
        ({"bound__ymax": math.nan}, "non-finite"),
        ({"camera__width": 0}, "resolution"),
        ({"spacing_x_m": -5.0}, "spacing"),
        ({"spacing_y_m": 1e-310}, "at least 0.01"),  # a denormal spacing overflowed the pose count
        ({"spacing_x_m": 0.01, "spacing_y_m": 0.01}, "poses"),
        ({"camera__jpeg_quality": 101}, "jpeg"),
        ({"backend": "unreal"}, "backend"),
        ({"scene_id": "../etc"}, "scene id"),
        ({"run_id": ""}, "run id"),
        ({"lidar__channels": 999}, "channels"),
        ({"fusion__voxel_size_m": 50.0}, "voxel"),
        ({"navigation__goals": 201}, "navigation goals and routes"),
        ({"navigation__per_type": 0}, "questions per type must be 1..8"),
        ({"navigation__per_type": 9}, "questions per type must be 1..8"),
        ({"groups__per_size": 201}, "UAV groups per size must be 0..200"),
        ({"reasoning__per_split": 201}, "reasoning trajectories per split"),
        ({"reasoning__width": 1281}, "reasoning video size must be even"),
        ({"reasoning__crf": 60}, "crf 0..51"),
        ({"reasoning__altitude_m": -3.0}, "reasoning altitude"),
        ({"reasoning__yaw_deg": 7.0}, "yaw step must divide 90"),
        ({"reasoning__capsule_radius_m": 2.0}, "half-height must be at least its radius"),
        ({"reasoning__frames_per_action": 1}, "frames_per_action"),
        ({"reasoning__yaw_deg": 1e-300}, "yaw_deg"),
        ({"reasoning__actions": 400, "reasoning__frames_per_action": 60}, "at most 6000 frames"),
        ({"reasoning__per_split": 200, "reasoning__width": 4096, "reasoning__height": 3072}, "terapixels"),
        ({"stills__width": 9000}, "stills must be within"),
        ({"stills__working_width": 1280}, "working size 1280x480 must be at most 640x480"),
        ({"stills__working_width": 320, "stills__working_height": 200}, "of its aspect ratio"),
    ],
)
def test_validation_names_the_problem(changes: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidScanRequest, match=message):
        scan.validate(valid(**changes))


@pytest.mark.parametrize(
    ("types", "message"),
    [(["sequence_recall", "teleport"], "got teleport"), (["causal", "causal"], "repeated")],
)
def test_navigation_types_are_known_and_distinct(types: list[str], message: str) -> None:
    req = valid()
    req.navigation.types[:] = types
    with pytest.raises(InvalidScanRequest, match=message):
        scan.validate(req)


def test_uav_group_sizes_are_2_to_8() -> None:
    req = valid()
    req.groups.sizes[:] = [3, 1]
    with pytest.raises(InvalidScanRequest, match=r"UAV group sizes must be 2\.\.8"):
        scan.validate(req)


def test_altitude_outside_bound() -> None:
    req = valid()
    req.altitudes_m[:] = [500.0]
    with pytest.raises(InvalidScanRequest, match="outside MapBound"):
        scan.validate(req)


def test_pose_grid_order_and_count() -> None:
    req = valid()
    req.bound.xmin, req.bound.xmax, req.bound.ymin, req.bound.ymax = 0, 20, 0, 10
    req.spacing_x_m, req.spacing_y_m = 10, 10
    req.altitudes_m[:] = [30, 60]
    req.yaw_deg[:] = [0, 90]
    poses = scan.poses(req)
    assert len(poses) == scan.pose_count(req) == 3 * 2 * 2 * 2
    # altitude, then x, then y, then yaw (UAV-DualCog's loop order)
    assert [(p.z, p.x, p.y, p.yaw_deg) for p in poses[:5]] == [
        (30, 0, 0, 0), (30, 0, 0, 90), (30, 0, 10, 0), (30, 0, 10, 90), (30, 10, 0, 0),
    ]  # fmt: skip


def test_run_id_is_deterministic_and_content_addressed() -> None:
    a, b = valid(), valid()
    assert scan.run_id_for(a) == scan.run_id_for(b)
    b.camera.width = 320
    assert scan.run_id_for(a) != scan.run_id_for(b)
    assert scan.run_id_for(a).startswith("demo_city-")


def test_lidar_auto_range() -> None:
    assert scan.lidar_range_auto(30, 30) == pytest.approx(63.64, abs=0.01)
    assert scan.lidar_range_auto(1, 1) == 60.0
    assert scan.lidar_range_auto(200, 200) == 140.0


def test_a_run_keeps_the_settings_it_was_accepted_with(tmp_path: Path) -> None:
    from skyqa import keys
    from skyqa.blob import LocalBlobStore

    store = LocalBlobStore(tmp_path)
    with pytest.raises(InvalidScanRequest, match="no stored scan request"):
        scan.stored(store, "r1")
    scan.store_once(store, valid())
    scan.store_once(store, valid())  # a redelivered request changes nothing
    assert scan.stored(store, "r1") == valid()
    with pytest.raises(InvalidScanRequest, match="already exists with other settings"):
        scan.store_once(store, valid(seed=9))
    assert scan.stored(store, "r1").seed == 0
    # a newer version's field is skipped; a foreign run's or a corrupt file is refused
    body = json.loads(store.get(keys.scan_request("r1")))
    store.put(keys.scan_request("r1"), json.dumps({**body, "fieldOfTomorrow": 1}).encode())
    assert scan.stored(store, "r1") == valid()
    store.put(keys.scan_request("r1"), json.dumps({**body, "runId": "r2"}).encode())
    with pytest.raises(InvalidScanRequest, match="scan request of run 'r2'"):
        scan.stored(store, "r1")
    store.put(keys.scan_request("r1"), b"\xff\xfe{")
    with pytest.raises(InvalidScanRequest, match="does not parse"):
        scan.stored(store, "r1")


def test_constraint_reports_from_before_the_kinematic_check_still_load() -> None:
    from skyqa.contracts.missions import Checks

    legacy = {
        "kinematics": {"checked": "false"},
        "collision": {"collision_free": True, "min_distance": 3.0, "violation_count": 0, "violations": []},
        "repair": {"repaired_segments": 0, "lifted_points": 0, "lifted_fraction": 0.0, "max_lift_m": 0.0},
    }
    kin = Checks.model_validate(legacy).kinematics
    assert not kin.checked and kin.within_limits is None and kin.max_speed_mps is None


def test_release_views_are_checked_at_a_sixteenth_of_their_pixels_and_previews_where_they_ship() -> None:
    release = scan.stills(scan.apply_defaults(scan_pb2.ScanRequest(scene_id="tiny_town", profile="release")))
    assert (release.width, release.height, release.working_width, release.working_height) == (
        4096,
        3072,
        1024,
        768,
    )
    assert release.reshot
    preview = scan.stills(scan.apply_defaults(scan_pb2.ScanRequest(scene_id="tiny_town")))
    assert (preview.width, preview.working_width) == (640, 640) and not preview.reshot
    # a request stored before the setting existed ships and checks at the profile's size
    old = scan.stills(scan_pb2.ScanRequest(scene_id="tiny_town", profile="release"))
    assert (old.width, old.working_width) == (4096, 4096) and not old.reshot


@pytest.mark.parametrize(
    ("text", "expected"),
    [("4096x3072@1024x768", (4096, 3072, 1024, 768)), ("1280x960", (1280, 960, 1280, 960))],
)
def test_stills_option_sets_the_shipped_and_the_working_size(
    text: str, expected: tuple[int, int, int, int]
) -> None:
    from skyqa.scan_options import build_request

    st = scan.stills(build_request("tiny_town", "release", None, None, None, None, 0, stills=text))
    assert (st.width, st.height, st.working_width, st.working_height) == expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("4096", "--stills needs WIDTHxHEIGHT"),
        ("4096x3072@1024", "--stills needs WIDTHxHEIGHT"),
        ("1x1@1x1@1x1", "--stills needs WIDTHxHEIGHT"),
        ("640x480@1024x768", "must be at most 640x480"),
        ("640x480@320x200", "aspect ratio"),
        ("-640x480", "--stills needs WIDTHxHEIGHT"),
        ("0x0", "--stills needs WIDTHxHEIGHT"),
        ("640x480@0x240", "--stills needs WIDTHxHEIGHT"),
        ("99999999999x1", "--stills needs WIDTHxHEIGHT"),
    ],
)
def test_bad_stills_options_say_what_to_fix(text: str, error: str) -> None:
    from skyqa.errors import InvalidInput
    from skyqa.scan_options import build_request

    with pytest.raises(InvalidInput, match=error):
        build_request("tiny_town", "preview", None, None, None, None, 0, stills=text)
