"""The release seal: SHA256SUMS over every released file, and ``verify`` catching any change."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from demo_runs import skyqa
from skyqa import integrity
from skyqa.blob import LocalBlobStore
from skyqa.errors import InvalidInput

pytestmark = pytest.mark.unit

RUN = "r1"


def _info() -> integrity.ReleaseInfo:
    scan = {"runId": RUN, "sceneId": "tiny_town", "seed": "7"}
    settings = {"blind_gate": "enforce"}
    return integrity.ReleaseInfo(
        skyqa_version="0.1.0",
        git_commit=integrity.git_commit(),
        run_id=RUN,
        scene_id="tiny_town",
        seed=7,
        config_hash=integrity.config_hash(scan, settings),
        settings=settings,
        scan_request=scan,
        counts={"image_rows": 1},
        family_rows={"dualcog_image": 1},
        manifests={"dualcog_image": "image_tasks/manifests/tiny_town.image_qa.jsonl"},
    )


@pytest.fixture
def release(tmp_path: Path) -> Path:
    store = LocalBlobStore(tmp_path / "store")
    root = f"runs/{RUN}"
    store.put(f"{root}/image_tasks/manifests/tiny_town.image_qa.jsonl", b'{"sample_id": "a"}\n')
    store.put(f"{root}/image_tasks/assets/x.jpg", b"\xff\xd8jpeg")
    store.put(f"{root}/eval/leaderboard.json", b"{}")  # written after the release
    integrity.seal(store, RUN, _info())
    return tmp_path / "store" / root


def test_a_sealed_release_verifies_and_lists_every_released_file_once(release: Path) -> None:
    checked, problems = integrity.verify(release)
    assert problems == []
    listed = [line.split("  ", 1)[1] for line in (release / "SHA256SUMS").read_text().splitlines()]
    assert listed == sorted(
        ["image_tasks/manifests/tiny_town.image_qa.jsonl", "image_tasks/assets/x.jpg", "release.json"]
    )
    assert checked == 3
    # sha256sum -c reads the same file: each line is the digest of the bytes on disk
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, rel = line.split("  ", 1)
        assert hashlib.sha256((release / rel).read_bytes()).hexdigest() == digest


def test_a_flipped_byte_a_missing_file_and_an_added_file_are_each_reported(release: Path) -> None:
    asset = release / "image_tasks/assets/x.jpg"
    data = bytearray(asset.read_bytes())
    data[0] ^= 1
    asset.write_bytes(bytes(data))
    (release / "image_tasks/manifests/tiny_town.image_qa.jsonl").unlink()
    (release / "image_tasks/extra.json").write_text("{}")
    (release / "eval/report.html").write_text("later evaluation output is not part of the release")
    _, problems = integrity.verify(release)
    assert [str(p) for p in problems] == [
        "image_tasks/assets/x.jpg: changed",
        "image_tasks/manifests/tiny_town.image_qa.jsonl: missing",
        "image_tasks/extra.json: not listed in SHA256SUMS",
    ]


@pytest.mark.parametrize(
    "line",
    [
        "0" * 64 + "  ../outside.txt",
        "0" * 64 + "  /etc/passwd",
        "0" * 64 + " image_tasks/assets/x.jpg",  # one space: not the checksum format
        "not a digest  release.json",
    ],
)
def test_an_untrusted_checksum_line_is_a_problem_and_nothing_outside_is_read(
    release: Path, line: str
) -> None:
    (release.parent / "outside.txt").write_text("secret")
    sums = release / "SHA256SUMS"
    sums.write_text(sums.read_text() + line + "\n")
    _, problems = integrity.verify(release)
    assert len(problems) == 1 and "bad line" in problems[0].what


def test_a_link_in_place_of_a_file_is_not_followed(release: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jpg"
    target.write_bytes((release / "image_tasks/assets/x.jpg").read_bytes())
    (release / "image_tasks/assets/x.jpg").unlink()
    (release / "image_tasks/assets/x.jpg").symlink_to(target)
    _, problems = integrity.verify(release)
    assert [str(p) for p in problems] == ["image_tasks/assets/x.jpg: not a regular file inside the release"]


def test_a_linked_folder_on_the_way_is_not_followed(release: Path, tmp_path: Path) -> None:
    shutil.move(release / "image_tasks/assets", tmp_path / "assets")
    (release / "image_tasks/assets").symlink_to(tmp_path / "assets", target_is_directory=True)
    _, problems = integrity.verify(release)
    assert [str(p) for p in problems] == [
        "image_tasks/assets/x.jpg: not a regular file inside the release",
        "image_tasks/assets: not listed in SHA256SUMS",
    ]


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_checksum_file_that_is_not_a_regular_file_is_refused(
    release: Path, tmp_path: Path, kind: str
) -> None:
    (release / "SHA256SUMS").unlink()
    if kind == "link":
        (tmp_path / "elsewhere").write_text("")
        (release / "SHA256SUMS").symlink_to(tmp_path / "elsewhere")
    else:
        (release / "SHA256SUMS").mkdir()
    with pytest.raises(InvalidInput, match="not a regular file"):
        integrity.verify(release)


def test_an_empty_checksum_file_is_not_a_release(tmp_path: Path) -> None:
    (tmp_path / "SHA256SUMS").write_text("")
    _, problems = integrity.verify(tmp_path)
    assert [str(p) for p in problems] == ["release.json: not listed in SHA256SUMS"]


def test_an_unlisted_special_file_is_reported(release: Path) -> None:
    os.mkfifo(release / "image_tasks/pipe")
    _, problems = integrity.verify(release)
    assert [str(p) for p in problems] == ["image_tasks/pipe: not listed in SHA256SUMS"]


def test_no_checksum_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        integrity.verify(tmp_path)


def test_the_config_hash_changes_with_the_request_and_the_settings() -> None:
    base = integrity.config_hash({"seed": "1"}, {"blind_gate": "enforce"})
    assert base == integrity.config_hash({"seed": "1"}, {"blind_gate": "enforce"})
    assert base != integrity.config_hash({"seed": "2"}, {"blind_gate": "enforce"})
    assert base != integrity.config_hash({"seed": "1"}, {"blind_gate": "report"})


def test_the_commit_is_read_from_the_checkout_or_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYQA_GIT_COMMIT", "abc1234")
    assert integrity.git_commit() == "abc1234"
    monkeypatch.setenv("SKYQA_GIT_COMMIT", "not a commit; rm -rf")
    got = integrity.git_commit()
    assert got == "unknown" or len(got) == 40


def _evaluated(tmp_path: Path) -> tuple[Path, LocalBlobStore]:
    store = LocalBlobStore(tmp_path / "store")
    store.put("runs/r1/a.json", b"{}", "application/json")
    integrity.seal(store, "r1", _info())
    store.put("runs/r1/eval/items.jsonl", b'{"ok": 1}\n', "application/x-ndjson")
    store.put("runs/r1/eval/leaderboard.json", b"{}", "application/json")
    integrity.seal_eval(store, "r1")
    return tmp_path / "store/runs/r1", store


def test_eval_outputs_have_their_own_checksums_and_a_tampered_one_is_named(tmp_path: Path) -> None:
    folder, _ = _evaluated(tmp_path)
    assert (folder / "eval/SHA256SUMS").read_text().splitlines()[0].endswith("  items.jsonl")
    assert integrity.verify(folder)[1] == []
    assert integrity.verify_eval(folder) == (2, [])
    (folder / "eval/items.jsonl").write_bytes(b'{"ok": 0}\n')
    (folder / "eval/extra.csv").write_text("a\n")
    (folder / "eval/leaderboard.json").unlink()
    _, problems = integrity.verify_eval(folder) or (0, [])
    assert [str(p) for p in problems] == [
        "eval/items.jsonl: changed",
        "eval/leaderboard.json: missing",
        "eval/extra.csv: not listed in eval/SHA256SUMS",
    ]


def test_eval_outputs_without_checksums_are_a_problem_and_no_eval_is_none(tmp_path: Path) -> None:
    folder, _ = _evaluated(tmp_path)
    (folder / "eval/SHA256SUMS").unlink()
    assert [str(p) for p in (integrity.verify_eval(folder) or (0, []))[1]] == [
        "eval/SHA256SUMS: missing: the evaluation outputs have no checksums"
        " (evaluated before evaluations were sealed: evaluate again to write them)"
    ]
    shutil.rmtree(folder / "eval")
    assert integrity.verify_eval(folder) is None


def test_skyqa_verify_exits_1_naming_a_tampered_eval_file(tmp_path: Path) -> None:
    folder, _ = _evaluated(tmp_path)
    ok = skyqa("verify", str(folder), timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "2 evaluation files match eval/SHA256SUMS" in ok.stdout
    (folder / "eval/leaderboard.json").write_text('{"tampered": true}')
    bad = skyqa("verify", str(folder), timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].endswith("eval/leaderboard.json: changed")
