"""Paths inside a release: written relative to it, read back as store keys, never leaving it."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

import pytest
from rows import image_row, release_info
from skyqa import keys
from skyqa.errors import InvalidInput, InvalidKey
from skyqa.exports import lmms_eval, vlmevalkit
from skyqa.exports.release import Release
from skyqa.protojson import to_dict, to_json
from skyqa.v1 import common_pb2, scan_pb2

pytestmark = pytest.mark.unit


def test_a_key_is_written_relative_to_its_release_and_read_back() -> None:
    key = "runs/r1/scene_data/tiny_town/landmarks_raw/rgb_views/4_9/view_00_front.rgb.jpg"
    rel = keys.release_path(key)
    assert rel == "scene_data/tiny_town/landmarks_raw/rgb_views/4_9/view_00_front.rgb.jpg"
    assert keys.stored("r1", rel) == key
    assert keys.stored("r1", key) == key  # a run written before paths became relative
    with pytest.raises(InvalidKey):
        keys.release_path("scene_data/x.jpg")
    with pytest.raises(InvalidKey):
        keys.stored("r1", "../r2/secret.json")


def test_a_protobuf_file_has_its_zero_fields() -> None:
    req = scan_pb2.ScanRequest(run_id="r1", yaw_deg=[0.0], bound=common_pb2.MapBound(xmin=0, xmax=10))
    doc = json.loads(to_json(req))
    assert doc["bound"]["xmin"] == 0 and doc["seed"] == "0" and doc["profile"] == ""
    assert to_dict(req, proto_names=True)["bound"]["ymin"] == 0


def _release(tmp_path: Path, images: list[str]) -> Path:
    root = tmp_path / "release"
    (root / "image_tasks/manifests").mkdir(parents=True)
    (root / "img").mkdir()
    (root / "img/a.jpg").write_bytes(b"\xff\xd8 first")
    (root / "img/b.jpg").write_bytes(b"\xff\xd8 second")
    (tmp_path / "outside.jpg").write_bytes(b"secret")
    row = image_row(images=images)
    (root / "image_tasks/manifests/t.image_qa.jsonl").write_text(row.model_dump_json() + "\n")
    info = release_info(
        scene_id="tiny_town",
        config_hash="",
        family_rows={"dualcog_image": 1},
        manifests={"dualcog_image": "image_tasks/manifests/t.image_qa.jsonl"},
    )
    (root / "release.json").write_text(info.model_dump_json())
    return root


def test_the_vlmevalkit_tsv_embeds_the_release_files(tmp_path: Path) -> None:
    root = _release(tmp_path, ["img/a.jpg", "img/b.jpg"])
    out = tmp_path / "out.tsv"
    assert vlmevalkit.write(Release.open(root), out, max_side=0) == 1
    with out.open(newline="") as fh:
        (cells,) = list(csv.DictReader(fh, delimiter="\t"))
    images = [base64.b64decode(x) for x in json.loads(cells["image"])]
    assert images == [b"\xff\xd8 first", b"\xff\xd8 second"]
    assert cells["answer"] == "C" and cells["C"] == "Right"


@pytest.mark.parametrize("bad", ["../outside.jpg", "/etc/passwd", "img/missing.jpg"])
def test_a_row_naming_a_file_outside_the_release_is_refused(tmp_path: Path, bad: str) -> None:
    root = _release(tmp_path, ["img/a.jpg", bad])
    with pytest.raises(InvalidInput, match="names the file"):
        vlmevalkit.write(Release.open(root), tmp_path / "out.tsv", max_side=0)


def test_a_folder_without_release_json_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"release\.json"):
        Release.open(tmp_path)


def test_an_export_never_writes_into_the_release_or_over_other_files(tmp_path: Path) -> None:
    root = _release(tmp_path, ["img/a.jpg", "img/b.jpg"])
    release = Release.open(root)
    with pytest.raises(InvalidInput, match="inside the release"):
        vlmevalkit.write(release, root / "out.tsv", max_side=0)
    with pytest.raises(InvalidInput, match="is a folder"):
        vlmevalkit.write(release, tmp_path, max_side=0)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("not an export")
    with pytest.raises(InvalidInput, match="other files in it"):
        lmms_eval.write(release, busy)
    # an earlier export is replaced whole: a file it had that the new one lacks is gone
    task = tmp_path / "task"
    lmms_eval.write(release, task)
    (task / "skyqa_video_behavior.yaml").write_text("from an earlier export")
    counts = lmms_eval.write(release, task)
    assert counts == {"skyqa_image": 1} and not (task / "skyqa_video_behavior.yaml").exists()
    assert json.loads((task / "skyqa_task.json").read_text())["release_root"] == str(root.resolve())
