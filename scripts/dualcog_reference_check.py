"""Read a skyqa release with UAV-DualCog's own loaders and score its gold answers with UAV-DualCog's
own metric code.

    python scripts/dualcog_reference_check.py --reference <UAV-DualCog checkout> --release runs/<run>

The reference (public repository SmartDianLab/UAV-DualCog) resolves image paths against its
checkout root and video paths against the working directory, and finds a scene's files through
its config. So the check works in a scratch copy of the checkout (the checkout itself is not
touched): ``skyqa export dualcog`` lays the release into it as a user's checkout gets it, and the
check runs from there. The reference's Stage 4 runner (``run_experiment``: manifest, images
opened from the checkout, requests, parsing, report) and its Stage 3 request function are then
fed replies that repeat each row's gold answer in the reply format its prompts ask for, through a
stand-in for the OpenAI client (nothing leaves the machine), and its summaries must come out at
1.0.

Needs what the reference imports (numpy, opencv, PyYAML, Pillow, Flask); ``openai`` is not
needed. Exits 0 when every check holds, 1 naming each one that does not.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

from skyqa.exports import dualcog
from skyqa.exports.release import Release
from skyqa.integrity import verify as integrity_check

ENGINE_TASK = "skyqa"
VIS = "env_visibility_reasoning"


class GoldClient:
    """Stands in for ``openai.OpenAI``: answers a request with the reply set for its messages
    (the runner sends requests from worker threads, so each reply is keyed by what it answers),
    else with the last reply set."""

    reply = ""
    replies: ClassVar[dict[str, str]] = {}

    def __init__(self, **_: Any) -> None:
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    @staticmethod
    def key(messages: Any) -> str:
        return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()

    def _create(self, **kwargs: Any) -> Any:
        text = GoldClient.replies.get(GoldClient.key(kwargs.get("messages")), GoldClient.reply)
        message = SimpleNamespace(content=text, reasoning_content=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)], usage=None)


def image_reply(s: dict[str, Any]) -> str:
    ids = s.get("answer_option_ids") or [s["answer_option_id"]]
    key = {"answer_option_ids": ids} if len(ids) > 1 else {"answer_option_id": ids[0]}
    return json.dumps(key | {"bbox_xyxy_norm": s["answer_bbox_xyxy_norm"]})


def video_reply(s: dict[str, Any]) -> str:
    if s["form"] == "self_instance_recognition_joint":
        items = [
            {"option_id": a["option_id"], "intervals_sec": a["intervals_sec"]} for a in s["answer_items"]
        ]
        return json.dumps({"answers": items})
    ivs = [[i["start_sec"], i["end_sec"]] for i in s["visible_intervals_sec"]]
    return json.dumps({"visible_count": s["visible_count"], "visible_intervals_sec": ivs})


def workspace(reference: Path, release: Path) -> tuple[Path, dualcog.Layout]:
    """A scratch copy of the reference with the release exported into it as ``skyqa export
    dualcog`` does for a user: the reference writes caches and reports next to what it reads."""
    ws = Path(tempfile.mkdtemp(prefix="dualcog-check-"))
    shutil.copytree(reference, ws, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))
    opened = Release.open(release)
    dualcog.write(opened, ws)
    return ws, dualcog.layout_of(opened)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", type=Path, required=True, help="a checkout of SmartDianLab/UAV-DualCog")
    ap.add_argument("--release", type=Path, required=True, help="a skyqa release folder (runs/<run>/)")
    args = ap.parse_args()
    release = args.release.resolve()
    ws, lay = workspace(args.reference.resolve(), release)
    try:
        return check_release(ws, release, lay)
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def check_release(ws: Path, release: Path, lay: dualcog.Layout) -> int:
    os.chdir(ws)  # Stage 3 opens media by paths relative to the working directory
    sys.path[:0] = [str(ws), str(ws / "scripts" / "uav_dualcog")]
    s4 = importlib.import_module("stage4_qa_generate_and_eval")  # before stage3, which relies on it
    s3 = importlib.import_module("stage3_task_suite")
    s4.OpenAI = s3.OpenAI = GoldClient
    scene, engine = lay.scene, lay.engine.lower()
    config = s4._load_yaml(ws / lay.config)  # the config the export wrote, as the runners load it
    overrides = {"api_key": "EMPTY", "api_base": "http://127.0.0.1:9/v1", "concurrency": 4}
    api = {
        "model": "gold",
        "request_model": "gold",
        "api_key": "EMPTY",
        "api_base": "http://127.0.0.1:9/v1",
        "temperature": 0.0,
        "timeout_s": 5,
        "request_retry_attempts": 1,
    }
    failures: list[str] = []

    def check(what: str, ok: bool, detail: object = "") -> None:
        print(f"{'ok  ' if ok else 'FAIL'} {what} {detail}")
        if not ok:
            failures.append(what)

    scene_root = s4.resolve_scene_root(config, scene_id=scene, engine=engine, workspace_root=ws)
    stage4_root = s4._resolve_stage4_root(config, scene_root=scene_root)
    path, manifest = s4._load_latest_manifest(stage4_root, scene)
    check("stage 4: latest manifest found", manifest is not None, path)
    check("stage 4: manifest listed", len(s4._list_manifests(stage4_root, scene)) > 0)
    valid = s4._load_valid_instances(config, scene_root=scene_root, scene_id=scene)
    released = {s["landmark_id"] for s in (manifest or {}).get("samples", [])}
    kept = {v["instance_id"] for v in valid}
    check(
        "valid_instances: every released landmark kept with its views", released <= kept, f"{len(kept)} kept"
    )
    queries = [
        any(v.get("is_query_view") for v in x["rgb_views"]) for x in valid if x["instance_id"] in released
    ]
    check("valid_instances: a query view per released landmark", all(queries))
    rows = []
    for s in (manifest or {}).get("samples", []):
        GoldClient.reply = image_reply(s)
        _, out = s4._run_single_sample_request(s, api_cfg=api, cancel_event=None, limiter=s4.ApiRateLimiter())
        rows.append(out["parsed"])
    summary = s4._summarize_predictions(rows)
    for metric in ("option_accuracy", "bbox_acc@50iou", "bbox_mean_iou", "parse_success_rate"):
        check(
            f"stage 4: {metric} of gold answers",
            abs(float(summary.get(metric) or 0) - 1) < 1e-6,
            summary.get(metric),
        )

    # the runner a user runs (task_pipeline.py --stage stage4 --phase experiment calls it): it
    # opens every image from the checkout, asks, parses and writes its report
    samples = (manifest or {}).get("samples", [])
    run_api = s4._resolve_api_settings(config, override_model="gold", overrides=overrides)
    GoldClient.replies = {
        GoldClient.key(s4._build_openai_messages(s, run_api)[0]): image_reply(s) for s in samples
    }
    GoldClient.reply = ""
    result = s4.run_experiment(
        config=config,
        scene_id=scene,
        engine=engine,
        manifest_path=Path(str(path)),
        override_model="gold",
        api_overrides=overrides,
    )
    summary = result["report"]["summary"]
    check("stage 4 runner: every request sent", summary.get("count") == len(samples), summary.get("count"))
    for metric in ("option_accuracy", "bbox_acc@50iou", "parse_success_rate"):
        check(
            f"stage 4 runner: {metric} of gold answers",
            abs(float(summary.get(metric) or 0) - 1) < 1e-6,
            summary.get(metric),
        )

    layout = s3._resolve_stage3_layout(config, scene, engine)
    listed = s3._list_manifests(layout, scene)
    check("stage 3: manifest listed", len(listed) > 0, layout["datasets_root"])
    video = json.loads((layout["datasets_root"] / f"{scene}.latest_manifest.json").read_text())
    candidates, _ = s3._discover_candidates(config, scene_id=scene, engine=engine)
    missions = {s["mission_id"] for s in video["samples"]}
    found = {c.get("mission_id") or c.get("traj_id") for c in candidates}
    check("stage 3: every released mission bundle discovered", missions <= found, f"{len(found)} found")
    rows = []
    for s in video["samples"]:
        GoldClient.reply = video_reply(s)
        _, out = s3._run_single_sample_request(s, api_cfg=api, limiter=s4.ApiRateLimiter(), cancel_event=None)
        rows.append(out["parsed"])
    summary = s3._summarize_predictions(rows, include_grouped=False)
    # the reference's segment P/R give a row with no gold interval 0 whatever the answer, so a
    # never-visible row (count 0) cannot score there; segment F1 is checked on the other rows
    seen = [
        r
        for r, s in zip(rows, video["samples"], strict=True)
        if s["visible_intervals_sec"] or s["form"] != VIS
    ]
    never = sum(1 for s in video["samples"] if s["form"] == VIS and not s["visible_intervals_sec"])
    segments = s3._summarize_predictions(seen, include_grouped=False)
    for metric, value in (
        ("set_instance_acc", summary.get("set_instance_acc")),
        ("element_instance_f1", summary.get("element_instance_f1")),
        ("self_temporal_loc_f1@0.5", summary.get("self_temporal_loc_f1@0.5")),
        ("self_temporal_loc_mean_tIoU", summary.get("self_temporal_loc_mean_tIoU")),
        ("count_exact_acc", summary.get("count_exact_acc")),
        ("segment_f1@0.5", segments.get("segment_f1@0.5")),
        ("mean_best_tIoU", summary.get("mean_best_tIoU")),
        ("parse_success_rate", summary.get("parse_success_rate")),
    ):
        check(f"stage 3: {metric} of gold answers", abs(float(value or 0) - 1) < 1e-6, value)
    _, changed = integrity_check(release)
    check("the release is untouched (SHA256SUMS)", not changed, changed[:3])
    every = summary.get("segment_f1@0.5")
    print(
        f"note stage 3: segment_f1@0.5 over all rows is {every}: {never} never-visible row(s), which "
        "the reference's segment metric scores 0 whatever the answer"
    )
    print(f"{len(failures)} of the checks failed" if failures else "every check holds")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
