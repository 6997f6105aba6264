"""The release of a QA plan: ``finish`` reads the env observations as rendered (at the shipped
size, or only their first looks for landmarks whose rows failed on them: see
:mod:`services.qa_generator.observations`), lets every task family check its rows, releases a
unit (a landmark) only when every family of its unit kind has its whole share of clean rows for
it (UAV-DualCog: 8 image and 2 missions x 2 video rows), runs the blind gate over all of them
and writes each family's manifest and exports, the render_requests sidecar, the QC report and
the dataset card. It is a pure function of the plan and the stored assets, which is what makes
``skyqa refresh`` safe.
"""

from __future__ import annotations

import json
import mimetypes
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

from google.protobuf import json_format
from pydantic import BaseModel
from skyqa import __version__, integrity, keys
from skyqa.blob import BlobStore
from skyqa.contracts.base import dump_json
from skyqa.contracts.qa import BlindGate, Funnel, QCReport, QCRow
from skyqa.errors import InvalidInput
from skyqa.families import (
    FAMILIES,
    RELEASED,
    Checked,
    Export,
    Item,
    ReleaseFamily,
    Stored,
    metadata_file,
    release_files,
)
from skyqa.families.structure import max_similarity
from skyqa.scan import stills
from skyqa.v1 import eval_pb2, qa_pb2

from services.qa_generator import export, gate, observations, qc, verdicts
from services.qa_generator.assets import cut_clips, degrade_view, draw_overlay
from services.qa_generator.croissant import croissant
from services.qa_generator.pipeline import QAPlan, scan_of

mimetypes.add_type("application/x-ndjson", ".jsonl")
BLIND_DROP = "every blind solver answers it"
PROMPT_CHARS = 400  # of each row's prompt in the QC ledger


def _jsonl(rows: Sequence[BaseModel]) -> bytes:
    return b"".join(json.dumps(r.model_dump(mode="json"), sort_keys=True).encode() + b"\n" for r in rows)


class ReleaseLeaks(InvalidInput):
    """Solvers that never see a pixel answer the release better than chance."""

    reason = "blind_gate_failed"


def finish(
    p: QAPlan,
    store: BlobStore,
    gate_mode: Literal["enforce", "report"],
    families: Sequence[ReleaseFamily[Any]] = RELEASED,
) -> tuple[QCReport, dict[str, str]]:
    """Fill env boxes, run QC and the blind gate, keep complete units, write manifests and
    exports. With ``gate_mode="enforce"`` a leaking release raises :class:`ReleaseLeaks` after
    writing its QC report and before writing any manifest. ``families`` must be those that
    planned ``p``."""
    root = keys.run_prefix(p.run_id)
    for o in p.requests.overlays:
        if not store.exists(f"{root}/{o.output_image}"):
            draw_overlay(store, root, o)
    cut_clips(store, root, [c for c in p.requests.clips if not store.exists(f"{root}/{c.output_video}")])
    for g in p.requests.degraded:
        if not store.exists(f"{root}/{g.output_image}"):
            degrade_view(store, root, g)
    full_size = observations.chosen(p, store)  # landmarks whose observations are at the shipped size
    seen = verdicts.rendered(p, store, observations.as_rendered(p, full_size))
    families = p.families(families)
    checked, items, failed = verdicts.checked(p, seen, families)
    incomplete = verdicts.incomplete(families, checked, items, failed, dict(p.skipped))
    for r in p.requests.env_requests:
        if r.landmark_id not in full_size:  # its rows failed on the first looks, as they do here
            incomplete.setdefault(r.landmark_id, observations.NOT_SHIPPED)
    final: dict[str, list[Any]] = {}
    alone: dict[str, str] = {}  # rows of released units dropped on their own, with the reason
    counts: dict[str, Any] = {field: 0 for f in families for field in f.funnel.values()}
    for f in families:
        c = checked[f.name]
        keep = [r for r in c.rows if items[r.sample_id].unit not in incomplete and r.sample_id not in failed]
        # an uncertain answer costs its row, not the unit (like an over-represented one)
        mine = {r.sample_id: c.uncertain[r.sample_id] for r in keep if r.sample_id in c.uncertain}
        keep = [r for r in keep if r.sample_id not in mine]
        mine.update(f.balance(keep))
        final[f.name] = [r for r in keep if r.sample_id not in mine]
        alone.update(mine)
        for why in mine.values():
            if why in f.funnel:
                counts[f.funnel[why]] += 1
    released_items = [items[r.sample_id] for f in families for r in final[f.name]]
    questions = [it for it in released_items if it.asks]
    blind = gate.run_gate(questions, qc.letter_balance(questions))
    solved = set(blind.solved_by_all)
    final = {name: [r for r in rows if r.sample_id not in solved] for name, rows in final.items()}
    released_items = [it for it in released_items if it.sample_id not in solved]
    lost = [s for s, it in items.items() if it.unit in incomplete and s not in failed]
    # why each dropped row went (the sets are disjoint): the ledger's reasons and the report's counts
    fates = failed | alone | dict.fromkeys(lost, "landmark incomplete") | dict.fromkeys(solved, BLIND_DROP)
    reasons = Counter(fates.values())
    # the funnel counts landmarks; units of other kinds (navigation missions) are not landmarks
    landmark_families = {f.name for f in families if f.unit_kind == "landmark"}
    released = {it.unit: it.category for it in released_items if it.family in landmark_families}
    own = {f.rows_field: len(final[f.name]) for f in families if f.rows_field}
    others = {f.name: len(final[f.name]) for f in families if not f.rows_field}
    report = QCReport(
        scene_id=p.scene_id,
        run_id=p.run_id,
        funnel=Funnel(
            candidates=p.candidates,
            collected=p.collected,
            reviewed=len(p.landmarks),
            released_landmarks=len(released),
            blind_dropped=len(solved),
            family_rows=others,
            **own,
            **counts,
        ),
        blind_gate=BlindGate(
            mode=gate_mode,
            passed=blind.passed,
            margin=gate.MARGIN,
            alpha=gate.ALPHA,
            box_prior_max=gate.BOX_PRIOR_MAX,
            failures=blind.failures,
            dropped_rows=len(solved),
            tasks=blind.tasks,
            dropped_by_family=dict(sorted(Counter(items[s].family for s in solved).items())),
        ),
        category_mix=dict(sorted(Counter(released.values()).items())),
        checked_rows=len(items),
        dropped_rows=len(items) - len(released_items),
        drop_reasons=dict(sorted(reasons.items())),
        dropped_landmarks=dict(sorted(incomplete.items())),
        answer_letter_balance=qc.letter_balance(questions),
        max_option_similarity=max_similarity([it.texts for it in questions]),
        duplicate_questions=sum(1 for x in failed.values() if x == "duplicate question"),
    )
    out = release_files(p.run_id, p.scene_id, families)
    shipped = {it.sample_id for it in released_items}
    ledger = qc_rows(families, checked, items, fates, shipped, blind, gate_mode)
    store.put(out["qc_rows"], _jsonl(ledger), "application/x-ndjson")
    if not blind.passed and gate_mode == "enforce":
        # the report says what leaks and nothing new is released
        store.put(out["qc_report"], dump_json(report), "application/json")
        raise ReleaseLeaks(
            "the blind gate failed, nothing was released (see qc_report.json): " + "; ".join(blind.failures)
        )
    manifests: dict[str, tuple[str, bytes]] = {}
    for f in families:
        manifests[f.name] = (out[f.manifest].removeprefix(root + "/"), _jsonl(final[f.name]))
        store.put(out[f.manifest], manifests[f.name][1], "application/x-ndjson")
        store.put(out[metadata_file(f)], export.hf_metadata(f, final[f.name]), "application/x-ndjson")
        for name, data in f.exports(final[f.name]).items():
            _export(store, root, export_key(out, name), data)
    globs = {f.manifest: export.hf_globs(f, final[f.name]) for f in families}
    store.put(
        out["croissant"],
        croissant(p.scene_id, p.run_id, families, manifests, globs),
        "application/ld+json",
    )
    # what was rendered: the observations at the shipped size only where they were
    sidecar = p.requests.model_copy(update={"env_requests": observations.at_shipped_size(p, full_size)})
    store.put(out["render_requests"], dump_json(sidecar), "application/json")
    store.put(out["qc_report"], dump_json(report), "application/json")
    store.put(
        out["dataset_card"],
        export.dataset_card(
            p.scene_id,
            p.run_id,
            report,
            out,
            root,
            media_of(p),
            globs,
            families,
        ),
        "text/markdown",
    )
    rows = {f.name: len(final[f.name]) for f in families}
    paths = {name: rel for name, (rel, _) in manifests.items()}
    integrity.seal(store, p.run_id, release_info(p, report, rows, paths, gate_mode))
    return report, out


def qc_rows(
    families: Sequence[ReleaseFamily[Any]],
    checked: dict[str, Checked[Any]],
    items: dict[str, Item],
    why: dict[str, str],
    shipped: set[str],
    blind: gate.GateResult,
    gate_mode: str,
) -> list[QCRow]:
    """The QC ledger: every checked row with its fate and its blind-gate outcome."""
    released = blind.passed or gate_mode != "enforce"
    everyone = set(blind.solved_by_all)
    out = []
    for f in families:
        for r in checked[f.name].rows:
            it = items[r.sample_id]
            kept = r.sample_id in shipped
            out.append(
                QCRow(
                    sample_id=it.sample_id,
                    family=f.name,
                    task=it.task,
                    unit=it.unit,
                    category=it.category,
                    difficulty=it.difficulty,
                    kind=it.kind,
                    status=("released" if released else "withheld") if kept else "dropped",
                    reason="" if kept else why.get(r.sample_id, "not released"),
                    blind=_outcome(r.sample_id, blind.right_by, everyone),
                    blind_right=blind.right_by.get(r.sample_id, []),
                    prompt=it.prompt[:PROMPT_CHARS],
                    options=list(it.options),
                    gold=sorted(it.gold),
                    box=list(it.box),
                    media=[m.path for m in f.media(r)],
                )
            )
    return out


def _outcome(sample_id: str, right_by: dict[str, list[str]], everyone: set[str]) -> Any:
    if sample_id not in right_by:
        return "not scored"
    if sample_id in everyone:
        return "all"
    return "some" if right_by[sample_id] else "none"


def export_key(out: dict[str, str], name: str) -> str:
    """The key of an export: a release file by name, or ``<folder name>/<path>`` inside one."""
    if name in out:
        return out[name]
    folder, _, rest = name.partition("/")
    if folder not in out or not rest:
        raise InvalidInput(f"export {name!r} is neither a release file nor inside a release folder")
    key = keys.validate_key(f"{out[folder]}/{rest}")
    if key in out.values():
        raise InvalidInput(f"export {name!r} would overwrite the release file {key!r}")
    return key


def _export(store: BlobStore, root: str, key: str, data: Export) -> None:
    if isinstance(data, Stored):
        source = keys.validate_key(f"{root}/{data.path}")
        have, want = store.head(key), store.head(source)
        if have is None or want is None or have.sha256 != want.sha256:
            store.put(key, store.get(source), data.content_type)  # a missing source raises BlobNotFound
        return
    store.put(key, data, mimetypes.guess_type(key)[0] or "application/octet-stream")


def release_info(
    p: QAPlan, report: QCReport, rows: dict[str, int], manifests: dict[str, str], gate_mode: str
) -> integrity.ReleaseInfo:
    """What made this release: version and commit, the scan request and seed, the settings that
    change what ships, and its counts (``manifests`` relative to the release)."""
    settings = {"blind_gate": gate_mode}
    return integrity.ReleaseInfo(
        skyqa_version=__version__,
        git_commit=integrity.git_commit(),
        run_id=p.run_id,
        scene_id=p.scene_id,
        seed=scan_of(p).seed,
        config_hash=integrity.config_hash(p.scan, settings),
        settings=settings,
        scan_request=p.scan,
        counts={k: v for k, v in report.funnel.model_dump().items() if isinstance(v, int)},
        family_rows=rows,
        manifests=manifests,
    )


def completion(
    p: QAPlan, report: QCReport, out: dict[str, str], families: Sequence[ReleaseFamily[Any]] = RELEASED
) -> tuple[qa_pb2.QACompleted, str]:
    """The QA stage's completion event and its one-line progress message."""
    f = report.funnel
    planned = p.families(families)
    rows = {
        fam.name: int(getattr(f, fam.rows_field)) if fam.rows_field else f.family_rows.get(fam.name, 0)
        for fam in planned
    }
    event = qa_pb2.QACompleted(
        run_id=p.run_id,
        scene_id=p.scene_id,
        image_rows=f.image_rows,
        video_rows=f.video_rows,
        released_landmarks=f.released_landmarks,
        image_manifest=out.get("image_qa", ""),
        video_manifest=out.get("video_qa", ""),
        qc_report=out["qc_report"],
        evaluation=json_format.ParseDict(p.scan.get("evaluation", {}), eval_pb2.EvaluationSpec()),
        family_rows=rows,
        manifests={fam.name: out[fam.manifest] for fam in planned},
    )
    counts = ", ".join(f"{rows[fam.name]} {fam.noun}" for fam in planned)
    return event, f"{counts} rows, {f.released_landmarks} landmarks released"


def media_of(p: QAPlan) -> export.Media:
    scan = scan_of(p)
    size = stills(scan)
    # rows that play a mission video carry its frame rate (action trajectories have their own
    # encoding, stated by their family)
    fps = [r.get("fps") for f in FAMILIES for r in p.rows.get(f.name, [])]
    rates = sorted({float(f) for f in fps if isinstance(f, int | float)})
    return export.Media(
        profile=scan.profile,
        still_width=size.width,
        still_height=size.height,
        jpeg_quality=size.jpeg_quality,
        video_width=scan.video.width,
        video_height=scan.video.height,
        video_bitrate=scan.video.bitrate,
        fps=", ".join(f"{r:g}" for r in rates) or "no videos",
    )
