"""What the dashboard shows: throughput and ETA per stage, and the dead-letter index."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from fastapi import HTTPException
from PIL import Image
from skyqa import keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts import RunState, StageState
from skyqa.errors import InvalidInput
from skyqa.geometry.preview import render_topdown, topdown_pixels, topdown_size

from services.gateway.deadletters import DeadLetter, DeadLetterLog
from services.gateway.evaluations import interval
from services.gateway.missions import flown_path
from services.gateway.ranges import byte_range
from services.gateway.stored import ParsedCache
from services.gateway.views import run_view, stage_view


def test_rate_and_eta_while_running() -> None:
    st = StageState(done=10, total=40, status="running", started_at=100.0, updated_at=105.0)
    v = stage_view("capture", st, now=110.0)
    assert v["items_per_s"] == 1.0  # 10 items over the 10 s since the first event
    assert v["eta_s"] == 30.0 and v["fraction"] == 0.25


def test_no_eta_before_two_items_or_without_a_total_and_none_once_done() -> None:
    assert (
        stage_view("x", StageState(done=1, total=9, status="running", started_at=1.0), 5.0)["eta_s"] is None
    )
    assert (
        stage_view("x", StageState(done=5, total=0, status="running", started_at=1.0), 5.0)["eta_s"] is None
    )
    done = StageState(done=4, total=4, status="completed", started_at=1.0, updated_at=3.0, finished_at=3.0)
    v = stage_view("x", done, now=100.0)
    assert v["eta_s"] is None and v["items_per_s"] == 2.0 and v["elapsed_s"] == 2.0
    pending = stage_view("x", StageState(), now=100.0)
    assert pending["items_per_s"] == 0.0 and pending["fraction"] == 0.0


def test_run_view_orders_stages_and_stops_the_clock_when_finished() -> None:
    state = RunState(
        run_id="r",
        status="completed",
        created_at=10.0,
        stages={
            "eval": StageState(status="completed", started_at=40.0, finished_at=50.0, updated_at=50.0),
            "capture": StageState(status="completed", started_at=11.0, finished_at=20.0, updated_at=20.0),
            "extra": StageState(status="running", started_at=12.0),
        },
    )
    v = run_view(state, now=1000.0)
    names = [s["stage"] for s in v["stages"]]
    assert names[0] == "capture" and names[-2] == "eval" and names[-1] == "extra"
    assert v["wall_s"] == 40.0


def letter(seq: int, run: str = "r") -> DeadLetter:
    return DeadLetter(
        seq, float(seq), run, "skyqa.v1.scan.requested", "capture", "invalid_input", "bad", 1, 3
    )


def test_dead_letters_are_deduplicated_bounded_and_newest_first() -> None:
    log = DeadLetterLog(capacity=3)
    for seq in (1, 2, 2, 3, 4):  # 2 replayed by a re-created ordered consumer
        log.add(letter(seq, "a" if seq % 2 else "b"))
    assert log.total == 4
    assert [d.sequence for d in log.recent()] == [4, 3, 2]
    assert [d.sequence for d in log.recent("a")] == [3]
    log.add(letter(1))  # evicted earlier, so it counts as new again
    assert [d.sequence for d in log.recent()] == [1, 4, 3]


def test_byte_ranges_as_a_video_player_asks_for_them() -> None:
    assert byte_range(None, 100) is None and byte_range("", 100) is None
    assert byte_range("bytes=0-", 100) == (0, 99)
    assert byte_range("bytes=10-19", 100) == (10, 19)
    assert byte_range("bytes=90-500", 100) == (90, 99)  # clipped to the end
    assert byte_range("bytes=-10", 100) == (90, 99) and byte_range("bytes=-500", 100) == (0, 99)
    assert byte_range("Bytes=1-2", 100) == (1, 2)  # range units are case-insensitive
    # several ranges, other units and invalid ranges are ignored: the whole file is sent
    for header in ("bytes=0-1,4-5", "items=0-1", "bytes=a-b", "bytes=-", "bytes=50-40"):
        assert byte_range(header, 100) is None, header
    # RFC 9110 14.1.1: a non-zero suffix of an empty file is satisfiable (all of it, no bytes):
    # the whole file, 200, not 416
    assert byte_range("bytes=-5", 0) is None
    for header, size in (("bytes=100-", 100), ("bytes=-0", 100), ("bytes=-0", 0), ("bytes=0-", 0)):
        with pytest.raises(HTTPException) as err:
            byte_range(header, size)
        assert err.value.status_code == 416 and err.value.headers == {"Content-Range": f"bytes */{size}"}


def test_byte_ranges_with_numbers_too_long_for_int_or_digits_outside_ascii() -> None:
    """Issue #41.8: ``bytes=<5000 digits>-`` raised int()'s digit-limit ValueError (a 500)."""
    huge = "9" * 5000
    with pytest.raises(HTTPException) as err:
        byte_range(f"bytes={huge}-", 100)
    assert err.value.status_code == 416 and len(str(err.value.detail)) < 200
    assert byte_range(f"bytes=-{huge}", 100) == (0, 99)  # a suffix longer than the file: all of it
    assert byte_range(f"bytes=5-{huge}", 100) == (5, 99)
    assert byte_range(f"bytes={'0' * 5000}7-{'0' * 5000}9", 100) == (7, 9)
    assert byte_range(f"bytes={huge}-5", 100) is None  # last before first: invalid, ignored
    # other scripts' digits are not a range a client means
    for header in ("bytes=\u0663-", "bytes=\u00b2-", "bytes=-\u0669", "bytes=\uff11-\uff12"):
        assert byte_range(header, 100) is None, header


def test_a_flown_path_lands_on_the_preview_pixels_that_drew_the_ground_under_it() -> None:
    rng = np.random.default_rng(3)
    points = np.column_stack([rng.uniform(-40, 60, 400), rng.uniform(-10, 30, 400), rng.uniform(0, 5, 400)])
    points[:3] = [[-40, -10, 50], [60, 30, 50], [10, 10, 50]]  # the highest points win their cell
    classes = np.zeros(len(points), np.int64)
    classes[:3] = 7
    lo, hi = points[:, :2].min(axis=0), points[:, :2].max(axis=0)
    image = np.asarray(Image.open(io.BytesIO(render_topdown(points, classes, max_px=128))))
    assert image.shape[1::-1] == topdown_size(lo, hi, 128)
    px = topdown_pixels(points[:3, :2], lo, hi, 128).astype(int)
    lone = image[px[2, 1], px[2, 0]]
    for col, row in px:
        assert (image[row, col] == lone).all()  # the same class shade at every mapped pixel
    assert tuple(px[0]) == (0, image.shape[0] - 1) and tuple(px[1]) == (image.shape[1] - 1, 0)  # north up


def test_score_intervals_are_wilson_for_rates_and_normal_otherwise() -> None:
    assert interval([]) == [0.0, 0.0]
    lo, hi = interval([1.0] * 10)
    assert hi == 1.0 and 0.69 < lo < 0.73  # Wilson: an all-right sample still has a lower bound
    lo, hi = interval([0.2, 0.4, 0.6])
    assert lo < 0.4 < hi


def test_the_mission_path_is_projected_north_up_onto_the_preview(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    run, scene, traj = "r1", "tiny_town", "m1"
    meta = {
        "scene_id": scene, "engine": "builtin", "run_id": run, "frames": 1, "raw_points": 1,
        "dedup_points": 1, "dedup_ratio": 1.0, "voxel_size": 0.2, "dedup_enabled": True,
        "fuse_strategy": "v", "coverage_ratio": 1.0, "hole_ratio": 0.0, "coverage_grid_m": 1.0,
        "instance_count": 0, "semantic_points": 1, "bounds_min": [-100.0, 0.0, 0.0],
        "bounds_max": [100.0, 50.0, 30.0], "outputs": {},
    }  # fmt: skip
    store.put(keys.fusion_outputs(run, scene)["meta"], json.dumps(meta).encode())
    # four frames at 1 s: the north-west corner, the south-east corner, the centre, outside
    poses = "frame,t,x,y,z,yaw,pitch,roll\n0,0,-100,50,10,0,0,0\n1,1,100,0,10,0,0,0\n2,2,0,25,10,0,0,0\n3,3,150,75,10,0,0,0\n"
    store.put(keys.mission_file(run, traj, keys.POSES), poses.encode())
    cache = ParsedCache(store)
    path = flown_path(cache, run, scene, traj, fps=1.0, frames=4)
    w, h = topdown_size([-100, 0], [100, 50])
    (x0, y0), (x1, y1), (xc, yc), (xo, yo) = path["points"]
    assert (x0, y0) == (0.0, 0.0)  # the north-west corner is the top left pixel
    assert x1 == pytest.approx((w - 1) / w, abs=2e-3) and y1 == pytest.approx((h - 1) / h, abs=2e-3)
    assert xc == pytest.approx(0.5, abs=2e-3) and yc == pytest.approx(0.5, abs=2e-2)
    assert xo > 1 and yo < 0  # beyond the scanned area, north-east
    assert path["frame_step"] == 1 and path["preview"].endswith(".preview_topdown.png")
    with pytest.raises(InvalidInput, match="frames"):
        flown_path(cache, run, scene, traj, fps=10.0, frames=200_000_000)
    store.put(keys.fusion_outputs(run, scene)["meta"], json.dumps(meta | {"bounds_min": []}).encode())
    with pytest.raises(InvalidInput, match="bounds"):
        flown_path(ParsedCache(store), run, scene, traj, fps=1.0, frames=4)
