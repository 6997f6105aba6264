"""The workbench's audit mode: a signed-in person answers the release's audit sample (see
:mod:`skyqa.audit`) from exactly the system prompt, user prompt, options and media a model gets,
and the answers go into the release's QC.

Nothing this module sends before a row is answered names its gold: not the gold, not the
answer boxes or reasoning steps, not even the media's paths (a file name can say what it shows):
media are served by their place in the row. An answer is stored once per (person, row); the
same reply again is accepted as already stored, another one refused. After every answer the
QC report's ``audit`` section and the dataset card's audit paragraph are rewritten from all
stored answers and their lines of ``SHA256SUMS`` resealed, so ``skyqa verify`` still passes.
"""

from __future__ import annotations

import json
import mimetypes
import posixpath
import threading
import time
from typing import Any

from skyqa import audit, integrity, keys
from skyqa.contracts.base import dump_json
from skyqa.contracts.qa import AuditAnswer, AuditSample, QCRow
from skyqa.errors import InvalidInput

from services.gateway import rows
from services.gateway.stored import ParsedCache

MAX_ANSWER_BYTES = 4096
# rewrites of the report after an answer, each from every answer stored by then: another
# gateway's answer stored while one rewrites is counted by the next pass
MAX_PASSES = 5
_WRITING = threading.Lock()  # one rewrite of a release's QC files at a time in this process


class AlreadyAnswered(InvalidInput):
    """This person answered the row with another reply (answered 409)."""


def sample(cache: ParsedCache, run_id: str, per_stratum: int) -> list[QCRow]:
    return audit.stratified(rows.ledger(cache, run_id).rows, run_id, per_stratum)


def _in_sample(cache: ParsedCache, run_id: str, sample_id: str, per_stratum: int) -> QCRow:
    for r in sample(cache, run_id, per_stratum):
        if r.sample_id == sample_id:
            return r
    raise rows.NotFound(f"row {sample_id!r} is not in the audit sample of run {run_id!r}")


def _mine(cache: ParsedCache, run_id: str, user: str) -> dict[str, AuditAnswer]:
    return {a.sample_id: a for a in audit.load_answers(cache.store, run_id) if a.user == user}


def queue(cache: ParsedCache, run_id: str, user: str, per_stratum: int) -> dict[str, Any]:
    """The audit sample for ``user``: each row's id, family, task and kind and whether (and
    what) they answered, with no gold; ``next`` is their first unanswered row."""
    chosen = sample(cache, run_id, per_stratum)
    mine = _mine(cache, run_id, user)
    listed = [
        {
            "sample_id": r.sample_id,
            "family": r.family,
            "task": r.task,
            "kind": r.kind,
            "reply": mine[r.sample_id].reply if r.sample_id in mine else None,
        }
        for r in chosen
    ]
    left = [r["sample_id"] for r in listed if r["reply"] is None]
    return {
        "user": user,
        "per_stratum": per_stratum,
        "seed": run_id,
        "rows": listed,
        "answered": len(listed) - len(left),
        "next": left[0] if left else None,
    }


def _media_url(run_id: str, sample_id: str, index: int) -> str:
    return f"/v1/workbench/runs/{run_id}/audit/rows/{sample_id}/media/{index}"


def item(cache: ParsedCache, run_id: str, sample_id: str, per_stratum: int) -> dict[str, Any]:
    """One sampled row as a model is asked it: the family's system and user prompts, the
    options (ids and labels) and the media in prompt order with the labels the prompt uses."""
    entry = _in_sample(cache, run_id, sample_id, per_stratum)
    fam, _, row = rows.load_row(cache, run_id, rows.scene_of(cache, run_id), entry)
    from skyqa.families import FAMILIES

    asked = next((f for f in FAMILIES if f is fam), None)
    if asked is None:
        raise InvalidInput(f"family {fam.name!r} asks no questions")
    system, user = asked.prompts(row)
    it = fam.item(row)
    return {
        "sample_id": sample_id,
        "family": entry.family,
        "task": entry.task,
        "kind": it.kind,
        "system_prompt": system,
        "user_prompt": user,
        "options": [{"id": oid, "label": label} for oid, label in it.options],
        "media": [
            {"label": m.label, "video": m.fps is not None, "url": _media_url(run_id, sample_id, i)}
            for i, m in enumerate(fam.media(row))
        ],
    }


def medium(cache: ParsedCache, run_id: str, sample_id: str, index: int, per_stratum: int) -> tuple[str, str]:
    """The store key of a sampled row's ``index``-th medium, and the name it is served under
    (its place in the row, with its file's extension for the content type)."""
    entry = _in_sample(cache, run_id, sample_id, per_stratum)
    fam, _, row = rows.load_row(cache, run_id, rows.scene_of(cache, run_id), entry)
    media = fam.media(row)
    if not 0 <= index < len(media):
        raise rows.NotFound(f"row {sample_id!r} shows {len(media)} media, not a medium {index}")
    path = media[index].path
    ext = posixpath.splitext(path)[1] if mimetypes.guess_type(path)[0] else ""
    return keys.stored(run_id, path), f"{sample_id}/media/{index}{ext}"


def parse_answer(body: bytes) -> tuple[str, Any]:
    """The row and reply of an answer body ``{"sample_id": ..., "reply": ...}``."""
    if len(body) > MAX_ANSWER_BYTES:
        raise InvalidInput(f"an answer is at most {MAX_ANSWER_BYTES} bytes")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise InvalidInput('an answer is JSON: {"sample_id": "<row>", "reply": ...}') from None
    if not isinstance(doc, dict) or set(doc) != {"sample_id", "reply"}:
        raise InvalidInput('an answer is a JSON object with exactly "sample_id" and "reply"')
    sid = doc["sample_id"]
    if not isinstance(sid, str) or not sid or len(sid) > 200:
        raise InvalidInput("sample_id is a row id (a string of at most 200 characters)")
    return sid, doc["reply"]


def record(
    cache: ParsedCache, run_id: str, user: str, body: bytes, per_stratum: int, now: float | None = None
) -> dict[str, Any]:
    """Store ``user``'s answer to a sampled row and rewrite the release's audit from every
    stored answer. ``created`` is False when the same reply was stored before."""
    sid, given = parse_answer(body)
    store = cache.store
    root = keys.run_prefix(run_id)
    if not store.exists(f"{root}/{integrity.SUMS}"):
        raise InvalidInput(f"run {run_id!r} has no sealed release to audit")
    entry = _in_sample(cache, run_id, sid, per_stratum)
    reply = audit.reply_of(entry, given)
    key = audit.answer_key(run_id, user, sid)
    with _WRITING:
        if store.exists(key):
            before = audit.load_answers(store, run_id)
            stored = next((a for a in before if a.user == user and a.sample_id == sid), None)
            if stored is not None and stored.reply != reply:
                raise AlreadyAnswered(
                    f"{user} answered row {sid!r} with {', '.join(stored.reply)} already; "
                    "an answer is not changed once given"
                )
            created = False
        else:
            answer = AuditAnswer(
                sample_id=sid, user=user, answered_at=round(now or time.time(), 3), reply=reply
            )
            store.put(key, dump_json(answer), "application/json")
            created = True
        chosen = sample(cache, run_id, per_stratum)
        drawn = AuditSample(seed=run_id, per_stratum=per_stratum, rows=[r.sample_id for r in chosen])
        old = audit.load_sample(store, run_id)
        # the record names the largest sample answered from; a smaller setting later is a prefix
        if old is None or (old.seed == run_id and old.per_stratum < per_stratum):
            store.put(audit.sample_key(run_id), dump_json(drawn), "application/json")
        rewrite(cache, run_id)
    return {"created": created, "sample_id": sid, "reply": reply}


def rewrite(cache: ParsedCache, run_id: str) -> None:
    """Rewrite the QC report's audit section and the card's audit paragraph from every stored
    answer, and reseal their lines of ``SHA256SUMS``; again while answers arrive meanwhile."""
    store = cache.store
    root = keys.run_prefix(run_id)
    index = rows.ledger(cache, run_id)
    report = rows.qc_report(cache, run_id)
    files = keys.release_common(run_id, report.scene_id)
    listed: list[str] = []
    for _ in range(MAX_PASSES):
        listed = store.list(f"{root}/{audit.ANSWERS}/")
        summary = audit.summarize(
            audit.load_answers(store, run_id), index.by_id, audit.load_sample(store, run_id)
        )
        current = rows.qc_report(cache, run_id).model_copy(update={"audit": summary})
        store.put(files["qc_report"], dump_json(current), "application/json")
        changed = [files["qc_report"]]
        if store.exists(files["dataset_card"]):
            card = store.get(files["dataset_card"]).decode("utf-8", errors="replace")
            store.put(files["dataset_card"], audit.with_card_section(card, summary).encode(), "text/markdown")
            changed.append(files["dataset_card"])
        if store.exists(audit.sample_key(run_id)):
            changed.append(audit.sample_key(run_id))
        rels = [
            keys.release_path(k) for k in [*changed, *listed] if integrity.is_released(keys.release_path(k))
        ]
        integrity.reseal(store, run_id, rels)
        if store.list(f"{root}/{audit.ANSWERS}/") == listed:
            return
