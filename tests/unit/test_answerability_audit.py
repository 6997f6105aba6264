"""The human answerability audit's sample, reply checks, agreement and card paragraph, and the
reseal that keeps a release verifiable after the audit rewrites its QC files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rows import release_info
from skyqa import audit, integrity
from skyqa.blob import LocalBlobStore
from skyqa.contracts.base import dump_json
from skyqa.contracts.qa import AuditAnswer, AuditSample, QCRow
from skyqa.errors import InvalidInput

from services.qa_generator.significance import wilson


def qc_row(sid: str, task: str = "t1", family: str = "fam", **fields: Any) -> QCRow:
    base: dict[str, Any] = {
        "sample_id": sid,
        "family": family,
        "task": task,
        "unit": "u",
        "category": "c",
        "difficulty": "d",
        "kind": "choice",
        "status": "released",
        "blind": "none",
        "prompt": "which?",
        "options": [("A", "one"), ("B", "two"), ("C", "three"), ("D", "four")],
        "gold": ["B"],
    }
    return QCRow.model_validate(base | fields)


def ledger() -> list[QCRow]:
    rows = [qc_row(f"a{i}", "t1") for i in range(10)] + [qc_row(f"b{i}", "t2") for i in range(10)]
    rows += [qc_row(f"c{i}", "t1", family="other", gold=["A"]) for i in range(3)]
    rows += [qc_row("dropped", "t1", status="dropped"), qc_row("traj", "t1", kind="trajectory")]
    return rows


def test_the_sample_is_k_per_family_and_task_deterministic_and_blind_to_the_gold() -> None:
    rows = ledger()
    chosen = audit.stratified(rows, "run-1", 3)
    strata = [(r.family, r.task) for r in chosen]
    assert strata.count(("fam", "t1")) == 3 and strata.count(("fam", "t2")) == 3
    assert strata.count(("other", "t1")) == 3  # a stratum smaller than k gives all it has
    assert not {"dropped", "traj"} & {r.sample_id for r in chosen}  # released questions only
    again = audit.stratified(list(reversed(rows)), "run-1", 3)
    assert [r.sample_id for r in again] == [r.sample_id for r in chosen]  # not the ledger's order
    other_seed = audit.stratified(rows, "run-2", 3)
    assert [r.sample_id for r in other_seed] != [r.sample_id for r in chosen]
    regolded = [r.model_copy(update={"gold": ["D"]}) for r in rows]
    assert [r.sample_id for r in audit.stratified(regolded, "run-1", 3)] == [r.sample_id for r in chosen]
    # a larger k extends the sample instead of drawing another
    assert {r.sample_id for r in chosen} <= {r.sample_id for r in audit.stratified(rows, "run-1", 5)}


def test_replies_are_checked_against_what_the_row_accepts() -> None:
    choice = qc_row("x")
    assert audit.reply_of(choice, "C") == ["C"]
    hostile: tuple[Any, ...] = ("E", "c", ["C"], 3, None, "", "A" * 5000)
    for bad in hostile:
        with pytest.raises(InvalidInput, match="takes one of the options A, B, C, D"):
            audit.reply_of(choice, bad)
    multi = qc_row("m", kind="multi", gold=["A", "C"])
    assert audit.reply_of(multi, ["C", "A"]) == ["A", "C"]  # option order
    hostile = ([], ["A", "A"], ["Z"], "A", ["A", 1], ["A", "B", "C", "D", "A"])
    for bad in hostile:
        with pytest.raises(InvalidInput, match="list of distinct options"):
            audit.reply_of(multi, bad)
    count = qc_row("n", kind="count", options=[], gold=["7"])
    assert audit.reply_of(count, "007") == ["7"] and audit.reply_of(count, 7) == ["7"]
    assert audit.agrees(count, ["7"]) and not audit.agrees(count, ["6"])
    hostile = (True, -1, "7.0", "٣", "1e3", [7])
    for bad in hostile:
        with pytest.raises(InvalidInput, match="whole number"):
            audit.reply_of(count, bad)
    with pytest.raises(InvalidInput, match="at most 6 digits"):
        audit.reply_of(count, "1" * 40)
    with pytest.raises(InvalidInput, match="asks no question"):
        audit.reply_of(qc_row("t", kind="trajectory"), "A")


def answer(sid: str, reply: str, user: str = "ann") -> AuditAnswer:
    return AuditAnswer(sample_id=sid, user=user, answered_at=1.0, reply=[reply])


def test_agreement_per_task_with_wilson_intervals_and_every_disagreement() -> None:
    by_id = {r.sample_id: r for r in ledger()}
    sample = AuditSample(
        seed="run-1", per_stratum=3, rows=[r.sample_id for r in audit.stratified(ledger(), "run-1", 3)]
    )
    answers = [answer("a0", "B"), answer("a1", "B"), answer("a2", "A"), answer("a0", "C", "bo")]
    answers += [answer("b0", "B"), answer("dropped", "A"), answer("gone", "A")]  # the last two: not counted
    report = audit.summarize(answers, by_id, sample)
    assert report is not None
    t1, t2 = report.tasks["t1"], report.tasks["t2"]
    assert (t1.answered, t1.agreed, t1.agreement) == (4, 2, 0.5)  # a row two people answered counts twice
    assert t1.sampled == 6 and t2.sampled == 3  # both families' t1 strata
    assert tuple(t1.ci) == wilson(2, 4) and tuple(t2.ci) == wilson(1, 1)
    assert report.answers == 5 and report.users == ["ann", "bo"] and report.per_stratum == 3
    assert [(d.sample_id, d.user, d.reply, d.gold) for d in report.disagreements] == [
        ("a0", "bo", ["C"], ["B"]),
        ("a2", "ann", ["A"], ["B"]),
    ]
    assert audit.summarize([answer("dropped", "A")], by_id, sample) is None
    assert audit.wilson(0, 0) == (0.0, 1.0) and audit.wilson(0, 5)[0] == 0.0 and audit.wilson(5, 5)[1] == 1.0


def test_the_card_paragraph_is_replaced_in_place_or_appended() -> None:
    by_id = {r.sample_id: r for r in ledger()}
    report = audit.summarize([answer("a2", "A")], by_id, None)
    card = "# card\n\nintro\n\n" + audit.card_section(None) + "\n## Loading\n\ntext\n"
    assert "Nobody has answered" in card
    new = audit.with_card_section(card, report)
    assert "Nobody has answered" not in new and new.endswith("\n## Loading\n\ntext\n")
    assert "| t1 | fam | 0 | 1 | 0 | 0.00 [0.00, 0.79] |" in new
    assert "- `a2` (t1): ann answered A, gold B" in new
    assert audit.with_card_section(new, report) == new  # rewriting is stable
    old = audit.with_card_section("# an older card\n", report)  # written before the audit
    assert old.startswith("# an older card\n\n" + audit.CARD_BEGIN) and old.count(audit.CARD_BEGIN) == 1


def test_reseal_keeps_a_rewritten_release_verifiable(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    root = "runs/r1"
    store.put(f"{root}/qc_report.json", b"{}")
    store.put(f"{root}/video.mp4", b"frames")
    info = release_info()
    integrity.seal(store, "r1", info)
    assert integrity.verify(tmp_path / root)[1] == []
    store.put(f"{root}/qc_report.json", b'{"audit": 1}')
    store.put(f"{root}/qc_audit/answers/ann/x.json", b"{}")
    problems = {str(p) for p in integrity.verify(tmp_path / root)[1]}
    assert problems == {"qc_report.json: changed", "qc_audit/answers/ann/x.json: not listed in SHA256SUMS"}
    integrity.reseal(store, "r1", ["qc_report.json", "qc_audit/answers/ann/x.json"])
    checked, problems_after = integrity.verify(tmp_path / root)
    assert problems_after == [] and checked == 4
    with pytest.raises(InvalidInput, match="not a file of the release"):
        integrity.reseal(store, "r1", ["eval/items.jsonl"])
    with pytest.raises(InvalidInput, match="never sealed"):
        integrity.reseal(store, "r2", ["qc_report.json"])


def test_stored_answers_are_untrusted(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    rows = ledger()
    assert audit.summary_of(store, "r1", rows) is None
    store.put(audit.answer_key("r1", "ann", "a2"), dump_json(answer("a2", "A")))
    summary = audit.summary_of(store, "r1", rows)
    assert summary is not None and summary.tasks["t1"].agreed == 0
    store.put(
        audit.answer_key("r1", "eve", "a1"), dump_json(answer("a1", "B", "ann"))
    )  # filed under another name
    with pytest.raises(InvalidInput, match=r"answers/eve/a1\.json holds the answer of another user or row"):
        audit.load_answers(store, "r1")
    store.put(audit.answer_key("r1", "eve", "a1"), b'{"sample_id": "a1"}')
    with pytest.raises(InvalidInput, match=r"a1\.json is invalid"):
        audit.load_answers(store, "r1")
    with pytest.raises(InvalidInput, match="user name"):
        audit.answer_key("r1", "../x", "a1")
