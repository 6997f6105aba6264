"""The CLI as a user runs it: the embedded demo, determinism, and bad input."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ARGS = [
    "--scene",
    "tiny_town",
    "--bound",
    "-50,50,-50,50,0,80",
    "--spacing",
    "25",
    "--altitude",
    "45",
    "--landmarks",
    "3",
    "--video",
    "160x120",
]


def skyqa(*args: str, cwd: Path | None = None, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYQA_")}
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
    )


def outputs(stdout: str) -> dict[str, Path]:
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].startswith("/"):
            found[parts[0]] = Path(parts[1])
    return found


@pytest.fixture(scope="module")
def two_demo_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Path]]:
    runs = []
    for i in range(2):
        data = tmp_path_factory.mktemp(f"demo{i}")
        result = skyqa("demo", "--data-dir", str(data), *ARGS)
        assert result.returncode == 0, result.stderr[-2000:]
        assert re.search(r"dashboard +http://127\.0\.0\.1:\d+/#run=\S+", result.stderr), result.stderr[:2000]
        runs.append(outputs(result.stdout))
    return runs


def test_demo_prints_where_the_outputs_are(two_demo_runs: list[dict[str, Path]]) -> None:
    out = two_demo_runs[0]
    for name in (
        "cloud_pcd",
        "instances",
        "meta",
        "preview_topdown",
        "preview_oblique",
        "frames_manifest",
        "missions_index",
        "image_qa",
        "video_qa",
        "qc_report",
        "dataset_card",
        "image_mcq_tsv",
        "render_requests",
        "leaderboard",
        "eval_report",
        "eval_items",
    ):
        assert out[name].is_file(), name
    board = json.loads(out["leaderboard"].read_text())
    models = {m["model"]: m for m in board["models"]}
    assert set(models) == {"random", "text_prior", "cv_grounding"}
    # the default protocols ran: CircularEval and process-level steps, a correlation matrix
    assert models["random"]["circular"]["circular"] <= models["random"]["circular"]["vanilla"]
    assert set(models["text_prior"]["process"]["operation_accuracy"]) == {"GND", "PER", "QUA", "INT", "INF"}
    assert "env_where" in board["task_correlation"]["matrix"]
    assert out["preview_oblique"].read_bytes().startswith(b"\x89PNG")
    index = json.loads(out["missions_index"].read_text())
    assert index["missions"], "the demo renders missions"
    store = out["missions_index"].parents[3]
    for row in index["missions"]:
        assert (store / row["video"]).stat().st_size > 1024
        assert (store / row["task_data"]).is_file()
    # the release lattice: 8 image rows and 4 video rows per released landmark, less the rows
    # every blind solver answers and the visibility rows of an over-represented count; the card
    # carries the blind gate's table and verdict
    report = json.loads(out["qc_report"].read_text())
    n = report["funnel"]["released_landmarks"]
    assert n >= 1
    rows = len(out["image_qa"].read_text().splitlines()) + len(out["video_qa"].read_text().splitlines())
    funnel = report["funnel"]
    dropped = funnel["blind_dropped"] + funnel["count_balance_dropped"] + funnel["count_margin_dropped"]
    assert rows + dropped == 12 * n
    assert "## Blind gate" in out["dataset_card"].read_text()


def test_same_scene_config_seed_gives_byte_identical_outputs(
    two_demo_runs: list[dict[str, Path]],
) -> None:
    a, b = two_demo_runs
    for name in (
        "frames_manifest",
        "instances",
        "meta",
        "cloud_pcd",
        "preview_topdown",
        "landmarks_raw",
        "valid_instances",
        "missions_index",
        "image_qa",
        "video_qa",
        "render_requests",
        "qc_report",
        "leaderboard",
    ):
        assert a[name].read_bytes() == b[name].read_bytes(), name
    # every mission bundle and video too
    store_a, store_b = (x["missions_index"].parents[3] for x in (a, b))
    for row in json.loads(a["missions_index"].read_text())["missions"]:
        for key in (row["task_data"], row["video"]):
            assert (store_a / key).read_bytes() == (store_b / key).read_bytes(), key


def test_rerun_resumes_the_finished_run(tmp_path: Path) -> None:
    first = skyqa("demo", "--data-dir", str(tmp_path), *ARGS)
    assert first.returncode == 0, first.stderr[-2000:]
    again = skyqa("demo", "--data-dir", str(tmp_path), *ARGS)
    assert again.returncode == 0
    assert "completed" in again.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--bound", "1,2,3"], "--bound needs six numbers"),
        (["demo", "--profile", "ultra"], "--profile must be one of"),
        (["demo", "--spacing", "-3"], "--spacing must be positive"),
        (["serve", "teleporter"], "unknown service"),
        (["demo", "--eval-model", "nowhere"], "--eval-model needs URL[#MODEL]"),
        (["demo", "--eval-conditions", "full,x-ray"], "unknown conditions ['x-ray']"),
        (["eval", "r", "--conditions", "sideways"], "unknown conditions ['sideways']"),
        (["blind-filter", "r", "--samples", "0"], "--samples must be >= 1"),
        (["scan", "--nats-url", "nats://127.0.0.1:9", "--scene", "tiny_town"], "cannot reach NATS"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    result = skyqa(*args, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_eval_of_a_run_without_manifests_exits_1(tmp_path: Path) -> None:
    for cmd in ("eval", "blind-filter"):
        result = skyqa(cmd, "no-such-run", "--data-dir", str(tmp_path), timeout=60)
        assert result.returncode == 1 and "has no QA manifests" in result.stderr, result.stderr


def test_warmup_fills_the_kernel_cache_the_image_build_relies_on(tmp_path: Path) -> None:
    # deploy/Dockerfile runs `skyqa warmup` with NUMBA_CACHE_DIR set; containers then load
    # the compiled renderer kernels from there instead of compiling at start-up
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-m", "services.cli", "warmup"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        assert "renderer kernels ready" in result.stdout
    cached = {p.name.split(".")[0] for p in (tmp_path / "cache").rglob("*.nbi")}
    assert {"_kernels"} <= cached, cached


def test_bad_config_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "SKYQA_BUS__MAX_DELIVER": "0"}
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "status", "x"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 2
    assert "bus.max_deliver" in result.stderr


def test_up_serves_until_sigterm_and_takes_nats_down_with_it(tmp_path: Path) -> None:
    import signal
    import socket
    import time

    from skyqa.servers import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYQA_")}
    log = tmp_path / "up.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "up", "--data-dir", str(tmp_path), "--nats-port", str(port)],
            stdout=fh, stderr=fh, env=env,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while "labeller" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 128 + signal.SIGTERM, log.read_text()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


def test_release_folder_loads_with_hugging_face_datasets(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # offline and with a private cache; datasets reads these when it is imported
    for var, value in {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}.items():
        monkeypatch.setenv(var, value)
    datasets = pytest.importorskip("datasets")
    out = two_demo_runs[0]
    release = out["qc_report"].parent  # the run prefix is the release folder
    image = datasets.load_dataset(str(release), "image_qa", split="test")
    video = datasets.load_dataset(str(release), "video_qa", split="test")
    assert len(image) == len(out["image_qa"].read_text().splitlines())
    assert len(video) == len(out["video_qa"].read_text().splitlines())
    assert set(image["task_type"]) == {"self_where", "self_what", "env_where", "env_how"}


# The release a fixed scene, config and seed produce, recorded before the architecture refactor
# (issue 17): restructuring the code must not change one byte of what ships. Files that record
# wall-clock facts (review log timestamps, model latencies) are left out.
DIGEST_FILE = Path(__file__).with_name("release_digest.json")
_VOLATILE = re.compile(
    r"(^|/)\.|landmarks_review/log/|\.review_log\.jsonl$|\.web_review_state\.json$|^eval/items\.jsonl$"
)


def release_digest(release: Path) -> dict[str, str]:
    files = sorted(
        p
        for p in release.rglob("*")
        if p.is_file() and not _VOLATILE.search(p.relative_to(release).as_posix())
    )
    digests = {p.relative_to(release).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    whole = hashlib.sha256("".join(f"{k} {v}\n" for k, v in digests.items()).encode()).hexdigest()
    named = {k: v for k, v in digests.items() if k.endswith((".json", ".jsonl", ".tsv", ".csv", ".md"))}
    return {"release": whole, "files": str(len(digests)), **named}


def test_release_is_byte_identical_to_the_recorded_one(two_demo_runs: list[dict[str, Path]]) -> None:
    got = release_digest(two_demo_runs[0]["qc_report"].parent)
    if os.environ.get("SKYQA_RECORD_RELEASE_DIGEST") == "1":
        # a deliberate change of what ships: record it, review the diff of this file, commit it
        DIGEST_FILE.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"recorded {DIGEST_FILE.name}")
    want = json.loads(DIGEST_FILE.read_text())
    changed = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
    assert not changed, f"the release changed: {changed[:20]}"
