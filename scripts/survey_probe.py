"""Plan a run's ultra-resolution surveys again with the current code, render them on the builtin
simulator and plan the UltraVR-style family over them, without the pipeline: per view, what
was measured and why objects are not countable; per task, the candidates and the rows.

    python scripts/survey_probe.py --store /work/runs/base1/store --run <run-id>
        [--surveys N] [--size 4096x3072] [--targets scene|map] [--out DIR] [--rows TASK] [--table]

``--surveys`` overrides the scan's count; ``--size`` renders smaller than the scan asks, at the
same poses (the ground pixel grows with it, so objects have fewer pixels than at full size);
``--targets map`` measures the fused map's instances only (what the AirSim backend still
does); ``--out`` keeps the renders in DIR (a survey already rendered there is not rendered
again: iterate on the family for free); ``--table`` plans the family over the first 1..N
surveys (rows per task against the number of surveys); ``--rows TASK`` prints that task's
rows. Nothing is written into the run.
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
# the UltraVR family alone: the package's __init__ imports every family
_families = types.ModuleType("skyqa.families")
_families.__path__ = [str(ROOT / "libs" / "skyqa" / "families")]
sys.modules.setdefault("skyqa.families", _families)

import numpy as np  # noqa: E402
from skyqa import keys, scan as scan_rules  # noqa: E402
from skyqa.blob import LocalBlobStore  # noqa: E402
from skyqa.contracts import ValidInstancesFile, load_json  # noqa: E402
from skyqa.contracts.fusion import InstanceTable  # noqa: E402
from skyqa.contracts.missions import MissionIndex  # noqa: E402
from skyqa.contracts.ultra import SurveyIndexRow  # noqa: E402
from skyqa.contracts.ultravr import UltraRow  # noqa: E402
from skyqa.families.base import PlanInputs  # noqa: E402
from skyqa.families.ultravr.family import CANDIDATES_FILE, FAMILY  # noqa: E402
from skyqa.families.ultravr.objects import objects_of  # noqa: E402
from skyqa.families.ultravr.templates import CATEGORY, View, candidates  # noqa: E402
from skyqa.geometry.pcd import decode_cloud  # noqa: E402
from skyqa.sim import BuiltinSimulator, load_scene  # noqa: E402
from skyqa.v1 import scan_pb2  # noqa: E402
from skyqa.vocab.behaviors import load_library  # noqa: E402

from services.mission_planner.missions import MissionPlanFile  # noqa: E402
from services.mission_planner.safety import ObstacleMap  # noqa: E402
from services.mission_planner.surveys import (  # noqa: E402
    Thing,
    bundle,
    index_row,
    plan_surveys,
    scene_things,
    survey_job,
)
from services.renderer.survey import render_survey  # noqa: E402

PROBE = "survey-probe"


def obstacles_of(store: LocalBlobStore, run: str, scene_id: str) -> ObstacleMap:
    """The map the mission planner placed the run's survey poses on (cloud and keep-outs)."""
    plan = load_json(MissionPlanFile, store.get(keys.mission_plan(run)), "mission plan")
    valid = load_json(ValidInstancesFile, store.get(plan.valid_instances), "valid instances")
    safety = load_library().safety_distance_m
    keepouts = [
        ObstacleMap.keepout(np.array(v.bbox_3d.min), np.array(v.bbox_3d.max), safety)
        for v in valid.valid_instances
    ]
    cloud = decode_cloud(store.get(keys.fused_cloud_npy(run, scene_id)))
    xyz = np.column_stack([cloud["x"], cloud["y"], cloud["z"]]).astype(np.float64)
    return ObstacleMap(xyz, keepouts, safety)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--run", required=True)
    ap.add_argument("--surveys", type=int, default=-1)
    ap.add_argument("--size", default="")
    ap.add_argument("--targets", choices=("scene", "map"), default="scene")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rows", default="")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    store = LocalBlobStore(args.store)
    scan = scan_rules.stored(store, args.run)
    scene_id = scan.scene_id
    if args.surveys >= 0:
        scan.surveys.count = args.surveys
    table = load_json(
        InstanceTable, store.get(keys.fusion_outputs(args.run, scene_id)["instances"]), "fused instances"
    )
    things: list[Thing] = list(table.instances)
    if args.targets == "scene":
        things = list(scene_things("builtin", scene_id, None) or [])
    obstacles = obstacles_of(store, args.run, scene_id)
    plans, rejected = plan_surveys(scene_id, scan, things, obstacles)
    for no in rejected:
        print(f"rejected {no.survey_id}: {no.reason}")
    out = LocalBlobStore(args.out or Path(tempfile.mkdtemp(prefix="survey-probe-")))
    sim = BuiltinSimulator(load_scene(scene_id))
    index = MissionIndex(scene_id=scene_id, missions=[], rejected=[])
    for plan, targets in plans:
        if args.size:
            w, h = (int(v) for v in args.size.split("x"))
            plan = plan.model_copy(update={"width": w, "height": h, "gsd_m": plan.gsd_m * plan.width / w})
        out.put(keys.mission_file(PROBE, plan.survey_id, keys.SURVEY_PLAN), plan.model_dump_json().encode())
        t0 = time.monotonic()
        done = render_survey(survey_job(PROBE, "builtin", plan, targets, 80), sim, out)
        survey = bundle(done, out)
        print(
            f"{plan.survey_id}: centre {plan.center[:2]}, {len(targets)} targets, "
            f"{'reused' if done.reused else f'rendered in {time.monotonic() - t0:.0f} s'}"
        )
        for view, measured in zip(survey.views, survey.measured, strict=True):
            objs = objects_of(measured.objects, survey.width, survey.height)
            v = View(objs, survey.width, survey.height)
            found = Counter(c.task for c in candidates(v, 0, np.random.default_rng(0)))
            problems = Counter(o.problem or "clear" for o in objs)
            print(f"  {view.view:8} pose {view.pose[:5]}: {len(objs)} small objects {dict(problems)}")
            print(f"           candidates {dict(sorted(found.items()))}")
        index.surveys.append(index_row(PROBE, plan.survey_id))
    rows = family_rows(out, scene_id, scan, index.surveys)
    funnel = out.get(f"{keys.run_prefix(PROBE)}/{CANDIDATES_FILE}").decode()
    print(f"funnel {funnel}")
    by_view = Counter(r.view for r in rows)
    print(f"{len(index.surveys)} surveys, {len(rows)} rows ({dict(sorted(by_view.items()))})")
    for name in CATEGORY:
        golds = Counter(r.answer_label for r in rows if r.task == name)
        print(f"  {name:20} {sum(golds.values()):4}  golds {dict(sorted(golds.items()))}")
    if args.table:
        print("rows per task over the first N surveys")
        print(f"  {'N':>2} " + " ".join(f"{name[:12]:>12}" for name in CATEGORY))
        for n in range(1, len(index.surveys) + 1):
            tasks = Counter(r.task for r in family_rows(out, scene_id, scan, index.surveys[:n]))
            print(f"  {n:>2} " + " ".join(f"{tasks[name]:>12}" for name in CATEGORY))
    for row in rows:
        if row.task == args.rows:
            opts = " | ".join(f"{o.option_id}. {o.label}" for o in row.options)
            print(f"[{row.unit}] {row.question}\n    {opts}  (gold {row.answer_option_id}, {row.difficulty})")
    return 0


def family_rows(
    out: LocalBlobStore, scene_id: str, scan: scan_pb2.ScanRequest, surveys: list[SurveyIndexRow]
) -> list[UltraRow]:
    """The family's rows over the rendered ``surveys``, planned as a release would."""
    index = MissionIndex(scene_id=scene_id, missions=[], rejected=[], surveys=surveys)
    inputs = PlanInputs(PROBE, scene_id, "builtin", scan.seed, scan, out, [], {}, index)
    return FAMILY.plan(inputs).rows


if __name__ == "__main__":
    raise SystemExit(main())
