"""The blind gate's verdict of one or more releases as a markdown table (what the README's
"Benchmark validity" section shows): per task, its rows and units, status, chance, the best
no-pixel solver with its accuracy and 95 % interval, the adjusted p and the smallest leak its
test could see.

    python scripts/validity_table.py <release-folder> [<release-folder> ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "libs"))

from skyqa.contracts.qa import QCReport


def table(release: Path) -> str:
    report = QCReport.model_validate_json((release / "qc_report.json").read_text())
    g = report.blind_gate
    lines = [
        f"**{report.scene_id}** (`{report.run_id}`): {sum(report.task_rows.values())} question rows "
        f"released, {g.withheld_rows} withheld; quota {report.task_quota} rows per task"
        + (f", short: {', '.join(sorted(report.shortfall))}" if report.shortfall else ""),
        "",
        "| task | family | rows | units | status | chance | best no-pixel solver "
        "| accuracy [95 % CI] on rows it answered | adj. p | detectable leak |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, t in sorted(g.tasks.items(), key=lambda kv: (kv[1].family, kv[0])):
        best = t.solvers.get(t.best_solver)
        acc = f"{best.score:.3f} [{best.ci[0]:.2f}, {best.ci[1]:.2f}] on {best.answered}" if best else "-"
        lines.append(
            f"| {task} | {t.family} | {t.rows} | {t.units} | {t.status} | {t.chance:.3f} | "
            f"{t.best_solver or '-'} | {acc} | {t.p_value:.2g} | +{t.detectable:.2f} |"
        )
    for family, fam in sorted(g.families.items()):
        lead = max(fam.solvers.items(), key=lambda kv: kv[1].score - kv[1].chance, default=None)
        if lead:
            name, s = lead
            verdict = "withheld" if fam.failures else "passed"
            acc = f"{s.score:.3f} [{s.ci[0]:.2f}, {s.ci[1]:.2f}] on {s.answered}"
            rows = sum(g.tasks[t].rows for t in fam.tasks if t in g.tasks)
            lines.append(
                f"| *{family} pooled* | | {rows} | | {verdict} | {s.chance:.3f} | {name} | {acc} | "
                f"{fam.p_value:.2g} | |"
            )
    for task, why in sorted(g.withheld.items()):
        lines.append(f"\nWithheld `{task}`: {'; '.join(why)}")
    return "\n".join(lines)


if __name__ == "__main__":
    print("\n\n".join(table(Path(arg)) for arg in sys.argv[1:]))
