"""A release-profile run of a stated subset of tiny_town, one process per service: each stage's
wall time, its rendering rate as a ratio of the same run's ray-cast ceiling, the cost of each
unit of work, and what a release the size of UAV-DualCog's would cost on this machine.

The subset: the release profile's media (4096x3072 JPEG-80 stills, 1440x1080 10 Mb/s video,
128-channel LiDAR, 5 cm fusion voxels) over the whole of tiny_town, with ``LANDMARKS``
candidates given views and no navigation flights, UAV groups, action trajectories or surveys
(UAV-DualCog has none of them), run to the end of the QA stage as compose deploys it (each
renderer replica on one core): once with one renderer and one mission planner, once with two
of each. The estimate (README, Performance) is

    wall(k) = scenes x scene_s(k) + candidates x candidate_s(k) + landmarks x landmark_s(k)
              + missions x mission_seconds x mission_s_per_video_s(k)
    unit_s(k) = serial + parallel / k,  fitted to the unit's cost with k = 1 and k = 2
    core-hours = wall(2) x cores_busy / 3600

with each ``*_s`` a stage's wall time over its units, ``k`` the renderer cores (2 here, 2N on
N two-core workers), ``mission_seconds`` the mean video length of this run's missions, and
``cores_busy`` the CPU seconds of every service over the two-replica run's wall time.
"""

from __future__ import annotations

import json
from typing import Any

from skyqa import keys, scan
from skyqa.blob import LocalBlobStore
from skyqa.contracts.missions import MissionIndex
from skyqa.v1 import scan_pb2

from bench.scaling import FleetRun, fleet_run

LANDMARKS = 3  # six missions: enough that two renderer replicas each have work to the end
CANDIDATES = 12  # for the landmark stage's two paths: enough that per-candidate work dominates
# UAV-DualCog's release (its paper and web page): 12 AirSim scenes, 2,626 candidate instances,
# 512 released landmarks, 4,096 image and 2,048 video rows from 1,024 flight missions
DUALCOG = {"scenes": 12, "candidates": 2626, "landmarks": 512, "missions": 1024}
WORKERS = (1, 2, 4, 8)


def release_request(candidates: int, tag: str) -> scan_pb2.ScanRequest:
    from skyqa.scan_options import build_request

    req = build_request(
        "tiny_town", "release", None, None, None, None, 0,
        landmarks=candidates, navigation="0,0", groups="0", reasoning="0", surveys="0",
    )  # fmt: skip
    req.run_id = f"{req.run_id}-{tag}"[:96]
    return req


def _per_unit(units: dict[str, Any], walls: dict[str, float]) -> dict[str, float]:
    """Each stage's wall time over its units of work (the estimate's ``*_s``)."""
    return {
        "scene_s": walls.get("capture", 0.0) + walls.get("fusion", 0.0),
        "candidate_s": walls.get("landmark", 0.0) / max(1, units["candidates"]),
        # the QA stage and its views step (the released landmarks' views at the shipped size)
        "landmark_s": (walls.get("qa", 0.0) + walls.get("views", 0.0)) / max(1, units["released_landmarks"]),
        "mission_s_per_video_s": walls.get("mission", 0.0) / max(1e-9, units["mission_video_s"]),
    }


def _measure(run: FleetRun, req: scan_pb2.ScanRequest, ceiling_rays_per_s: float) -> dict[str, Any]:
    full = scan.stored(LocalBlobStore(run.store), req.run_id)
    root = run.store / keys.run_prefix(req.run_id)
    plan = json.loads((run.store / keys.landmark_plan(req.run_id, req.scene_id)).read_text())
    index = MissionIndex.model_validate_json((run.store / keys.missions_index(req.run_id)).read_text())
    sidecar = json.loads(next((root / "image_tasks" / "render_requests").glob("*.json")).read_text())
    walls = run.stage_wall_s()
    size = scan.stills(full)
    units = {
        "capture_frames": sum(1 for _ in (run.store / keys.frames_manifest(req.run_id, req.scene_id)).open()),
        "candidates": len(plan["candidates"]),
        "landmark_views": sum(len(c["views"]) for c in plan["candidates"]),
        "shipped_views": len(sidecar.get("views", [])),
        "released_landmarks": int(run.qc()["funnel"]["released_landmarks"]),
        # every planned observation is first rendered at the working size; the sidecar lists
        # under env_requests the ones rendered again at the shipped size
        "env_observations": len(sidecar["first_looks"] or sidecar["env_requests"]),
        "env_observations_shipped": len(sidecar["env_requests"]),
        "missions": len(index.missions),
        "mission_video_s": round(sum(m.duration_sec for m in index.missions), 1),
        "video_frames": sum(m.frame_count for m in index.missions),
    }

    def rate(name: str, pixels: int, stage: str) -> dict[str, float]:
        wall, count = walls.get(stage, 0.0), units[name]
        per_s = count / wall if wall > 0 else 0.0
        return {
            "units": count,
            "per_s": round(per_s, 3),
            "ratio_of_ceiling_per_pixel": round(per_s * pixels / ceiling_rays_per_s, 3),
        }

    still, working = size.width * size.height, size.working_width * size.working_height
    return {
        # the run goes on to its evaluation; this measures it to the end of the QA stage
        "status": "failed" if run.state.status == "failed" else "QA stage completed",
        "wall_s": round(run.wall_s, 1),
        "stage_wall_s": walls,
        "cpu_s": run.cpu_s,
        "cores_busy": round(sum(run.cpu_s.values()) / run.wall_s, 2),
        "units": units,
        "rates": {
            "capture": rate("capture_frames", full.camera.width * full.camera.height, "capture"),
            "landmark_views": rate("landmark_views", working, "landmark"),
            "shipped_views": rate("shipped_views", still, "views"),
            "shipped_env_observations": rate("env_observations_shipped", still, "observations"),
            "mission_frames": rate("video_frames", full.video.width * full.video.height, "mission"),
        },
        "per_unit_s": {k: round(v, 3) for k, v in _per_unit(units, walls).items()},
    }


def amdahl(one: float, two: float) -> tuple[float, float]:
    """A per-unit cost measured with one and with two renderer cores, split into the part no
    renderer core shortens and the part they share: ``cost(k) = serial + parallel / k``."""
    parallel = max(0.0, min(one, 2 * (one - two)))
    return one - parallel, parallel


def dualcog_hours(per_unit: dict[str, tuple[float, float]], mean_mission_s: float, cores: int) -> float:
    """The estimate's wall time (README, Performance) with ``cores`` renderer cores."""
    counts = {
        "scene_s": DUALCOG["scenes"],
        "candidate_s": DUALCOG["candidates"],
        "landmark_s": DUALCOG["landmarks"],
        "mission_s_per_video_s": DUALCOG["missions"] * mean_mission_s,
    }
    return sum(n * (per_unit[k][0] + per_unit[k][1] / cores) for k, n in counts.items()) / 3600


def release_run(ceiling_rays_per_s: float, landmarks: int = LANDMARKS) -> dict[str, Any]:
    """The subset twice, to the end of the QA stage, as compose deploys it (every renderer
    replica one core): with one renderer and one mission planner, then two of each."""
    runs: dict[int, dict[str, Any]] = {}
    for n in (1, 2):
        req = release_request(landmarks, f"r{n}")
        runs[n] = fleet_run(
            req,
            lambda run, req=req: _measure(run, req, ceiling_rays_per_s),  # type: ignore[misc]
            until="qa",
            replicas={"renderer": n, "mission_planner": n},
            one_core=("renderer",),
        )
    out = runs[2]
    mean_mission_s = out["units"]["mission_video_s"] / max(1, out["units"]["missions"])
    split = {k: amdahl(runs[1]["per_unit_s"][k], v) for k, v in out["per_unit_s"].items()}
    here = dualcog_hours(split, mean_mission_s, 2)
    return out | {
        "subset": f"tiny_town, release profile, {landmarks} candidates, no navigation, groups, "
        "trajectories or surveys",
        "replicas": {
            "one": {k: runs[1][k] for k in ("wall_s", "stage_wall_s", "per_unit_s", "cores_busy")},
            "speedup_2_vs_1": round(runs[1]["wall_s"] / out["wall_s"], 2),
            "stage_speedup_2_vs_1": {
                k: round(v / out["stage_wall_s"][k], 2)
                for k, v in runs[1]["stage_wall_s"].items()
                if out["stage_wall_s"].get(k, 0) > 0 and k in ("landmark", "views", "mission", "qa")
            },
        },
        "dualcog_size": {
            **DUALCOG,
            "mean_mission_video_s": round(mean_mission_s, 1),
            "wall_hours_here": round(here, 1),
            "core_hours": round(here * out["cores_busy"], 1),
            "serial_and_parallel_s": {k: [round(s, 3), round(p, 3)] for k, (s, p) in split.items()},
            # N two-core workers: 2N renderer replicas
            "wall_hours_on_workers": {
                str(w): round(dualcog_hours(split, mean_mission_s, 2 * w), 1) for w in WORKERS
            },
        },
    }


def landmark_stage(candidates: int = CANDIDATES) -> dict[str, Any]:
    """The landmark stage of one release-profile scan of tiny_town (``candidates`` candidates)
    two ways in this bench run: views rendered and checked at the shipped 4096x3072 (the path
    before working sizes) and at the 1024x768 working size (the reviewed landmarks' views are
    rendered at 4096x3072 later, in the QA stage's ``views`` step; ``release_run`` times it)."""
    walls: dict[str, float] = {}
    kept: dict[str, int] = {}
    for path, working in (("shipped_size", (4096, 3072)), ("working_size", (1024, 768))):
        req = release_request(candidates, path)
        req.stills.working_width, req.stills.working_height = working

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
    u, d, p, rep = r["units"], r["dualcog_size"], r["per_unit_s"], r["replicas"]
    out = [
        f"release profile ({r['subset']}), to the end of the QA stage, two renderer and two mission "
        f"planner replicas: {r['wall_s']} s ({r['status']}), {r['cores_busy']} cores busy",
        "  stage wall time (s): " + json.dumps(r["stage_wall_s"]),
        f"  units: {json.dumps(u)}",
        f"  one replica of each: {rep['one']['wall_s']} s; two are {rep['speedup_2_vs_1']}x faster "
        f"(by stage: {json.dumps(rep['stage_speedup_2_vs_1'])})",
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
        f"{d['wall_hours_here']} h here, {d['core_hours']} core-hours; on N two-core workers "
        + ", ".join(f"N={n}: {h} h" for n, h in d["wall_hours_on_workers"].items()),
    ]
    return out


if __name__ == "__main__":  # alone: with the ceiling measured now, as ``make bench`` does at its start
    from skyqa.sim import BuiltinSimulator, load_scene

    from bench.run import raycast_ceiling

    ceiling = raycast_ceiling(BuiltinSimulator(load_scene("demo_city")))["rays_per_s"]
    result = release_run(ceiling) | {"landmark_stage": landmark_stage()}
    print("\n".join(release_lines(result)))
    print(json.dumps(result, indent=1))
