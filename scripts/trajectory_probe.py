"""Plan a run's action trajectories again with the current code, render them on the builtin
simulator and validate them as the QA stage does, without the pipeline: planned against
survived per construction (inverse, loop, equivalence).

    python scripts/trajectory_probe.py --store /work/runs/base1/store --run <run-id>
        [--geometry scene|map] [--stored] [--size 96x64] [--per-split N]

``--geometry map`` plans on the fused map alone (what the AirSim backend still does);
``--stored`` renders the plans the run stored instead of planning again; ``--size`` renders
smaller than the scan asks (the validation is exact at any size); ``--per-split`` overrides the
scan's count. Nothing is written into the run: renders go to a temporary store.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# the reasoning family alone: the package's __init__ imports every family
_families = types.ModuleType("skyqa.families")
_families.__path__ = [str(ROOT / "libs" / "skyqa" / "families")]
sys.modules.setdefault("skyqa.families", _families)

import numpy as np  # noqa: E402
from skyqa import keys, scan as scan_rules  # noqa: E402
from skyqa.blob import LocalBlobStore  # noqa: E402
from skyqa.contracts import dump_json, load_json  # noqa: E402
from skyqa.contracts.missions import MissionIndex  # noqa: E402
from skyqa.contracts.rsv import RANDOM_WALK, TrajectoryPlan  # noqa: E402
from skyqa.families.base import PlanInputs, Rendered  # noqa: E402
from skyqa.families.reasoning.family import FAMILY, kind_of  # noqa: E402
from skyqa.geometry.pcd import decode_cloud  # noqa: E402
from skyqa.sim import BuiltinSimulator, load_scene  # noqa: E402

from services.mission_planner.safety import ObstacleMap  # noqa: E402
from services.mission_planner.trajectories import (  # noqa: E402
    CloudClearance,
    Geometry,
    index_row,
    plan_trajectories,
    video_job,
)
from services.renderer.trajectory import render_trajectory  # noqa: E402

PROBE = "trajectory-probe"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--run", required=True)
    ap.add_argument("--geometry", choices=("scene", "map"), default="scene")
    ap.add_argument("--stored", action="store_true")
    ap.add_argument("--size", default="96x64")
    ap.add_argument("--per-split", type=int, default=-1)
    args = ap.parse_args()
    store = LocalBlobStore(args.store)
    scan = scan_rules.stored(store, args.run)
    scene_id = scan.scene_id
    if args.per_split >= 0:
        scan.reasoning.per_split = args.per_split
    sim = BuiltinSimulator(load_scene(scene_id))
    if args.stored:
        plans = [
            load_json(TrajectoryPlan, store.get(keys.mission_file(args.run, e.traj_id, keys.TRAJECTORY_PLAN)))
            for e in load_json(MissionIndex, store.get(keys.missions_index(args.run))).trajectories
        ]
    else:
        cloud = decode_cloud(store.get(keys.fused_cloud_npy(args.run, scene_id)))
        xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]]).astype(np.float64)
        obstacles = ObstacleMap(xyz, [], 1.0)  # keep-outs do not enter trajectory planning
        geometry = (
            Geometry(sim, exact=True, where="in the scene")
            if args.geometry == "scene"
            else Geometry(CloudClearance(obstacles), exact=False, where="on the fused map")
        )
        t0 = time.monotonic()
        plans, rejected = plan_trajectories(scene_id, scan, obstacles, geometry)
        print(f"planned {len(plans)} trajectories in {time.monotonic() - t0:.1f} s; rejected {rejected}")
    w, h = (int(v) for v in args.size.split("x"))
    out = LocalBlobStore(Path(tempfile.mkdtemp(prefix="trajectory-probe-")))
    for p in plans:
        p = p.model_copy(update={"width": w, "height": h})
        out.put(keys.mission_file(PROBE, p.traj_id, keys.TRAJECTORY_PLAN), dump_json(p), "application/json")
        render_trajectory(video_job(PROBE, scene_id, "builtin", p), sim, out)
    index = MissionIndex(
        scene_id=scene_id,
        missions=[],
        rejected=[],
        trajectories=[index_row(out, PROBE, p.traj_id) for p in plans],
    )
    inputs = PlanInputs(
        run_id=PROBE,
        scene_id=scene_id,
        engine="builtin",
        seed=0,
        scan=scan,
        store=out,
        landmarks=[],
        excluded={},
        missions=index,
    )
    rows = FAMILY.plan(inputs).rows
    failed = FAMILY.check(rows, Rendered(out, PROBE, {}, {}, {})).failed
    planned: Counter[str] = Counter()
    survived: Counter[str] = Counter()
    for r in rows:
        kind = kind_of(r.built_as)
        planned[kind] += 1
        ok = r.split == r.built_as and r.sample_id not in failed  # a relation not sent to random_walk/
        survived[kind] += ok
        if r.built_as != RANDOM_WALK and not ok:
            print(f"  {r.traj_id}: {r.failure or failed.get(r.sample_id, '')}")
    print("construction  planned  survived")
    for kind in ("inverse", "loop", "equivalence", RANDOM_WALK):
        print(f"{kind:12}  {planned[kind]:7}  {survived[kind]:8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
