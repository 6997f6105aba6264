"""Blind filter for the benchmark builder: which image MCQs can be answered without the image?

Following MMMU-Pro, k text-only responders each answer every image MCQ r times (models in
the ``text_only`` condition at temperature 0.7 with seeds 0..r-1; ``text_prior`` once, it is
deterministic). A responder *solves* a row when more than half of its samples are right; a
row is flagged when at least ``quorum`` of the responders solve it (MMMU-Pro: 3 of 4). The
report keeps every row's per-responder rate next to the chance level 1/options, so a builder
can choose another cut. ``apply`` writes a filtered copy of the image manifest next to the
original; nothing already written is changed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from skyqa import integrity, keys
from skyqa.blob import BlobStore
from skyqa.contracts.base import load_jsonl
from skyqa.contracts.qa import ImageRow
from skyqa.families import DUALCOG_IMAGE, release_files
from skyqa.models import open_model
from skyqa.settings import ModelEndpoint

from services.evaluator.baselines import Responder, TextPrior
from services.evaluator.questions import Question
from services.evaluator.runner import ModelResponder, cache_for, run_items

SAMPLE_TEMPERATURE = 0.7


@dataclass
class BlindResult:
    report_key: str
    filtered_key: str | None
    flagged: list[str]
    rows: int


def _samplers(
    endpoints: list[ModelEndpoint], store: BlobStore, root: str, samples: int
) -> list[tuple[str, list[Responder]]]:
    out: list[tuple[str, list[Responder]]] = []
    for ep in endpoints:
        name = ep.model or ep.url
        model = open_model(ep)
        out.append(
            (
                name,
                [
                    ModelResponder(name, model, store, root, {"temperature": SAMPLE_TEMPERATURE, "seed": k})
                    for k in range(samples)
                ],
            )
        )
    return out


async def blind_filter(
    store: BlobStore,
    run_id: str,
    scene_id: str,
    endpoints: list[ModelEndpoint],
    cache_dir: Path,
    samples: int = 3,
    quorum: float = 0.75,
    concurrency: int = 4,
    apply: bool = False,
) -> BlindResult:
    root = keys.run_prefix(run_id)
    out = release_files(run_id, scene_id)
    raw = [line for line in store.get(out["image_qa"]).splitlines() if line.strip()]
    rows = [
        Question(DUALCOG_IMAGE, r, r.sample_id)
        for r in load_jsonl(ImageRow, b"\n".join(raw), "image manifest")
    ]
    responders: list[tuple[str, list[Responder]]] = [("text_prior", [TextPrior(rows)])]
    responders += _samplers(endpoints, store, root, samples)
    rates: dict[str, dict[str, float]] = {q.sample_id: {} for q in rows}
    for name, copies in responders:
        cache = cache_for(copies[0], cache_dir)
        right: dict[str, list[float]] = {}
        for resp in copies:
            condition = "text_only" if isinstance(resp, ModelResponder) else "full"
            items, _ = await run_items(resp, rows, store, root, cache, concurrency, None, condition)
            for it in items:
                # failed requests are not evidence either way: only answered samples count
                if it["parse_kind"] != "request_failed":
                    right.setdefault(it["sample_id"], []).append(float(it.get("option_correct", 0.0)))
        for sid, vals in right.items():
            rates[sid][name] = round(sum(vals) / len(vals), 4)
    need = math.ceil(quorum * len(responders) - 1e-9)
    report_rows, flagged = [], []
    for q in rows:
        per = rates[q.sample_id]
        solvers = sum(1 for v in per.values() if v > 0.5)
        flag = bool(per) and solvers >= need
        if flag:
            flagged.append(q.sample_id)
        report_rows.append(
            {
                "sample_id": q.sample_id,
                "task_type": q.row.task_type,
                "difficulty": q.row.difficulty,
                "chance": round(1 / len(q.row.label_options), 4),
                "correct_rate": per,
                "solvers": solvers,
                "flagged": flag,
            }
        )
    by_task: dict[str, dict[str, int]] = {}
    for rr in report_rows:
        t = by_task.setdefault(rr["task_type"], {"rows": 0, "flagged": 0})
        t["rows"] += 1
        t["flagged"] += int(rr["flagged"])
    report = {
        "responders": [name for name, _ in responders],
        "samples_per_model": samples,
        "temperature": SAMPLE_TEMPERATURE,
        "quorum": quorum,
        "solvers_needed": need,
        "rows": len(rows),
        "flagged": len(flagged),
        "by_task": by_task,
        "items": report_rows,
    }
    report_key = keys.blind_filter_report(run_id)
    store.put(report_key, json.dumps(report, indent=1, sort_keys=True).encode(), "application/json")
    filtered_key = None
    if apply:
        filtered_key = keys.blind_filtered_manifest(run_id, scene_id)
        keep = set(flagged)
        kept = [line + b"\n" for line, q in zip(raw, rows, strict=True) if q.sample_id not in keep]
        store.put(filtered_key, b"".join(kept), "application/x-ndjson")
    integrity.seal_eval(store, run_id)
    return BlindResult(report_key, filtered_key, flagged, len(rows))
