"""Re-plan a finished run's task families with the current code and run the blind gate over the
rows, per task: the loop a family author iterates in without running the pipeline again.

    python scripts/validity_probe.py --store /work/runs/base1/store --run <run-id> [--family aircop_collab]
        [--stored] [--check] [--rows TASK]

``--stored`` gates the rows of the stored QA plan instead of planning again; ``--check`` runs
each family's checks against what was rendered (rows that fail are left out, as the release
does); ``--rows TASK`` prints that task's rows (question, options, gold). Re-planning writes the
files a family's plan writes (e.g. UltraVR's candidate funnel) into the run: use a copy.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyqa import keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts import load_json
from skyqa.families import RELEASED
from skyqa.v1 import common_pb2, mission_pb2

from services.qa_generator import gate, observations, verdicts
from services.qa_generator.pipeline import QAPlan, plan


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True, type=Path)
    ap.add_argument("--run", required=True)
    ap.add_argument("--family", action="append", default=[])
    ap.add_argument("--stored", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rows", default="")
    args = ap.parse_args()
    store = LocalBlobStore(args.store)
    stored = load_json(QAPlan, store.get(keys.qa_plan(args.run)), "qa plan")
    families = [f for f in RELEASED if not args.family or f.name in args.family]
    if args.stored:
        p = stored
    else:
        event = mission_pb2.MissionsCompleted(
            run_id=args.run,
            scene_id=stored.scene_id,
            index=common_pb2.BlobRef(key=keys.missions_index(args.run)),
            valid_instances=common_pb2.BlobRef(key=stored.valid_instances),
        )
        p = plan(event, store, families)
        p = p.model_copy(update={"requests": stored.requests})
    families = p.families(families)
    if args.check:
        full = observations.chosen(p, store)
        seen = verdicts.rendered(p, store, observations.as_rendered(p, full))
        _, items, failed = verdicts.checked(p, seen, families)
        print(f"{len(failed)} rows fail their checks")
        kept = [it for s, it in items.items() if s not in failed and it.asks]
    else:
        kept = [f.item(r) for f in families for r in p.rows_of(f)]
        kept = [it for it in kept if it.asks]
    result = gate.run_gate(kept)
    by_task: dict[str, int] = defaultdict(int)
    for it in kept:
        by_task[it.task] += 1
    print(
        f"{'task':30} {'n':>4} {'units':>5} {'chance':>6}  {'best solver':16} {'acc':>6} "
        f"{'raw p':>8} {'task p':>8}  status"
    )
    for task in sorted(by_task):
        t = result.tasks.get(task)
        units = len({it.unit for it in kept if it.task == task})
        if t is None:
            print(f"{task:30} {by_task[task]:>4} {units:>5}  not gated")
            continue
        s = t.solvers.get(t.best_solver)
        acc, raw = (s.score, s.raw_p) if s else (float("nan"), 1.0)
        print(
            f"{task:30} {t.rows:>4} {units:>5} {t.chance:>6.3f}  {t.best_solver or '-':16} {acc:>6.3f} "
            f"{raw:>8.2g} {t.p_value:>8.2g}  {t.status} (detectable +{t.detectable:.2f})"
        )
    for fam, g in sorted(result.families.items()):
        name, s = max(g.solvers.items(), key=lambda kv: kv[1].score - kv[1].chance)
        print(f"family {fam}: {name} {s.score:.3f} vs {s.chance:.3f} raw p {s.raw_p:.2g}, p {g.p_value:.2g}")
    for line in result.failures:
        print("FAIL", line)
    if args.rows:
        for it in kept:
            if it.task == args.rows:
                gold = ",".join(sorted(it.gold))
                opts = " | ".join(f"{o}{'*' if o in it.gold else ''}. {lab}" for o, lab in it.options)
                print(f"[{it.unit}] {it.prompt.splitlines()[0][:160]}\n    {opts}  (gold {gold})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
