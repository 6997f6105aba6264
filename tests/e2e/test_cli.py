"""The CLI as a user runs it: the embedded demo, determinism, and bad input."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from demo_runs import ARGS, DemoRun, outputs, skyqa
from dualcog_fields import COMPOSITE_WORDS, IMAGE_READ, IMAGE_REQUIRED, VIDEO_READ, VIDEO_REQUIRED
from google.protobuf.message import Message
from PIL import Image
from release_schemas import missing, proto_missing, schema_of
from skyqa import integrity
from skyqa.contracts.base import load_jsonl
from skyqa.contracts.qa import ImageRow, VideoRow
from skyqa.exports.release import Release
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO, TaskFamily
from skyqa.families.aircop import FAMILY as AIRCOP_COLLAB

from services.qa_generator import export


@pytest.fixture(scope="module")
def two_demo_runs(demo_runs: list[DemoRun]) -> list[dict[str, Path]]:
    return [outputs(r.stdout) for r in demo_runs]


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
        "navigation_qa",
        "navigation_urbanvideo",
        "collab_qa",
        "collab_aircop",
        "qc_report",
        "dataset_card",
        "image_dualcog_latest",
        "video_dualcog_latest",
        "image_qa_metadata",
        "render_requests",
        "leaderboard",
        "eval_report",
        "eval_items",
        "reasoning_trajectories",
        "reasoning_index",
        "world_leaderboard",
    ):
        assert out[name].is_file(), name
    board = json.loads(out["leaderboard"].read_text())
    models = {m["model"]: m for m in board["models"]}
    assert set(models) == {"random", "text_prior", "cv_grounding"}
    # the default protocols ran: CircularEval and process-level steps, a correlation matrix
    assert models["random"]["circular"]["circular"] <= models["random"]["circular"]["vanilla"]
    assert set(models["text_prior"]["process"]["operation_accuracy"]) == {"GND", "PER", "QUA", "INT", "INF"}
    assert "env_where" in board["task_correlation"]["matrix"]
    # UrbanVideo-Bench's four groups, and its correlation across the three baselines
    groups = models["random"]["per_group"]["urbanvideo_nav"]
    assert set(groups) == {"recall", "perception", "reasoning", "navigation", "all"}
    assert groups["all"]["count"] == sum(groups[g]["count"] for g in groups if g != "all") > 0
    assert board["task_correlation"]["across_models"]["models"] == 3
    assert out["preview_oblique"].read_bytes().startswith(b"\x89PNG")
    index = json.loads(out["missions_index"].read_text())
    assert index["missions"], "the demo renders missions"
    store = out["missions_index"].parents[3]
    for row in index["missions"]:
        assert (store / row["video"]).stat().st_size > 1024
        assert (store / row["task_data"]).is_file()
    # the release lattice: 8 image rows and 4 video rows per released landmark, less the rows of
    # tasks the blind gate withheld and the visibility rows of an over-represented count; the card
    # carries the blind gate's table and verdict
    report = json.loads(out["qc_report"].read_text())
    n = report["funnel"]["released_landmarks"]
    assert n >= 1
    rows = len(out["image_qa"].read_text().splitlines()) + len(out["video_qa"].read_text().splitlines())
    funnel = report["funnel"]
    blind = report["blind_gate"]["withheld_by_family"]
    dualcog = blind.get("dualcog_image", 0) + blind.get("dualcog_video", 0)
    dropped = (
        dualcog
        + funnel["count_balance_dropped"]
        + funnel["count_margin_dropped"]
        + funnel["video_share_dropped"]
    )
    assert rows + dropped == 12 * n
    # navigation missions and their questions (UrbanVideo-Bench style)
    assert index["navigation"], index["rejected_navigation"]
    nav = [json.loads(line) for line in out["navigation_qa"].read_text().splitlines()]
    # the demo's three missions support few types once every row has the source's option count
    # and names its moment by what happened (each type is proven on block worlds in the unit tests)
    assert nav and funnel["family_rows"]["urbanvideo_nav"] == len(nav)
    assert "## Blind gate" in out["dataset_card"].read_text()
    # UAV groups and their collaboration questions (AirCopBench style): every group's views
    # shipped degraded as recorded, and AirCopBench's question JSON carrying the same rows
    assert index["groups"], index["rejected_groups"]
    collab = [json.loads(line) for line in out["collab_qa"].read_text().splitlines()]
    # three groups: counts, grounding and matching need a clean region or a clear relation, which
    # these small views seldom offer
    assert len({r["task"] for r in collab}) >= 6 and funnel["family_rows"]["aircop_collab"] == len(collab)
    release = out["qc_report"].parent
    requests = json.loads(out["render_requests"].read_text())["degraded"]
    assert {g["output_image"] for g in requests} >= {p for r in collab for p in r["images"]}
    assert all((release / p).is_file() for r in collab for p in r["images"])
    aircop = json.loads(out["collab_aircop"].read_text())["results"]
    # AirCopBench's evaluation sorts rows into its four categories by the subtask name its
    # parse_subcat reads out of "n.m Name (UAVk)"; ids follow its generators (Sim3_OC_UAV1_1001)
    subtasks = {re.match(r"\d+\.\d+\s+(.+?)\s*(?:\(|$)", q["question_type"]).group(1) for q in aircop}  # type: ignore[union-attr]
    assert subtasks <= {
        "Scene Description", "Scene Comparison", "Observing Posture", "Object Recognition",
        "Object Counting", "Object Grounding", "Object Matching", "Quality Assessment",
        "Usability Assessment", "Causal Assessment", "When to Collaborate", "What to Collaborate",
        "Who to Collaborate", "Why to Collaborate",
    }  # fmt: skip
    assert all(re.fullmatch(r"Sim\d_[A-Za-z_2]+(_UAV\d)?_\d{4}", q["question_id"]) for q in aircop)
    assert len({q["question_id"] for q in aircop}) == len(aircop)
    assert all(len(q["options"]) == 4 for q in aircop)
    assert [(q["sample_id"], q["correct_answer"]) for q in aircop] == [
        (r["sample_id"], r["answer_option_id"]) for r in collab
    ]
    # action trajectories (Reasoning-Structured Videos style): one of each split (an equivalence
    # pair) and a random walk, each in its split or, failed, in random_walk/ with the reason, in
    # the card's layout; the oracle world model is exact on every released relation
    trajs = [json.loads(line) for line in out["reasoning_trajectories"].read_text().splitlines()]
    assert sorted(r["built_as"] for r in trajs) == [
        "equivalence_easy", "equivalence_easy", "equivalence_hard", "equivalence_hard", "inverse_easy",
        "inverse_hard", "loop_easy", "loop_hard", "random_walk",
    ]  # fmt: skip
    for r in trajs:
        assert r["split"] in (r["built_as"], "random_walk")
        assert (r["split"] == r["built_as"]) == (not r["failure"]) or r["built_as"] == "random_walk"
        meta = json.loads((release / r["meta"]).read_text())
        assert (release / r["video"]).stat().st_size > 1024
        assert (
            meta["trajectory_id"] == r["number"] and len(meta["steps"]) == len(meta["action_sequence"]) == 40
        )
        assert r["video"].startswith(f"reasoning_videos/{r['split']}/run_")
    world = json.loads(out["world_leaderboard"].read_text())
    assert world["models"][0]["model"] == "oracle" or not world["models"]
    assert all(s["gt_exact"] == 1.0 for s in world["models"][0]["splits"].values())


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
        (["demo", "--navigation", "2"], "--navigation needs GOALS,ROUTES[,PER_TYPE]"),
        (["demo", "--navigation", "2,1,-1"], "--navigation needs GOALS,ROUTES[,PER_TYPE]"),
        (["demo", "--navigation", "2,1,9"], "navigation questions per type must be 1..8"),
        (["demo", "--navigation-types", "causal,teleport"], "navigation types must be distinct names"),
        (["demo", "--groups", "3,five"], "--groups needs UAV group sizes"),
        (["demo", "--groups", "3,9"], "UAV group sizes must be 2..8"),
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
    # a judge must be a language model endpoint, named as --model names one
    for judge, said in (
        ("world://127.0.0.1:1", "not a world model"),
        ("nonsense", "--judge needs URL[#MODEL]"),
    ):
        result = skyqa("eval", "no-such-run", "--data-dir", str(tmp_path), "--judge", judge, timeout=60)
        assert result.returncode == 2 and said in result.stderr, result.stderr


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
    assert len(image) == len(out["image_qa"].read_text().splitlines())
    assert set(image["task_type"]) == {"self_where", "self_what", "env_where", "env_how"}
    # images load decoded, in prompt order, whatever the working directory
    assert image.features["media"] == datasets.List(datasets.Image())
    first = image[0]
    assert len(first["media"]) == len(first["images"]) >= 2
    assert first["media"][0].size == Image.open(release / first["images"][0]).size
    # a landmark's four video rows ship together or not at all: a small demo may ship none, and
    # then the card offers no video config (datasets cannot build one from no rows)
    if video_rows := len(out["video_qa"].read_text().splitlines()):
        video = datasets.load_dataset(str(release), "video_qa", split="test")
        assert len(video) == video_rows
        assert video[0]["media"][0].size == Image.open(release / video[0]["reference_image_with_bbox"]).size
    else:
        assert "config_name: video_qa" not in out["dataset_card"].read_text()
    # the ultra-resolution rows: the survey view at its own size, the typed GT-CoT with each row
    ultra = datasets.load_dataset(str(release), "ultravr_qa", split="test")
    assert len(ultra) == len(out["ultravr_qa"].read_text().splitlines()) > 0
    assert ultra[0]["media"][0].size == (2048, 1536)
    assert {s["answer_format"] for r in ultra for s in r["reasoning_steps"]} >= {"integer", "option_label"}
    # the trajectories (videos only) load from their own table
    index = datasets.load_dataset("parquet", data_files=str(out["reasoning_index"]), split="train")
    assert len(index) == len(out["reasoning_trajectories"].read_text().splitlines())
    assert len(index[0]["actions"]) == 40 and (release / index[0]["video"]).is_file()


def _reshaped(value: dict[str, Any]) -> dict[str, Any]:
    # the same keys with values of another JSON type (a number where a row had a list, ...)
    return {
        k: ("x" if isinstance(v, (int, float)) else 1) if k != "vehicles" else [v] for k, v in value.items()
    }


def test_every_config_of_the_dataset_card_loads_with_hugging_face_datasets(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var, value in {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}.items():
        monkeypatch.setenv(var, value)
    datasets = pytest.importorskip("datasets")

    release = tmp_path / "release"
    shutil.copytree(two_demo_runs[0]["qc_report"].parent, release, ignore=shutil.ignore_patterns("eval"))
    # a release whose rows mix shapes: what a larger scene ships (demo_city's collaboration rows
    # count vehicles in one row and list them in the next), written by the release's own writer
    mixed: dict[TaskFamily[Any], str] = {DUALCOG_IMAGE: "metadata", AIRCOP_COLLAB: "evidence"}
    for fam, field in mixed.items():
        rows = Release.open(release).rows(fam)
        odd = rows[0].model_copy(
            update={"sample_id": f"{rows[0].sample_id}_mixed", field: _reshaped(getattr(rows[0], field))}
        )
        (release / f"{fam.manifest}.metadata.jsonl").write_bytes(export.hf_metadata(fam, [*rows, odd]))
    card = yaml.safe_load((release / "README.md").read_text().split("---")[1])
    names = [c["config_name"] for c in card["configs"]]
    assert {f.manifest for f in mixed} <= set(names)
    for name in names:
        rows = [json.loads(line) for line in (release / f"{name}.metadata.jsonl").read_text().splitlines()]
        ds = datasets.load_dataset(str(release), name, split="test")
        assert len(ds) == len(rows) > 0, name
        assert ds.features["media"] == datasets.List(datasets.Image()), name
        assert ds[len(ds) - 1]["media"][0].size, name
    collab = datasets.load_dataset(str(release), "collab_qa", split="test")
    manifest = [r.evidence for r in Release.open(release).rows(AIRCOP_COLLAB)]
    assert [json.loads(e) for e in collab["evidence"]][:-1] == manifest
    assert json.loads(collab["evidence"][-1]) == _reshaped(manifest[0])


def test_verify_passes_on_a_fresh_release_and_names_a_flipped_byte(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path
) -> None:
    release = tmp_path / "release"
    shutil.copytree(two_demo_runs[1]["qc_report"].parent, release)
    ok = skyqa("verify", str(release))
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"\d+ files match SHA256SUMS", ok.stdout)
    asset = release / json.loads((release / "release.json").read_text())["manifests"]["dualcog_image"]
    data = bytearray(asset.read_bytes())
    data[len(data) // 2] ^= 0x01
    asset.write_bytes(bytes(data))
    bad = skyqa("verify", str(release))
    assert bad.returncode == 1
    assert f"{asset.relative_to(release).as_posix()}: changed" in bad.stderr


# The release a fixed scene, config and seed produce, recorded before the architecture refactor
# (issue 17): restructuring the code must not change one byte of what ships. Files that record
# wall-clock facts (review log timestamps, model latencies) are left out.
DIGEST_FILE = Path(__file__).with_name("release_digest.json")
_VOLATILE = re.compile(
    r"(^|/)\.|landmarks_review/log/|\.review_log\.jsonl$|\.web_review_state\.json$|^eval/items\.jsonl$"
    # release.json names the commit that made the release, SHA256SUMS hashes the review log's
    # wall-clock rows and eval/SHA256SUMS the model latencies of eval/items.jsonl; `skyqa verify`
    # checks them instead
    r"|^release\.json$|^(eval/)?SHA256SUMS$"
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


def test_the_vlmevalkit_tsv_carries_its_images_and_loads_from_any_folder(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path
) -> None:
    release = two_demo_runs[0]["qc_report"].parent
    tsv = tmp_path / "skyqa_image.tsv"
    done = skyqa("export", "vlmevalkit", str(release), "--out", str(tsv), "--max-side", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in two_demo_runs[0]["image_qa"].read_text().splitlines()]
    csv.field_size_limit(sys.maxsize)  # base64 images; VLMEvalKit reads them with pandas, which has no limit
    with tsv.open(newline="") as fh:
        table = list(csv.DictReader(fh, delimiter="\t"))
    assert [t["sample_id"] for t in table] == [r["sample_id"] for r in rows]
    for t, r in zip(table, rows, strict=True):
        images = json.loads(t["image"]) if t["image"].startswith("[") else [t["image"]]
        # --max-side 0 embeds the files as shipped, byte for byte
        assert [base64.b64decode(i) for i in images] == [(release / p).read_bytes() for p in r["images"]]
        assert t["answer"] == r["answer_option_id"] and t[t["answer"]] == r["answer_label"]
        assert "JSON" not in t["question"] and "bounding box" not in t["question"]
    small = tmp_path / "small.tsv"
    assert (
        skyqa("export", "vlmevalkit", str(release), "--out", str(small), "--max-side", "64").returncode == 0
    )
    with small.open(newline="") as fh:
        first = next(csv.DictReader(fh, delimiter="\t"))
    img = Image.open(io.BytesIO(base64.b64decode(json.loads(first["image"])[0])))
    assert max(img.size) == 64


def test_the_lmms_eval_task_scores_replies_as_the_evaluator_does_without_skyqa(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path
) -> None:
    release = two_demo_runs[0]["qc_report"].parent
    task = tmp_path / "tasks"
    done = skyqa("export", "lmms-eval", str(release), "--out", str(task))
    assert done.returncode == 0, done.stderr
    assert {p.name for p in task.iterdir()} >= {
        "skyqa.yaml",
        "skyqa_image.yaml",
        "skyqa_video.yaml",
        "utils.py",
    }
    # lmms-eval's environment has no skyqa: the task's utils must not need it
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import json, sys\n"
        "sys.modules['skyqa'] = None\n"
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('utils', {str(task / 'utils.py')!r})\n"
        "u = importlib.util.module_from_spec(spec); spec.loader.exec_module(u)\n"
        "out = []\n"
        "for kind, path in json.loads(sys.argv[1]).items():\n"
        "    for line in open(path):\n"
        "        doc = json.loads(line)\n"
        "        visual = getattr(u, kind + '_doc_to_visual')(doc)\n"
        "        text = getattr(u, kind + '_doc_to_text')(doc, {})\n"
        "        for n, reply in enumerate(json.loads(sys.argv[2])[doc['sample_id']]):\n"
        "            scores = getattr(u, kind + '_process_results')(doc, [json.dumps(reply)])\n"
        "            out.append([doc['sample_id'], n, len(visual), bool(text), scores])\n"
        "print(json.dumps(out))\n"
    )
    replies = _replies(two_demo_runs[0])
    manifests = {"image": str(two_demo_runs[0]["image_qa"]), "video": str(two_demo_runs[0]["video_qa"])}
    run = subprocess.run(
        [sys.executable, str(probe), json.dumps(manifests), json.dumps(replies)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads(run.stdout)
    assert len(results) == 2 * len(replies)
    rows: dict[str, tuple[Any, Any]] = {
        r.sample_id: (DUALCOG_IMAGE, r)
        for r in load_jsonl(ImageRow, two_demo_runs[0]["image_qa"].read_bytes())
    }
    rows |= {
        r.sample_id: (DUALCOG_VIDEO, r)
        for r in load_jsonl(VideoRow, two_demo_runs[0]["video_qa"].read_bytes())
    }
    for sample_id, n, visuals, has_text, scores in results:
        assert visuals >= 2 and has_text, sample_id
        if n == 0:
            assert set(scores.values()) == {1.0}, (sample_id, scores)  # the gold reply
        fam, row = rows[sample_id]
        parsed = fam.parse(row, json.dumps(replies[sample_id][n]))
        theirs = fam.score(row, parsed, False)
        assert scores == {k: theirs[k] for k in scores}, (sample_id, n)


def _replies(out: dict[str, Path]) -> dict[str, list[dict[str, object]]]:
    """Per row, a perfect reply in skyqa's answer contract and one that is off in every part."""
    replies: dict[str, list[dict[str, object]]] = {}
    for line in out["image_qa"].read_text().splitlines():
        r = json.loads(line)
        box = r["answer_bbox_xyxy_norm"]
        other = next(o["option_id"] for o in r["label_options"] if o["option_id"] != r["answer_option_id"])
        replies[r["sample_id"]] = [
            {"answer_option_id": r["answer_option_id"], "bbox_xyxy_norm": box},
            {"answer_option_id": other, "bbox_xyxy_norm": [min(1.0, x + 0.1) for x in box]},
        ]
    for line in out["video_qa"].read_text().splitlines():
        r = json.loads(line)
        if r["form"] == "self_instance_recognition_joint":
            items = [
                {"option_id": a["option_id"], "intervals_sec": a["intervals_sec"]} for a in r["answer_items"]
            ]
            late = [
                {
                    "option_id": a["option_id"],
                    "intervals_sec": [[s + 1.0, e + 1.0] for s, e in a["intervals_sec"]],
                }
                for a in r["answer_items"][1:]
            ]
            replies[r["sample_id"]] = [{"answers": items}, {"answers": late}]
        else:
            gold = r["gold_environment_answer"]
            shifted = [[s + 0.5, e + 0.5] for s, e in gold["visible_intervals_sec"]]
            off = {"visible_count": gold["visible_count"] + 1, "visible_intervals_sec": shifted}
            replies[r["sample_id"]] = [dict(gold), off]
    return replies


def test_urbanvideo_bench_scripts_find_every_question_and_its_video(
    two_demo_runs: list[dict[str, Path]],
) -> None:
    """UrbanVideo-Bench's run script reads MCQ.parquet with pandas, opens each
    ``<videos folder>/<video_id>`` with OpenCV and sends the question text; its eval script
    compares the extracted letter with ``answer`` per ``question_category``. Here the release
    folder is the videos folder."""
    import cv2

    out = two_demo_runs[0]
    release = out["qc_report"].parent
    table = pd.read_parquet(out["navigation_urbanvideo"])
    assert list(table.columns) == ["Question_id", "video_id", "question_category", "question", "answer"]
    nav = [json.loads(line) for line in out["navigation_qa"].read_text().splitlines()]
    assert table["Question_id"].tolist() == [r["sample_id"] for r in nav]
    assert set(table["question_category"]) <= {
        "Trajectory Captioning", "Sequence Recall", "Object Recall", "Scene Recall", "Start/End Position",
        "Proximity", "Duration", "Landmark Position", "Goal Detection", "Cognitive Map", "Causal",
        "Counterfactual", "Association", "Progress Evaluation", "High-level Planning", "Action Generation",
    }  # fmt: skip
    for row, r in zip(table.to_dict("records"), nav, strict=True):
        video = cv2.VideoCapture(os.path.join(release, str(row["video_id"])))
        frames = 0
        while video.read()[0]:
            frames += 1
        video.release()
        assert frames == r["clip_end_frame"] + 1, row["video_id"]
        letters = [line.split(".")[0] for line in str(row["question"]).split("Choices:\n")[1].splitlines()]
        assert row["answer"] in letters


def test_the_croissant_metadata_validates_and_reads_every_row(two_demo_runs: list[dict[str, Path]]) -> None:
    mlc = pytest.importorskip("mlcroissant")
    out = two_demo_runs[0]
    release = out["qc_report"].parent
    ds = mlc.Dataset(jsonld=str(release / "croissant.json"))
    assert not ds.metadata.ctx.issues.errors, ds.metadata.ctx.issues.report()
    for name in ("image_qa", "video_qa", "navigation_qa"):
        records = list(ds.records(record_set=name))
        rows = [json.loads(line) for line in out[name].read_text().splitlines()]
        assert [r[f"{name}/sample_id"].decode() for r in records] == [r["sample_id"] for r in rows]


def test_every_json_file_of_a_release_carries_every_field_of_its_schema(
    two_demo_runs: list[dict[str, Path]],
) -> None:
    release = two_demo_runs[0]["qc_report"].parent
    problems: list[str] = []
    kinds: set[str] = set()
    for path in sorted(release.rglob("*.json*")):
        rel = path.relative_to(release).as_posix()
        if not integrity.is_released(rel):
            continue
        known, schema = schema_of(rel)
        if not known:
            problems.append(f"{rel}: no schema in tests/release_schemas.py")
            continue
        kinds.add(str(schema))
        if schema is None:
            continue
        text = path.read_text()
        docs = (
            [json.loads(line) for line in text.splitlines() if line.strip()]
            if rel.endswith(".jsonl")
            else [json.loads(text)]
        )
        for doc in docs:
            if isinstance(schema, type) and issubclass(schema, Message):
                problems += [f"{rel}: {m}" for m in proto_missing(schema, doc)]
                continue
            items = doc.get("samples", doc.get("results", [doc]))
            for item in items:
                problems += [f"{rel}: {m}" for m in missing(schema, item, "")]
    assert not problems, problems[:20]
    assert len(kinds) >= 25  # the demo release has every kind the table knows


def test_the_dualcog_manifests_of_a_release_carry_every_field_the_reference_reads(
    two_demo_runs: list[dict[str, Path]],
) -> None:
    out = two_demo_runs[0]
    image = json.loads(out["image_dualcog_latest"].read_text())
    video = json.loads(out["video_dualcog_latest"].read_text())
    assert len(image["samples"]) == len(out["image_qa"].read_text().splitlines())
    assert len(video["samples"]) == len(out["video_qa"].read_text().splitlines())
    for s in image["samples"]:
        assert set(s) >= IMAGE_REQUIRED | IMAGE_READ, (IMAGE_REQUIRED | IMAGE_READ) - set(s)
        assert isinstance(s["metadata"]["reference_is_main_view"], bool) and s["metadata"]["reference_label"]
    for s in video["samples"]:
        assert set(s) >= VIDEO_REQUIRED | VIDEO_READ, (VIDEO_REQUIRED | VIDEO_READ) - set(s)
        assert all(set(i) == {"start_sec", "end_sec"} for i in s["visible_intervals_sec"])
        assert all(i["end_sec"] > i["start_sec"] for i in s["visible_intervals_sec"])
        labels = {o["option_id"]: o["label"] for o in s["choice_options"]}
        for a in s["answer_items"]:
            # the reference splits composite from atomic answers by these words when it cannot
            # rebuild skyqa's labels
            composite = a["label"].startswith("a ") and "mission" in a["label"]
            assert labels[a["option_id"]] == a["label"]
            assert bool(COMPOSITE_WORDS.search(a["label"])) == composite, a["label"]


def _fake_dualcog_checkout(path: Path) -> Path:
    # what marks a reference checkout: its two runners (their content does not matter here)
    for rel in (
        "scripts/uav_dualcog/stage4_qa_generate_and_eval.py",
        "scripts/uav_dualcog/stage3_task_suite.py",
    ):
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text("# the reference's runner\n")
    (path / "configs/uav_dualcog").mkdir(parents=True)
    return path


def test_export_dualcog_lays_the_release_where_the_reference_runners_read_it(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path
) -> None:
    release = two_demo_runs[0]["qc_report"].parent
    info = json.loads((release / "release.json").read_text())
    scene = info["scene_id"]
    checkout = _fake_dualcog_checkout(tmp_path / "UAV-DualCog")
    done = skyqa("export", "dualcog", str(release), "--into", str(checkout))
    assert done.returncode == 0, done.stderr
    image = json.loads((release / "image_tasks/manifests" / f"{scene}.latest_manifest.json").read_text())
    engine = image["engine"]
    config = yaml.safe_load((checkout / f"configs/uav_dualcog/task_{engine}_{scene}.yaml").read_text())
    # the reference's _resolve_stage4_root / _resolve_stage3_layout with this config
    art = (
        checkout
        / config["task_pipeline"]["root_dir"]
        / config["task_pipeline"]["task_name"]
        / f"{engine}_{scene}"
    )
    stage4 = art / config["output_layout"]["stage4_qa_dir"] / "manifests"
    stage3 = (
        art / config["output_layout"]["stage3_task_root_dir"] / config["output_layout"]["stage3_dataset_dir"]
    )
    for folder, listed in ((stage4, f"{scene}_qa_manifest_release.json"), (stage3, f"{scene}_release.json")):
        assert (folder / f"{scene}.latest_manifest.json").read_bytes() == (folder / listed).read_bytes()
    exported = json.loads((stage4 / f"{scene}.latest_manifest.json").read_text())
    assert len(exported["samples"]) == len(image["samples"]) > 0
    for s in exported["samples"]:
        # Stage 4's _build_openai_messages opens <checkout root>/<path>
        paths = [s["reference_image_with_bbox"], *([s["target_image"]] if s.get("target_image") else [])]
        paths += [c["image"] for c in s.get("candidates") or []]
        for p in paths:
            assert (checkout / p).is_file(), p
            assert (checkout / p).read_bytes() == (release / p.split(f"{engine}_{scene}/", 1)[1]).read_bytes()
    video = json.loads((stage3 / f"{scene}.latest_manifest.json").read_text())
    assert len(video["samples"]) == len(two_demo_runs[0]["video_qa"].read_text().splitlines())
    for s in video["samples"]:
        # Stage 3 opens the paths relative to the working directory: the checkout root
        for key in ("video_path", "video_web_path", "reference_image_with_bbox"):
            assert (checkout / s[key]).is_file(), s[key]
    base = checkout / config["task"]["base_dir"] / config["task"]["scene_dir_name"]
    valid = json.loads((base / "landmarks_review" / f"{scene}.valid_instances.json").read_text())
    views = [v["path"] for x in valid["valid_instances"] for v in x["rgb_views"]]
    assert views and all((checkout / p).is_file() for p in views)
    missions = {s["mission_id"] for s in video["samples"]}
    assert all((art / "video_tasks/missions" / m / "final_task/task_data.json").is_file() for m in missions)
    # media are links into the release, text files are copies the reference may write beside
    media = checkout / exported["samples"][0]["reference_image_with_bbox"]
    assert media.is_symlink() and media.resolve().is_relative_to(release.resolve())
    assert not (stage4 / f"{scene}.latest_manifest.json").is_symlink()
    # the reference writes its outputs beside the export; exporting again keeps them
    report = art / "image_tasks/experiments/run1/report.json"
    report.parent.mkdir(parents=True)
    report.write_text("{}")
    again = skyqa("export", "dualcog", str(release), "--into", str(checkout), "--copy")
    assert again.returncode == 0, again.stderr
    assert report.read_text() == "{}" and not media.is_symlink() and media.read_bytes()
    assert integrity.verify(release)[1] == []


def test_export_dualcog_refuses_a_folder_that_is_not_a_checkout_or_files_it_did_not_write(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path
) -> None:
    release = two_demo_runs[0]["qc_report"].parent
    plain = tmp_path / "plain"
    plain.mkdir()
    bad = skyqa("export", "dualcog", str(release), "--into", str(plain))
    assert bad.returncode == 2 and "is not a UAV-DualCog checkout" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not any(plain.iterdir())
    checkout = _fake_dualcog_checkout(tmp_path / "UAV-DualCog")
    scene = json.loads((release / "release.json").read_text())["scene_id"]
    engine = json.loads((release / "image_tasks/manifests" / f"{scene}.latest_manifest.json").read_text())[
        "engine"
    ]
    theirs = checkout / f"configs/uav_dualcog/task_{engine}_{scene}.yaml"
    theirs.write_text("task: {scene_id: mine}\n")
    refused = skyqa("export", "dualcog", str(release), "--into", str(checkout))
    assert refused.returncode == 2 and "was not written by skyqa" in refused.stderr
    assert theirs.read_text() == "task: {scene_id: mine}\n"
    theirs.unlink()
    manifest = (
        checkout
        / f"task_pipeline_data/skyqa/{engine}_{scene}/image_tasks/manifests/{scene}.latest_manifest.json"
    )
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    refused = skyqa("export", "dualcog", str(release), "--into", str(checkout))
    assert refused.returncode == 2 and "did not write it" in refused.stderr
    assert manifest.read_text() == "{}" and not theirs.exists()


def _tampered_copy(release: Path, where: Path, rel: str, change: Any) -> Path:
    """A copy of ``release`` whose JSON file ``rel`` is ``change``d and resealed: its
    SHA256SUMS line rewritten, so the integrity check alone passes it."""
    copied = where / "release"
    shutil.copytree(release, copied, symlinks=True)
    doc = json.loads((copied / rel).read_text())
    change(doc)
    data = (json.dumps(doc, indent=1) + "\n").encode()
    (copied / rel).write_bytes(data)
    sums = copied / integrity.SUMS
    lines = sums.read_text().splitlines(keepends=True)
    resealed = [
        f"{hashlib.sha256(data).hexdigest()}  {rel}\n" if line.endswith(f"  {rel}\n") else line
        for line in lines
    ]
    assert resealed != lines
    sums.write_text("".join(resealed))
    assert integrity.verify(copied)[1] == []
    return copied


def _files_under(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _set_first(field: str, value: str, *into: str) -> Any:
    """A change setting ``field`` of the first row reached through the lists ``into`` (the first
    that has the next list) to ``value``."""

    def change(doc: Any) -> None:
        rows = doc[into[0]]
        for name in into[1:]:
            rows = next(r[name] for r in rows if r.get(name))
        rows[0][field] = value

    return change


@pytest.mark.parametrize(
    ("manifest", "change", "reason"),
    [
        (
            "image_tasks/manifests/{scene}.latest_manifest.json",
            _set_first("reference_image", "/root/.ssh/id_rsa", "samples"),
            r"row samples\[0\] \(\S+\), field reference_image names '/root/.ssh/id_rsa', not a file of the release",
        ),
        (
            "image_tasks/manifests/{scene}.latest_manifest.json",
            _set_first("image", "image_tasks/../../../../etc/passwd", "samples", "candidates"),
            r"field candidates\[0\].image names 'image_tasks/../../../../etc/passwd', not a file",
        ),
        (
            "video_tasks/datasets/{scene}.latest_manifest.json",
            _set_first("video_path", "video_tasks/missions/nowhere.mp4", "samples"),
            r"field video_path names 'video_tasks/missions/nowhere.mp4', not a file of the release",
        ),
        (
            "scene_data/{scene}/landmarks_review/{scene}.valid_instances.json",
            _set_first("path", "/root/.ssh/id_rsa", "valid_instances", "rgb_views"),
            r"row valid_instances\[0\] \(\S+\), field rgb_views\[0\].path names '/root/.ssh/id_rsa'",
        ),
    ],
)
def test_export_dualcog_refuses_a_manifest_path_that_is_not_a_file_of_the_release(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path, manifest: str, change: Any, reason: str
) -> None:
    """A resealed release whose manifest names a file outside it (absolute, '..', unknown) is
    refused before anything is written: the reference would open that file and send it to a
    model endpoint."""
    release = two_demo_runs[0]["qc_report"].parent
    scene = json.loads((release / "release.json").read_text())["scene_id"]
    rel = manifest.format(scene=scene)
    if rel.startswith("video_tasks/datasets/") and not two_demo_runs[0]["video_qa"].read_text().strip():
        pytest.skip("this demo release ships no DualCog video rows to tamper with")
    tampered = _tampered_copy(release, tmp_path, rel, change)
    checkout = _fake_dualcog_checkout(tmp_path / "UAV-DualCog")
    before = _files_under(checkout)
    refused = skyqa("export", "dualcog", str(tampered), "--into", str(checkout))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"the release's {rel}, " in refused.stderr and re.search(reason, refused.stderr), refused.stderr
    assert _files_under(checkout) == before and not (checkout / "task_pipeline_data").exists()


def test_export_dualcog_refuses_a_release_that_does_not_verify(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path
) -> None:
    release = two_demo_runs[0]["qc_report"].parent
    copied = tmp_path / "release"
    shutil.copytree(release, copied, symlinks=True)
    scene = json.loads((release / "release.json").read_text())["scene_id"]
    rel = f"image_tasks/manifests/{scene}.latest_manifest.json"
    doc = json.loads((copied / rel).read_text())
    doc["samples"][0]["reference_image"] = "/root/.ssh/id_rsa"
    (copied / rel).write_text(json.dumps(doc))  # not resealed
    checkout = _fake_dualcog_checkout(tmp_path / "UAV-DualCog")
    before = _files_under(checkout)
    refused = skyqa("export", "dualcog", str(copied), "--into", str(checkout))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"the release does not verify: {rel}: changed" in refused.stderr, refused.stderr
    assert _files_under(checkout) == before


@pytest.mark.parametrize(
    "scene_id", ["tiny_town\nevil: injected", "tiny_town\ntask_pipeline: {root_dir: /}", "..", " x"]
)
def test_export_dualcog_refuses_a_scene_id_that_is_not_an_id(
    two_demo_runs: list[dict[str, Path]], tmp_path: Path, scene_id: str
) -> None:
    """release.json's scene id names the config file and is written into it: a scene id with a
    line break would inject keys into the config the reference reads."""
    release = two_demo_runs[0]["qc_report"].parent
    tampered = _tampered_copy(release, tmp_path, "release.json", lambda doc: doc.update(scene_id=scene_id))
    checkout = _fake_dualcog_checkout(tmp_path / "UAV-DualCog")
    before = _files_under(checkout)
    refused = skyqa("export", "dualcog", str(tampered), "--into", str(checkout))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert (
        "the release's scene id" in refused.stderr and "must start with a letter or digit" in refused.stderr
    )
    assert _files_under(checkout) == before and not any((checkout / "configs/uav_dualcog").iterdir())


def test_the_reference_code_scores_gold_replies_on_an_exported_checkout(
    two_demo_runs: list[dict[str, Path]],
) -> None:
    reference = os.environ.get("SKYQA_DUALCOG_REFERENCE", "")
    if not reference or not Path(reference, "scripts/uav_dualcog/stage4_qa_generate_and_eval.py").is_file():
        pytest.skip("set SKYQA_DUALCOG_REFERENCE to a checkout of SmartDianLab/UAV-DualCog")
    release = two_demo_runs[0]["qc_report"].parent
    script = Path(__file__).parents[2] / "scripts/dualcog_reference_check.py"
    done = subprocess.run(
        [sys.executable, str(script), "--reference", reference, "--release", str(release)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "ok   stage 4 runner: option_accuracy of gold answers 1.0" in done.stdout
