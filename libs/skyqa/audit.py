"""The human answerability audit: people answer a stratified sample of a release's questions from
the prompt and media a model gets, with the gold hidden, and their agreement with the gold is
reported per task (in ``qc_report.json``, the dataset card and the workbench).

A question a careful person answers differently from its gold asks something the media do not
show; agreement per task is the measure of that, and every disagreement is a row to look at.

The sample is drawn from the QC ledger: the first ``per_stratum`` released questions of every
(family, task) in an order hashed from the release's run id, so it is the same sample on every
gateway and after every refresh, and a larger ``per_stratum`` extends it rather than redraws it.
The answers live under the release (``qc_audit/``), one file per (person, row), so they are
covered by ``SHA256SUMS`` like the rest of the QC.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts.base import first_error
from skyqa.contracts.qa import (
    AuditAnswer,
    AuditDisagreement,
    AuditReport,
    AuditSample,
    AuditTask,
    QCRow,
)
from skyqa.errors import InvalidInput

FOLDER = "qc_audit"
SAMPLE = f"{FOLDER}/sample.json"
ANSWERS = f"{FOLDER}/answers"
ANSWERABLE = ("choice", "multi", "count")  # kinds a person answers (a trajectory asks nothing)
MAX_COUNT_DIGITS = 6
Z95 = 1.959963984540054
CARD_BEGIN = "<!-- skyqa:audit -->"
CARD_END = "<!-- /skyqa:audit -->"


def _rank(seed: str, sample_id: str) -> str:
    return hashlib.sha256(f"{seed}\0{sample_id}".encode()).hexdigest()


def stratified(rows: Iterable[QCRow], seed: str, per_stratum: int) -> list[QCRow]:
    """The first ``per_stratum`` released questions of every (family, task), in the order
    ``seed`` hashes their ids into; strata in name order. The gold takes no part in the draw."""
    strata: dict[tuple[str, str], list[QCRow]] = defaultdict(list)
    for r in rows:
        if r.status == "released" and r.kind in ANSWERABLE:
            strata[(r.family, r.task)].append(r)
    out: list[QCRow] = []
    for stratum in sorted(strata):
        out += sorted(strata[stratum], key=lambda r: _rank(seed, r.sample_id))[:per_stratum]
    return out


def answer_key(run_id: str, user: str, sample_id: str) -> str:
    keys.validate_id(user, "user name")
    return keys.validate_key(f"{keys.run_prefix(run_id)}/{ANSWERS}/{user}/{sample_id}.json")


def sample_key(run_id: str) -> str:
    return f"{keys.run_prefix(run_id)}/{SAMPLE}"


def reply_of(row: QCRow, reply: Any) -> list[str]:
    """``reply`` as stored: one option id of the row (a single choice), several distinct ones in
    option order (a multi-select), or a count without leading zeros. Anything else is refused
    with what the row accepts."""
    ids = [oid for oid, _ in row.options]
    if row.kind == "choice":
        if not isinstance(reply, str) or reply not in ids:
            raise InvalidInput(f"row {row.sample_id!r} takes one of the options {', '.join(ids)}")
        return [reply]
    if row.kind == "multi":
        if (
            not isinstance(reply, list)
            or not reply
            or len(reply) > len(ids)
            or not all(isinstance(x, str) and x in ids for x in reply)
            or len(set(reply)) != len(reply)
        ):
            raise InvalidInput(
                f"row {row.sample_id!r} takes a list of distinct options among {', '.join(ids)}"
            )
        return [oid for oid in ids if oid in reply]
    if row.kind == "count":
        text = str(reply) if isinstance(reply, int) and not isinstance(reply, bool) else reply
        if not isinstance(text, str) or not (text.isascii() and text.isdigit()):
            raise InvalidInput(f"row {row.sample_id!r} takes a count (a whole number)")
        if len(text) > MAX_COUNT_DIGITS:
            raise InvalidInput(f"a count has at most {MAX_COUNT_DIGITS} digits")
        return [str(int(text))]
    raise InvalidInput(f"row {row.sample_id!r} is a {row.kind!r} row, which asks no question")


def agrees(row: QCRow, reply: Sequence[str]) -> bool:
    if row.kind == "count":
        gold = row.gold[0] if row.gold else ""
        return len(reply) == 1 and gold.isdigit() and reply[0] == str(int(gold))
    return set(reply) == set(row.gold)


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The Wilson score 95 % interval of ``hits`` of ``n`` (0..1 when nothing was answered)."""
    if n <= 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def summarize(
    answers: Iterable[AuditAnswer], ledger: Mapping[str, QCRow], sample: AuditSample | None
) -> AuditReport | None:
    """Agreement with the gold per task over every stored answer to a released question of the
    ledger (an answer to a row a refresh no longer releases is not counted); None when nobody
    answered."""
    counted = [
        (a, row)
        for a in answers
        if (row := ledger.get(a.sample_id)) is not None
        and row.status == "released"
        and row.kind in ANSWERABLE
    ]
    if not counted:
        return None
    sampled: dict[str, int] = defaultdict(int)
    for sid in sample.rows if sample else []:
        if (row := ledger.get(sid)) is not None:
            sampled[row.task] += 1
    hits: dict[str, list[bool]] = defaultdict(list)
    family: dict[str, str] = {}
    wrong = []
    for a, row in sorted(counted, key=lambda ar: (ar[1].family, ar[1].task, ar[0].sample_id, ar[0].user)):
        ok = agrees(row, a.reply)
        hits[row.task].append(ok)
        family[row.task] = row.family
        if not ok:
            wrong.append(
                AuditDisagreement(
                    sample_id=a.sample_id,
                    family=row.family,
                    task=row.task,
                    user=a.user,
                    reply=a.reply,
                    gold=list(row.gold),
                )
            )
    tasks = {}
    for task, oks in sorted(hits.items()):
        n, k = len(oks), sum(oks)
        tasks[task] = AuditTask(
            family=family[task],
            sampled=sampled.get(task, 0),
            answered=n,
            agreed=k,
            agreement=round(k / n, 4),
            ci=list(wilson(k, n)),
        )
    return AuditReport(
        per_stratum=sample.per_stratum if sample else 0,
        seed=sample.seed if sample else "",
        sampled=len(sample.rows) if sample else 0,
        answers=len(counted),
        users=sorted({a.user for a, _ in counted}),
        tasks=tasks,
        disagreements=wrong,
    )


def _parse(kind: type[Any], data: bytes, what: str) -> Any:
    try:
        return kind.model_validate_json(data)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise InvalidInput(f"{what} is invalid at {where or 'the top'}: {msg}") from None


def load_answers(store: BlobStore, run_id: str) -> list[AuditAnswer]:
    """Every stored answer of the run; a file that is not an answer, or not where its own
    user and row say it belongs, is an error naming it (stored files are untrusted)."""
    out = []
    for key in store.list(f"{keys.run_prefix(run_id)}/{ANSWERS}/"):
        if key.rsplit("/", 1)[-1].startswith("."):
            continue
        a: AuditAnswer = _parse(AuditAnswer, store.get(key), keys.release_path(key))
        if key != answer_key(run_id, a.user, a.sample_id):
            raise InvalidInput(f"{keys.release_path(key)} holds the answer of another user or row")
        out.append(a)
    return out


def load_sample(store: BlobStore, run_id: str) -> AuditSample | None:
    key = sample_key(run_id)
    if not store.exists(key):
        return None
    sample: AuditSample = _parse(AuditSample, store.get(key), SAMPLE)
    return sample


def card_section(audit: AuditReport | None) -> str:
    """The dataset card's audit paragraph, between markers the workbench rewrites it by."""
    if audit is None:
        body = (
            "Nobody has answered the audit sample yet. The gateway's workbench has an audit mode: "
            "a person answers a stratified sample of the released questions (per family and task) "
            "from the prompt and media a model gets, with the gold hidden; their agreement with "
            "the gold is then reported here per task."
        )
    else:
        rows = "\n".join(
            f"| {task} | {t.family} | {t.sampled} | {t.answered} | {t.agreed} | {t.agreement:.2f} "
            f"[{t.ci[0]:.2f}, {t.ci[1]:.2f}] |"
            for task, t in sorted(audit.tasks.items())
        )
        wrong = "\n".join(
            f"- `{d.sample_id}` ({d.task}): {d.user} answered {', '.join(d.reply)}, gold {', '.join(d.gold)}"
            for d in audit.disagreements
        )
        sample = (
            f"{audit.sampled} rows, {audit.per_stratum} per (family, task), drawn with seed `{audit.seed}`"
            if audit.per_stratum
            else "no sample record"
        )
        body = (
            f"People answered released questions from the prompt and media a model gets, with the "
            f"gold hidden (sample: {sample}; {audit.answers} answers by "
            f"{', '.join(audit.users)}; `qc_audit/` holds every answer with who and when). "
            "Agreement with the gold per task (Wilson 95 % interval):\n\n"
            "| task | family | sampled | answered | agreed | agreement [95 % CI] |\n"
            f"|---|---|---|---|---|---|\n{rows}\n\n"
            f"Disagreements, to review:\n\n{wrong or '- none'}"
        )
    return f"{CARD_BEGIN}\n## Human answerability audit\n\n{body}\n{CARD_END}\n"


def with_card_section(card: str, audit: AuditReport | None) -> str:
    """``card`` with its audit paragraph replaced (appended to a card written before it had one)."""
    start, end = card.find(CARD_BEGIN), card.find(CARD_END)
    if start < 0 or end < start:
        return card.rstrip("\n") + "\n\n" + card_section(audit)
    tail = card[end + len(CARD_END) :].removeprefix("\n")
    return card[:start] + card_section(audit) + tail


def summary_of(store: BlobStore, run_id: str, ledger: Sequence[QCRow]) -> AuditReport | None:
    """The audit section of a release whose ledger is ``ledger``, from its stored answers."""
    answers = load_answers(store, run_id)
    if not answers:
        return None
    return summarize(answers, {r.sample_id: r for r in ledger}, load_sample(store, run_id))
