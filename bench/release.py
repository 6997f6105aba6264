"""A release-profile run of a stated subset of tiny_town, one process per service: each stage's
wall time, its rendering rate as a ratio of the same run's ray-cast ceiling, the cost of each
unit of work, and what a release the size of UAV-DualCog's would cost on this machine.

The subset: the release profile's media (4096x3072 JPEG-80 stills, 1440x1080 10 Mb/s video,
128-channel LiDAR, 5 cm fusion voxels) over the whole of tiny_town, with ``LANDMARKS``
candidates given views and no navigation flights, UAV groups, action trajectories or surveys
(UAV-DualCog has none of them). The estimate (README, Performance) is

    wall = scenes x scene_s + candidates x candidate_s + landmarks x landmark_s
           + missions x mission_seconds x mission_s_per_video_s
    core-hours = wall x cores_busy / 3600

with each ``*_s`` a stage's wall time over its units here, ``mission_seconds`` the mean video
length of this run's missions, and ``cores_busy`` the CPU seconds of every service over the
run's wall time.
"""

from __future__ import annotations

import json
from typing import Any

from skyqa import keys, scan
from skyqa.blob import LocalBlobStore
from skyqa.contracts.missions import MissionIndex

from bench.scaling import FleetRun, fleet_run

LANDMARKS = 2
CANDIDATES = 12  # for the landmark stage's two paths: enough that per-candidate work dominates
# UAV-DualCog's release (its paper and web page): 12 AirSim scenes, 2,626 candidate instances,
# 512 released landmarks, 4,096 image and 2,048 video rows from 1,024 flight missions
DUALCOG = {"scenes": 12, "candidates": 2626, "landmarks": 512, "missions": 1024}


def _rate(units: int, pixels: int, wall: float, ceiling: float) -> dict[str, float]:
    per_s = units / wall if wall > 0 else 0.0
    return {
        "units": units,
        "per_s": round(per_s, 3),
        "ratio_of_ceiling_per_pixel": round(per_s * pixels / ceiling, 3) if ceiling else 0.0,
    }


def release_run(ceiling_rays_per_s: float, landmarks: int = LANDMARKS) -> dict[str, Any]:
    from skyqa.scan_options import build_request

    req = build_request(
        "tiny_town", "release", None, None, None, None, 0,
        landmarks=landmarks, navigation="0,0", groups="0", reasoning="0", surveys="0",
    )  # fmt: skip

    def inspect(run: FleetRun) -> dict[str, Any]:
        full = scan.stored(LocalBlobStore(run.store), req.run_id)
        root = run.store / keys.run_prefix(req.run_id)
        plan = json.loads((run.store / keys.landmark_plan(req.run_id, req.scene_id)).read_text())
        views = sum(len(c["views"]) for c in plan["candidates"])
        index = MissionIndex.model_validate_json((run.store / keys.missions_index(req.run_id)).read_text())
        requests = next((root / "image_tasks" / "render_requests").glob("*.json"))
        sidecar = json.loads(requests.read_text())
        env, shipped = len(sidecar["env_requests"]), len(sidecar.get("views", []))
        frames = sum(1 for _ in (run.store / keys.frames_manifest(req.run_id, req.scene_id)).open())
        qc = run.qc()
        walls = run.stage_wall_s()
        size = scan.stills(full)
        video_frames = sum(m.frame_count for m in index.missions)
        mission_s = sum(m.duration_sec for m in index.missions)
        released = int(qc["funnel"]["released_landmarks"])
        cores = sum(run.cpu_s.values()) / run.wall_s
        per = {
            "scene_s": walls.get("capture", 0.0) + walls.get("fusion", 0.0),
            "candidate_s": walls.get("landmark", 0.0) / max(1, len(plan["candidates"])),
            # the QA stage and its views step (the released landmarks' views at the shipped size)
            "landmark_s": (walls.get("qa", 0.0) + walls.get("views", 0.0)) / max(1, released),
            "mission_s_per_video_s": walls.get("mission", 0.0) / max(1e-9, mission_s),
        }
        mean_mission_s = mission_s / max(1, len(index.missions))
        wall = (
            DUALCOG["scenes"] * per["scene_s"]
            + DUALCOG["candidates"] * per["candidate_s"]
            + DUALCOG["landmarks"] * per["landmark_s"]
            + DUALCOG["missions"] * mean_mission_s * per["mission_s_per_video_s"]
        )
        return {
            "subset": f"tiny_town, release profile, {landmarks} candidates, no navigation, groups, "
            "trajectories or surveys",
            "status": run.state.status,
            "wall_s": round(run.wall_s, 1),
            "stage_wall_s": walls,
            "cpu_s": run.cpu_s,
            "cores_busy": round(cores, 2),
            "units": {
                "capture_frames": frames,
                "candidates": len(plan["candidates"]),
                "landmark_views": views,
                "shipped_views": shipped,
                "released_landmarks": released,
                "env_observations": env,
                "missions": len(index.missions),
                "mission_video_s": round(mission_s, 1),
                "video_frames": video_frames,
            },
            "rates": {
                "capture": _rate(
                    frames,
                    full.camera.width * full.camera.height,
                    walls.get("capture", 0),
                    ceiling_rays_per_s,
                ),
                "landmark_views": _rate(
                    views,
                    size.working_width * size.working_height,
                    walls.get("landmark", 0),
                    ceiling_rays_per_s,
                ),
                "shipped_views": _rate(
                    shipped, size.width * size.height, walls.get("views", 0), ceiling_rays_per_s
                ),
                "qa_env_observations": _rate(
                    env, size.width * size.height, walls.get("qa", 0), ceiling_rays_per_s
                ),
                "mission_frames": _rate(
                    video_frames,
                    full.video.width * full.video.height,
                    walls.get("mission", 0),
                    ceiling_rays_per_s,
                ),
            },
            "per_unit_s": {k: round(v, 2) for k, v in per.items()},
            "dualcog_size": {
                **DUALCOG,
                "mean_mission_video_s": round(mean_mission_s, 1),
                "wall_hours_here": round(wall / 3600, 1),
                "core_hours": round(wall * cores / 3600, 1),
            },
        }

    return fleet_run(req, inspect)


def landmark_stage(candidates: int = CANDIDATES) -> dict[str, Any]:
    """The landmark stage of one release-profile scan of tiny_town (``candidates`` candidates)
    two ways in this bench run: views rendered and checked at the shipped 4096x3072 (the path
    before working sizes) and at the 1024x768 working size (the reviewed landmarks' views are
    rendered at 4096x3072 later, in the QA stage's ``views`` step; ``release_run`` times it)."""
    from skyqa.scan_options import build_request

    walls: dict[str, float] = {}
    kept: dict[str, int] = {}
    for path, working in (("shipped_size", (4096, 3072)), ("working_size", (1024, 768))):
        req = build_request(
            "tiny_town", "release", None, None, None, None, 0,
            landmarks=candidates, navigation="0,0", groups="0", reasoning="0", surveys="0",
        )  # fmt: skip
        req.stills.working_width, req.stills.working_height = working
        req.run_id = f"{req.run_id}-{path}"[:96]

        def inspect(run: FleetRun) -> dict[str, Any]:
            st = run.state.stages["landmark"]
            doc = json.loads((run.store / keys.landmark_instances(run.state.run_id, "tiny_town")).read_text())
            return {"wall_s": st.finished_at - st.started_at, "kept": len(doc["instances"])}

        out = fleet_run(req, inspect, until="landmark")
        walls[path], kept[path] = round(out["wall_s"], 1), out["kept"]
    return {
        "candidates": candidates,
        "wall_s": walls,
        "landmarks_kept": kept,
        "speedup": round(walls["shipped_size"] / max(1e-9, walls["working_size"]), 2),
    }


def release_lines(r: dict[str, Any]) -> list[str]:
    u, d, p = r["units"], r["dualcog_size"], r["per_unit_s"]
    out = [
        f"release profile ({r['subset']}): {r['status']} in {r['wall_s']} s, {r['cores_busy']} cores busy",
        "  stage wall time (s): " + json.dumps(r["stage_wall_s"]),
        f"  units: {json.dumps(u)}",
    ]
    for name, rate in r["rates"].items():
        ratio = rate["ratio_of_ceiling_per_pixel"]
        out.append(f"  {name:<22} {rate['per_s']:>8.3f}/s  {ratio:.2f} of the ray-cast ceiling")
    if "landmark_stage" in r:
        ls = r["landmark_stage"]
        walls, kept = ls["wall_s"], ls["landmarks_kept"]
        out.append(
            f"  landmark stage, {ls['candidates']} candidates: {walls['shipped_size']} s checking views "
            f"at 4096x3072, {walls['working_size']} s at 1024x768 ({ls['speedup']}x faster; landmarks "
            f"kept {kept['shipped_size']} and {kept['working_size']})"
        )
    out += [
        f"  per unit: scene {p['scene_s']} s, candidate {p['candidate_s']} s, "
        f"released landmark {p['landmark_s']} s, mission {p['mission_s_per_video_s']} s per video second",
        f"  a UAV-DualCog-size release ({d['scenes']} scenes, {d['candidates']} candidates, "
        f"{d['landmarks']} landmarks, {d['missions']} missions of {d['mean_mission_video_s']} s): "
        f"{d['wall_hours_here']} h here, {d['core_hours']} core-hours",
    ]
    return out


if __name__ == "__main__":  # alone: with the ceiling measured now, as ``make bench`` does at its start
    from skyqa.sim import BuiltinSimulator, load_scene

    from bench.run import raycast_ceiling

    ceiling = raycast_ceiling(BuiltinSimulator(load_scene("demo_city")))["rays_per_s"]
    result = release_run(ceiling) | {"landmark_stage": landmark_stage()}
    print("\n".join(release_lines(result)))
    print(json.dumps(result, indent=1))
