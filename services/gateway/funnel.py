"""The workbench's funnel and QC view: how a release narrowed from candidates to rows, each drop
reason with example rows, the blind gate's verdict per task, and the human answerability audit's
agreement per task with every disagreement."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from services.gateway.rows import ledger, qc_report
from services.gateway.stored import ParsedCache

EXAMPLES = 5


def funnel_view(cache: ParsedCache, run_id: str) -> dict[str, Any]:
    report = qc_report(cache, run_id)
    index = ledger(cache, run_id)
    f = report.funnel
    examples: dict[str, list[str]] = defaultdict(list)
    for r in index.rows:
        if r.status == "dropped" and len(examples[r.reason]) < EXAMPLES:
            examples[r.reason].append(r.sample_id)
    fates = Counter(r.status for r in index.rows)
    by_family: dict[str, Counter[str]] = defaultdict(Counter)
    for r in index.rows:
        by_family[r.family][r.status] += 1
    g = report.blind_gate
    return {
        "scene_id": report.scene_id,
        "landmarks": [
            {"stage": "candidate (class, instance) pairs", "count": f.candidates},
            {"stage": "landmarks with enough valid views", "count": f.collected},
            {"stage": "reviewed (kept and labelled)", "count": f.reviewed},
            {"stage": "released landmarks", "count": f.released_landmarks},
        ],
        "rows": [
            {"stage": "rows checked", "count": len(index.rows)},
            {"stage": "rows released", "count": fates.get("released", 0)},
        ]
        # clean rows of the tasks (or units) the blind gate withheld
        + (
            [{"stage": "rows withheld by the blind gate", "count": fates["withheld"]}]
            if "withheld" in fates
            else []
        ),
        "families": {name: dict(c) for name, c in sorted(by_family.items())},
        "drops": [
            {"reason": reason, "rows": n, "examples": examples.get(reason, [])}
            for reason, n in sorted(report.drop_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "dropped_landmarks": report.dropped_landmarks,
        "partly_released": report.partly_released,
        "blind_gate": {
            "mode": g.mode,
            "passed": g.passed,
            "failures": g.failures,
            "withheld_rows": g.withheld_rows,
            "unverified": g.unverified,
            "tasks": [
                {
                    "task": task,
                    "rows": t.rows,
                    "status": t.status,
                    "best_solver": t.best_solver,
                    "score": t.solvers[t.best_solver].score if t.best_solver in t.solvers else None,
                    "chance": t.chance,
                    "p_value": t.p_value,
                    "detectable": t.detectable,
                    "box_prior_acc50": t.box_prior_acc50,
                    "failures": t.failures,
                }
                for task, t in sorted(g.tasks.items())
            ],
        },
        "outcomes": dict(sorted(Counter(r.blind for r in index.rows).items())),
        # the human answerability audit as qc_report.json has it (None until someone answered)
        "audit": report.audit.model_dump(mode="json") if report.audit is not None else None,
    }
