"""The workbench's row browser: every row a release checked, from its QC ledger, filtered and
paged on the server; and one row in full, read through its task family's plugin interface.

Released rows come from their family's manifest, dropped ones from the QA plan (as planned,
before rendering filled in what it decides). Every stored file is untrusted: a line that is not
what its contract says is an error naming the file and line, never a crash.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from skyqa import keys
from skyqa.contracts.base import first_error
from skyqa.contracts.qa import QCReport, QCRow
from skyqa.errors import BlobNotFound, InvalidInput

from services.gateway.stored import ParsedCache, contract

if TYPE_CHECKING:
    from skyqa.families import ReleaseFamily

# skyqa.families (every family's planning, checks and exports) loads with the first row asked
# for, not when the gateway starts: most gateways never show a row

FILTERS = ("family", "task", "difficulty", "unit", "category", "status", "blind")
MAX_PAGE = 200
MAX_RELATED = 50  # rows sharing a medium listed with a row (a survey view has hundreds)


class NotFound(InvalidInput):
    """What was asked for is not in this release (answered 404)."""


@dataclass(frozen=True)
class RowIndex:
    rows: list[QCRow]  # in ledger order: family by family, as released
    by_id: dict[str, QCRow]
    by_media: dict[str, list[str]]  # media path -> the rows that show it
    facets: dict[str, dict[str, int]]  # filter -> value -> rows


def parse_ledger(data: bytes) -> RowIndex:
    rows = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(QCRow.model_validate_json(line))
        except ValidationError as exc:
            where, msg = first_error(exc)
            raise InvalidInput(f"qc_rows.jsonl line {n} is invalid at {where}: {msg}") from None
    by_media: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        for path in dict.fromkeys(r.media):
            by_media[path].append(r.sample_id)
    facets = {f: dict(sorted(Counter(str(getattr(r, f)) for r in rows).items())) for f in FILTERS}
    return RowIndex(rows, {r.sample_id: r for r in rows}, dict(by_media), facets)


def ledger(cache: ParsedCache, run_id: str) -> RowIndex:
    key = f"{keys.run_prefix(run_id)}/qc_rows.jsonl"
    try:
        return cache.get(key, parse_ledger)
    except BlobNotFound:
        raise NotFound(
            f"run {run_id!r} has no QC ledger (qc_rows.jsonl): it has no release yet, or was released "
            "before the ledger existed (`skyqa refresh` rewrites its release with one)"
        ) from None


def select(index: RowIndex, filters: dict[str, str], text: str, offset: int, limit: int) -> dict[str, Any]:
    """One page of the rows that match every filter (exact values) and contain ``text`` in
    their id or prompt, with the total and every filter's values over the whole release."""
    wanted = {k: v for k, v in filters.items() if v}
    needle = text.strip().lower()
    hits = [
        r
        for r in index.rows
        if all(str(getattr(r, k)) == v for k, v in wanted.items())
        and (not needle or needle in r.sample_id.lower() or needle in r.prompt.lower())
    ]
    page = hits[offset : offset + min(limit, MAX_PAGE)]
    return {
        "total": len(hits),
        "offset": offset,
        "limit": limit,
        "rows": [r.model_dump(mode="json", exclude={"prompt"}) | {"prompt": r.prompt[:160]} for r in page],
        "facets": index.facets,
    }


def family_named(name: str) -> ReleaseFamily[Any]:
    from skyqa.families import RELEASED

    for f in RELEASED:
        if f.name == name:
            return f
    raise InvalidInput(f"the ledger names a task family this gateway does not know: {name!r}")


def _by_id(data: bytes) -> dict[str, bytes]:
    """A manifest's lines by sample id; only the asked row is validated."""
    out = {}
    for line in data.splitlines():
        if line.strip():
            try:
                sid = json.loads(line).get("sample_id")
            except (ValueError, AttributeError):
                continue  # not a row: the asked row is then not found, which is reported
            if isinstance(sid, str):
                out[sid] = line
    return out


def json_doc(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"stored file is not JSON this page reads: {str(exc)[:200]}") from None


def _raw_row(cache: ParsedCache, run_id: str, scene_id: str, entry: QCRow, fam: ReleaseFamily[Any]) -> Any:
    if entry.status != "released":  # dropped, or withheld by a failed gate: only planned
        plan = cache.get(keys.qa_plan(run_id), json_doc)
        rows = plan.get("rows", {}).get(fam.name, []) if isinstance(plan, dict) else []
        for r in rows if isinstance(rows, list) else []:
            if isinstance(r, dict) and r.get("sample_id") == entry.sample_id:
                return r
        raise NotFound(f"{entry.status} row {entry.sample_id!r} is not in the QA plan")
    from skyqa.families import release_files

    manifest = release_files(run_id, scene_id, [fam])[fam.manifest]
    try:
        line = cache.get(manifest, _by_id, "by_id").get(entry.sample_id)
    except BlobNotFound:
        line = None
    if line is None:
        raise NotFound(f"row {entry.sample_id!r} is not in its manifest {keys.release_path(manifest)}")
    return json.loads(line)


def origin(cache: ParsedCache, run_id: str, scene_id: str, path: str) -> dict[str, Any] | None:
    """The render request a media file came from: the record naming it as its output in the
    render_requests sidecar, a landmark's recorded views, or its mission's render request."""
    root = keys.run_prefix(run_id)
    sources = [keys.release_common(run_id, scene_id)["render_requests"]]
    parts = path.split("/")
    if path.startswith(f"scene_data/{scene_id}/landmarks_raw/rgb_views/") and len(parts) > 5:
        sources.append(keys.landmark_part(run_id, scene_id, parts[4]))
    if path.startswith("video_tasks/missions/") and len(parts) > 3:
        sources.append(f"{root}/video_tasks/missions/{parts[2]}/{keys.RENDER_REQUEST}")
    for source in sources:
        try:
            keys.validate_key(source)
            doc = cache.get(source, json_doc)
        except (BlobNotFound, InvalidInput):
            continue
        found = _naming(doc, path)
        if found is not None:
            return {"source": keys.release_path(source), "request": found}
        if source.endswith(keys.RENDER_REQUEST):
            return {"source": keys.release_path(source), "request": doc}
    return None


def _naming(doc: Any, path: str) -> dict[str, Any] | None:
    """The innermost object in ``doc`` with a field whose value is ``path``."""
    if isinstance(doc, dict):
        for v in doc.values():
            inner = _naming(v, path) if isinstance(v, dict | list) else None
            if inner is not None:
                return inner
        return doc if path in doc.values() else None
    if isinstance(doc, list):
        for v in doc:
            inner = _naming(v, path)
            if inner is not None:
                return inner
    return None


def qc_report(cache: ParsedCache, run_id: str) -> QCReport:
    try:
        return cache.get(f"{keys.run_prefix(run_id)}/qc_report.json", contract(QCReport, "qc_report.json"))
    except BlobNotFound:
        raise NotFound(f"run {run_id!r} has no QC report yet") from None


def scene_of(cache: ParsedCache, run_id: str) -> str:
    return keys.validate_id(qc_report(cache, run_id).scene_id, "scene id")


def load_row(
    cache: ParsedCache, run_id: str, scene_id: str, entry: QCRow
) -> tuple[ReleaseFamily[Any], Any, Any]:
    """A ledger entry's family, its row as stored and as its family's contract model."""
    fam = family_named(entry.family)
    raw = _raw_row(cache, run_id, scene_id, entry, fam)
    try:
        row = fam.row_model.model_validate(raw)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise InvalidInput(f"row {entry.sample_id!r} is invalid at {where}: {msg}") from None
    return fam, raw, row


def row_detail(cache: ParsedCache, run_id: str, sample_id: str) -> dict[str, Any]:
    """One row in full: its ledger entry, the row as stored, its prompts, options and gold, its
    media with the boxes its answer places on them, its reasoning steps, the render request of
    each medium, and the rows that show the same media."""
    index = ledger(cache, run_id)
    entry = index.by_id.get(sample_id)
    if entry is None:
        raise NotFound(f"no row {sample_id!r} in run {run_id!r}")
    scene_id = scene_of(cache, run_id)
    fam, raw, row = load_row(cache, run_id, scene_id, entry)
    item = fam.item(row)
    system = user = ""
    steps: list[dict[str, Any]] = []
    from skyqa.families import FAMILIES

    asked = next((f for f in FAMILIES if f is fam), None)  # a family of questions
    if asked is not None:
        system, user = asked.prompts(row)
        steps = [s.model_dump(mode="json") for s in asked.steps(row)]
    media = fam.media(row)
    marks = fam.marks(row)
    # rows sharing its rarest media first: a view two rows show pairs them, a reference image
    # every row of a landmark shows does not
    shared = sorted((index.by_media.get(m.path, []) for m in media), key=len)
    related = [s for s in dict.fromkeys(s for group in shared for s in sorted(group)) if s != sample_id]
    related = related[:MAX_RELATED]
    return {
        "entry": entry.model_dump(mode="json"),
        "system_prompt": system,
        "user_prompt": user or item.prompt,
        "options": [{"id": oid, "label": label, "gold": oid in item.gold} for oid, label in item.options],
        "gold": sorted(item.gold),
        "kind": item.kind,
        "media": [
            {
                "label": m.label,
                "path": m.path,
                "video": m.fps is not None,
                "marks": [{"box": list(k.box), "role": k.role} for k in marks if k.path == m.path],
                "origin": origin(cache, run_id, scene_id, m.path),
            }
            for m in media
        ],
        "steps": steps,
        "related": [
            index.by_id[s].model_dump(mode="json", include={"sample_id", "task", "status"}) for s in related
        ],
        "row": raw,
    }
