"""Render only what ships: tiny_town's whole release-profile scan (every candidate), one process
per service, to the end of the QA stage, counting what the stages after the review render
against what the code before working sizes and held landmarks rendered for the same run, and
checking every still shipped at 4096x3072 against a direct render of its recorded pose.

The previous code flew two missions for every reviewed landmark, rendered every valid view of
every reviewed landmark at the shipped size and every planned environment observation at the
shipped size; this run's own records (the review, the mission plan, the QA plan) say how many
those were, so the ratios compare the two paths on exactly the same landmarks. Mission videos
are 480x360 here, to keep the run short: their count, not their size, is what changed.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image
from skyqa import keys, scan
from skyqa.blob import LocalBlobStore
from skyqa.contracts import ValidInstancesFile, load_json
from skyqa.contracts.missions import MissionIndex
from skyqa.contracts.qa import EnvRequest, ViewRequest
from skyqa.sim import BuiltinSimulator, load_scene

from bench.release import release_request
from bench.scaling import FleetRun, fleet_run
from services.qa_generator.assets import render_env, render_view


def identical_to_direct_renders(
    root: Path, views: list[dict[str, Any]], observations: list[dict[str, Any]], scene_id: str
) -> dict[str, int]:
    """Each request's stored JPEG and segmentation against a direct render of its recorded pose
    at its recorded size (the refresh path's, into a scratch store), byte for byte."""
    sim = BuiltinSimulator(load_scene(scene_id))
    same = 0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = LocalBlobStore(tmp)
        rendered: list[ViewRequest | EnvRequest] = []
        for v in views:
            rendered.append(view := ViewRequest.model_validate(v))
            render_view(scratch, "direct", view, sim)
        for o in observations:
            rendered.append(env := EnvRequest.model_validate(o))
            render_env(scratch, "direct", env, sim)
        for r in rendered:
            paths = r.output_image, r.output_segmentation
            same += all((root / f).read_bytes() == scratch.get(f"direct/{f}") for f in paths)
    return {"checked": len(rendered), "identical": same}


def _inspect(run: FleetRun, run_id: str) -> dict[str, Any]:
    store = LocalBlobStore(run.store)
    full = scan.stored(store, run_id)
    size = scan.stills(full)
    root = run.store / keys.run_prefix(run_id)
    sidecar = json.loads(next((root / "image_tasks" / "render_requests").glob("*.json")).read_text())
    plan = json.loads((run.store / keys.mission_plan(run_id)).read_text())
    index = load_json(MissionIndex, (run.store / keys.missions_index(run_id)).read_bytes())
    reviewed = load_json(ValidInstancesFile, (run.store / plan["valid_instances"]).read_bytes())
    landmarks = reviewed.valid_instances
    env_shipped = sidecar["env_requests"]  # the ones rendered at the shipped size
    env_planned = len(sidecar["first_looks"] or env_shipped)
    views_before = sum(1 for vi in landmarks for v in vi.rgb_views if v.is_valid)
    released = int(run.qc()["funnel"]["released_landmarks"])
    mean_mission_s = sum(m.duration_sec for m in index.missions) / max(1, len(index.missions))
    now = len(sidecar["views"]) + len(env_shipped)
    share = size.working_width * size.working_height / (size.width * size.height)
    before = views_before + env_planned
    return {
        "status": "failed" if run.state.status == "failed" else "QA stage completed",
        "stage_wall_s": run.stage_wall_s(),
        "reviewed_landmarks": len(landmarks),
        "held_landmarks": plan["held"],
        "released_landmarks": released,
        "missions_planned": {
            "now": len(plan["missions"]) + len(plan["rejected"]),
            "before": 2 * len(landmarks),
        },
        # the held landmarks' missions, at this run's mean length, as release-profile video
        "mission_video_s_avoided": round(2 * len(plan["held"]) * mean_mission_s, 1),
        "shipped_views": {"now": len(sidecar["views"]), "before": views_before},
        "env_observations_shipped": {"now": len(env_shipped), "before": env_planned},
        # first looks cost a working-size render each, counted here in shipped-size renders
        "env_first_looks_in_shipped_renders": round(len(sidecar["first_looks"]) * share, 2),
        "shipped_stills_per_released_landmark": {
            "now": round(now / max(1, released), 2),
            "before": round(before / max(1, released), 2),
        },
        "stills_ratio_before_vs_now": round(before / max(1, now), 2),
        "identical_to_direct_render": identical_to_direct_renders(
            root, sidecar["views"], env_shipped, full.scene_id
        ),
        "released_image_rows": released_stills(root, full.scene_id, sidecar, size),
    }


def released_stills(root: Path, scene_id: str, sidecar: dict[str, Any], size: scan.Stills) -> dict[str, int]:
    """The stills the released image rows show: each one checked above, or a reference overlay
    drawn on one, and each at the shipped size (read from its header)."""
    checked = {r["output_image"] for r in sidecar["views"] + sidecar["env_requests"]}
    drawn = {o["output_image"]: o["source_image"] for o in sidecar["overlays"]}
    rows = [json.loads(x) for x in (root / f"image_tasks/manifests/{scene_id}.image_qa.jsonl").open()]
    shown = {p for r in rows for p in r["images"] + [r["reference_image"], r["target_image"]]}
    covered = sum(p in checked or drawn.get(p) in checked for p in shown)
    sized = 0
    for p in shown:
        with Image.open(root / p) as img:
            sized += img.size == (size.width, size.height)
    return {
        "rows": len(rows),
        "stills": len(shown),
        "checked_or_drawn_on_checked": covered,
        "at_shipped_size": sized,
    }


def shipping_run() -> dict[str, Any]:
    req = release_request(50, "ship")  # more than tiny_town's candidates: every one of them
    req.video.width, req.video.height = 480, 360
    return fleet_run(req, lambda run: _inspect(run, req.run_id), until="qa")


def shipping_problems(r: dict[str, Any]) -> list[str]:
    """What makes the run's shipped stills wrong (the bench exits non-zero on any)."""
    same, rows = r["identical_to_direct_render"], r["released_image_rows"]
    out = []
    if same["identical"] != same["checked"]:
        out.append(f"{same['checked'] - same['identical']} shipped stills differ from a direct render")
    if rows["checked_or_drawn_on_checked"] != rows["stills"]:
        out.append("released image rows show stills that were not checked")
    if rows["at_shipped_size"] != rows["stills"]:
        out.append("released image rows show stills below the shipped size")
    return out


def shipping_lines(r: dict[str, Any]) -> list[str]:
    m, v, e, p = (
        r["missions_planned"],
        r["shipped_views"],
        r["env_observations_shipped"],
        r["shipped_stills_per_released_landmark"],
    )
    same, rows = r["identical_to_direct_render"], r["released_image_rows"]
    return [
        f"render only what ships (tiny_town, every candidate, release profile, 480x360 missions; "
        f"{r['status']}): {r['reviewed_landmarks']} reviewed landmarks, {len(r['held_landmarks'])} "
        f"held, {r['released_landmarks']} released",
        f"  missions planned: {m['now']} (previous code {m['before']}; "
        f"{r['mission_video_s_avoided']} s of video not rendered)",
        f"  landmark views at 4096x3072: {v['now']} (previous code {v['before']}); env observations "
        f"at 4096x3072: {e['now']} (previous code {e['before']}), plus first looks worth "
        f"{r['env_first_looks_in_shipped_renders']} of them",
        f"  4096x3072 stills per released landmark: {p['now']} (previous code {p['before']}; "
        f"{r['stills_ratio_before_vs_now']}x fewer)",
        f"  shipped 4096x3072 stills byte-identical to a direct render of their recorded pose: "
        f"{same['identical']} of {same['checked']}; the {rows['rows']} released image rows show "
        f"{rows['stills']} stills, {rows['checked_or_drawn_on_checked']} of them checked (or an overlay "
        f"drawn on one) and {rows['at_shipped_size']} at 4096x3072",
        "  stage wall time (s): " + json.dumps(r["stage_wall_s"]),
    ]


if __name__ == "__main__":
    result = shipping_run()
    print("\n".join(shipping_lines(result)))
    print(json.dumps(result, indent=1))
    if problems := shipping_problems(result):
        raise SystemExit("; ".join(problems))
