"""The release of a QA plan: ``finish`` reads the env observations as rendered (at the shipped
size, or only their first looks for landmarks whose rows failed on them: see
:mod:`services.qa_generator.observations`), lets every task family check its rows, releases a
family's rows of a unit (a landmark) only when that family has its whole share of clean rows for
it (UAV-DualCog: 8 image rows; 2 missions x 2 video rows), runs the blind gate over all of them
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
from skyqa import __version__, audit, integrity, keys
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
from skyqa.families.base import TOGETHER
from skyqa.families.structure import max_similarity
from skyqa.scan import stills
from skyqa.v1 import eval_pb2, qa_pb2

from services.qa_generator import export, gate, observations, qc, redraw, significance, verdicts
from services.qa_generator.assets import cut_clips, degrade_view, draw_overlay
from services.qa_generator.croissant import croissant
from services.qa_generator.pipeline import QAPlan, scan_of

WITHHELD = "withheld by the blind gate"
REPEATED_FACT = "fact asked in another row"
UNIT_INCOMPLETE = "unit incomplete"  # its family does not release the row's unit (see verdicts)
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
    incomplete = verdicts.incomplete(p, families, checked, items, failed)
    for f in observations.showing(p, families, {name: c.rows for name, c in checked.items()}):
        for r in p.requests.env_requests:
            if r.landmark_id not in full_size:  # its rows failed on the first looks, as they do here
                incomplete[f.name].setdefault(r.landmark_id, observations.NOT_SHIPPED)
    # a task the gate withholds is drawn again (see redraw) and the release gated again
    rounds = redraw.Rounds()
    while True:
        superseded = rounds.superseded(items)
        final, alone, counts = select(families, checked, items, failed, incomplete, superseded)
        released_items = [items[r.sample_id] for f in families for r in final[f.name]]
        questions = [it for it in released_items if it.asks]
        earlier: dict[str, list[Item]] = {}
        for s in sorted(superseded):
            if s not in failed and items[s].asks:
                earlier.setdefault(items[s].task, []).append(items[s])
        blind = gate.run_gate(questions, rounds.drawn, earlier)
        if gate_mode != "enforce":
            break
        if not rounds.again(p, store, seen, families, checked, items, failed, blind.withheld):
            break
    withheld = withheld_rows(questions, blind) if gate_mode == "enforce" else {}
    nothing_passes = bool(questions) and all(it.sample_id in withheld for it in questions)
    final = {name: [r for r in rows if r.sample_id not in withheld] for name, rows in final.items()}
    released_items = [it for it in released_items if it.sample_id not in withheld]
    # rows of a task's earlier draws, in the ledger as withheld
    replaced = {s: f"{WITHHELD}: {why}" for s, why in superseded.items() if s not in failed}
    lost = [
        s
        for s, it in items.items()
        if it.unit in incomplete[it.family] and s not in failed and s not in replaced
    ]
    # why each row left (the sets are disjoint): the ledger's reasons and the report's counts
    fates = failed | alone | dict.fromkeys(lost, UNIT_INCOMPLETE)
    reasons = Counter(fates.values())
    shipped = {it.sample_id for it in released_items}
    why = fates | withheld | replaced  # the ledger's reason for every row not shipped
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
            blind_withheld=len(withheld),
            family_rows=others,
            **own,
            **counts,
        ),
        blind_gate=blind_report(blind, gate_mode, withheld, items, rounds.drawn, len(replaced)),
        category_mix=dict(sorted(Counter(released.values()).items())),
        checked_rows=len(items),
        dropped_rows=len(items) - len(released_items) - len(withheld) - len(replaced),
        drop_reasons=dict(sorted(reasons.items())),
        **dropped_units(families, incomplete, items, shipped, why),
        answer_letter_balance=qc.letter_balance(questions),
        max_option_similarity=max_similarity([it.texts for it in questions]),
        duplicate_questions=sum(1 for x in failed.values() if x == "duplicate question"),
        task_quota=scan_of(p).task_quota,
        **shortfall(items, released_items, withheld, scan_of(p).task_quota, families),
    )
    out = release_files(p.run_id, p.scene_id, families)
    ledger = qc_rows(families, checked, items, why, shipped, blind)
    # answers the workbench's audit stored survive a refresh: the report counts them again
    report.audit = audit.summary_of(store, p.run_id, ledger)
    store.put(out["qc_rows"], _jsonl(ledger), "application/x-ndjson")
    if nothing_passes:
        # nothing passes: the report says what leaks and nothing new is released
        store.put(out["qc_report"], dump_json(report), "application/json")
        raise ReleaseLeaks(
            "the blind gate withheld every task, nothing was released (see qc_report.json): "
            + "; ".join(blind.failures)
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
    made = rounds.made  # local assets of the fresh draws, so `skyqa refresh` makes them again
    sidecar = p.requests.model_copy(
        update={
            "env_requests": observations.at_shipped_size(p, full_size),
            "clips": sorted([*p.requests.clips, *made.clips], key=lambda c: c.output_video),
            "overlays": sorted([*p.requests.overlays, *made.overlays], key=lambda o: o.output_image),
            "degraded": sorted([*p.requests.degraded, *made.degraded], key=lambda g: g.output_image),
        }
    )
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
) -> list[QCRow]:
    """The QC ledger: every checked row with its fate and its blind-gate outcome; ``why`` holds
    the reason of every row not shipped (dropped, or withheld by the gate)."""
    out = []
    for f in families:
        for r in checked[f.name].rows:
            it = items[r.sample_id]
            kept = r.sample_id in shipped
            reason = why.get(r.sample_id, "not released")
            status = "released" if kept else "withheld" if reason.startswith(WITHHELD) else "dropped"
            out.append(
                QCRow(
                    sample_id=it.sample_id,
                    family=f.name,
                    task=it.task,
                    unit=it.unit,
                    category=it.category,
                    difficulty=it.difficulty,
                    kind=it.kind,
                    status=status,
                    reason="" if kept else reason,
                    blind=_outcome(it, blind),
                    blind_right=blind.right_by.get(r.sample_id, []),
                    prompt=it.prompt[:PROMPT_CHARS],
                    options=list(it.options),
                    gold=sorted(it.gold),
                    box=list(it.box),
                    media=[m.path for m in f.media(r)],
                )
            )
    return out


def _outcome(it: Item, blind: gate.GateResult) -> Any:
    right = blind.right_by.get(it.sample_id)
    if right is None:
        return "not scored"
    task = blind.tasks.get(it.task)
    if right and task is not None and set(right) >= set(task.solvers):
        return "all"
    return "some" if right else "none"


def select(
    families: Sequence[ReleaseFamily[Any]],
    checked: dict[str, Checked[Any]],
    items: dict[str, Item],
    failed: dict[str, str],
    incomplete: dict[str, dict[str, str]],
    superseded: dict[str, str],
) -> tuple[dict[str, list[Any]], dict[str, str], dict[str, int]]:
    """Each family's rows of its complete units that passed their checks, less those it leaves out
    on their own (uncertain, a repeated fact, over-represented), with why, and the funnel counts
    of those reasons and of the units left out for a reason a funnel names. Rows of a withheld
    draw (``superseded``) take no part."""
    final: dict[str, list[Any]] = {}
    alone: dict[str, str] = {}  # rows of released units dropped on their own, with the reason
    counts: dict[str, int] = {field: 0 for f in families for field in f.funnel.values()}
    # a unit a family leaves out for a reason its funnel names (a failed mission)
    for f in families:
        for why in incomplete[f.name].values():
            if why in f.funnel:
                counts[f.funnel[why]] += 1
    asked: set[str] = set()  # the facts asked so far (see Item.fact)
    for f in families:
        c = checked[f.name]
        keep = [
            r
            for r in c.rows
            if items[r.sample_id].unit not in incomplete[f.name]
            and r.sample_id not in failed
            and r.sample_id not in superseded
        ]
        # an uncertain answer costs its row, not the unit (like an over-represented one), and
        # the rows released together with it (``Item.together``)
        mine = {r.sample_id: c.uncertain[r.sample_id] for r in keep if r.sample_id in c.uncertain}
        mine.update(repeated_facts([items[r.sample_id] for r in keep if r.sample_id not in mine], asked))
        group = [items[r.sample_id] for r in keep]
        mine.update(with_their_group(group, mine, TOGETHER))
        mine.update(f.balance([r for r in keep if r.sample_id not in mine]))
        mine.update(with_their_group(group, mine, TOGETHER))
        final[f.name] = [r for r in keep if r.sample_id not in mine]
        alone.update(mine)
        for why in mine.values():
            if why in f.funnel:
                counts[f.funnel[why]] += 1
    return final, alone, counts


def dropped_units(
    families: Sequence[ReleaseFamily[Any]],
    incomplete: dict[str, dict[str, str]],
    items: dict[str, Item],
    shipped: set[str],
    why: dict[str, str],
) -> dict[str, dict[str, str]]:
    """The units a family left out, with why: those no family shipped a row of, with the first
    family's reason (``dropped_landmarks``), and those some family shipped and another that
    had rows of them or skipped them did not, with each such family's reason
    (``partly_released``: a landmark whose image rows ship without its video rows). Units are
    those a family skipped or could not complete, and those of the families that release a
    unit's rows whole (a landmark whose video rows the count balance took); a family that
    leaves out some rows of a unit and ships others (a collaboration group) ships it."""
    noun = {f.name: f.noun for f in families}
    whole = {f.name for f in families if f.unit_rows is not None}
    shipped_by: dict[str, set[str]] = {}
    for s in shipped:
        shipped_by.setdefault(items[s].unit, set()).add(noun[items[s].family])
    left: dict[str, dict[str, str]] = {}  # unit -> family noun -> why it shipped none of it
    for f in families:
        for unit, reason in incomplete[f.name].items():
            left.setdefault(unit, {}).setdefault(f.noun, reason)
    for s, it in sorted(items.items()):
        if it.family in whole and s in why and noun[it.family] not in shipped_by.get(it.unit, set()):
            left.setdefault(it.unit, {}).setdefault(noun[it.family], why[s])
    gone = {u: next(iter(w.values())) for u, w in left.items() if u not in shipped_by}
    partly = {
        u: "; ".join(f"{n} rows: {reason}" for n, reason in w.items())
        for u, w in left.items()
        if u in shipped_by
    }
    return {"dropped_landmarks": dict(sorted(gone.items())), "partly_released": dict(sorted(partly.items()))}


def repeated_facts(rows: Sequence[Item], asked: set[str]) -> dict[str, str]:
    """Rows asking a fact already asked (``asked`` grows), in manifest order: a release asks a
    fact once, since a model that had read another row's answer would know it. The choice reads
    the question only, never the gold, so it leaves no answer more or less likely."""
    out = {}
    for it in rows:
        if not it.fact:
            continue
        if it.fact in asked:
            out[it.sample_id] = REPEATED_FACT
        asked.add(it.fact)
    return out


def shortfall(
    items: dict[str, Item],
    released: Sequence[Item],
    withheld: dict[str, str],
    quota: int,
    families: Sequence[ReleaseFamily[Any]] = (),
) -> dict[str, Any]:
    """Released rows per question task, and the tasks short of ``quota`` with why: every task
    of a family that asked anything, also those it found no candidates for."""
    rows = Counter(it.task for it in released if it.asks)
    asking = {it.family for it in items.values() if it.asks}
    planned = sorted(
        {it.task for it in items.values() if it.asks}
        | {t for f in families if f.name in asking for t in f.metrics}
    )
    held = Counter(items[s].task for s in withheld)
    short = {}
    for task in planned:
        if rows[task] < quota:
            why = f"{rows[task]} of {quota} rows"
            short[task] = why + (
                f" ({held[task]} withheld by the blind gate)" if held[task] else " (too few candidates)"
            )
    return {"task_rows": {t: rows[t] for t in planned}, "shortfall": short}


def withheld_rows(questions: Sequence[Item], blind: gate.GateResult) -> dict[str, str]:
    """The rows of the tasks and units the gate withheld, with the reason, and the rows released
    together with one of them (``Item.together``: a landmark's video rows go as one)."""
    out = {}
    for it in questions:
        if it.task in blind.withheld:
            out[it.sample_id] = f"{WITHHELD}: task {it.task} leaks ({blind.withheld[it.task][0]})"
        elif it.unit in blind.withheld_units:
            out[it.sample_id] = f"{WITHHELD}: {blind.withheld_units[it.unit]}"
    out.update(with_their_group(questions, out, f"{WITHHELD}: {TOGETHER}"))
    return out


def with_their_group(rows: Sequence[Item], gone: dict[str, str], why: str) -> dict[str, str]:
    """The rows of ``rows`` not in ``gone`` that share a ``together`` group with a row in it,
    each with ``why``: a family whose unit's rows are released as one loses them as one."""
    groups = {it.together for it in rows if it.together and it.sample_id in gone}
    return {it.sample_id: why for it in rows if it.together in groups and it.sample_id not in gone}


def blind_report(
    blind: gate.GateResult,
    gate_mode: Literal["enforce", "report"],
    withheld: dict[str, str],
    items: dict[str, Item],
    drawn: dict[str, int],
    replaced: int,
) -> BlindGate:
    return BlindGate(
        mode=gate_mode,
        passed=blind.passed,
        alpha=gate.ALPHA,
        box_prior_max=gate.BOX_PRIOR_MAX,
        tests=blind.tests,
        min_leak=significance.MIN_LEAK,
        failures=blind.failures,
        withheld=blind.withheld,
        withheld_units=blind.withheld_units,
        withheld_rows=len(withheld),
        withheld_by_family=dict(sorted(Counter(items[s].family for s in withheld).items())),
        unverified=blind.unverified,
        redrawn=dict(sorted(drawn.items())),
        replaced_rows=replaced,
        tasks=blind.tasks,
        families=blind.families,
    )


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
