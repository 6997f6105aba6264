#!/usr/bin/env python3
"""Independent adversarial audit of a skyqa release: can a model that never sees a pixel answer it?

A second opinion on a release, written separately from the release's own blind gate
(``services/qa_generator/gate.py`` and ``blind_solvers.py``): it imports nothing of the project
(no services, no gate, no solvers, no contracts) and reads the release files directly, so a
blind spot of the gate is not also a blind spot here.

    python scripts/blind_audit.py <release-folder> [--json out.json] [--family NAME]
                                  [--correction hier|bh|holm|none] [--alpha 0.05] [--margin 0.10]

Input: the release folder (``.../runs/<run-id>/``). The rows are the ``status == "released"``
lines of ``qc_rows.jsonl`` (task, unit, kind, prompt, options, gold); the full question text is
taken from the family manifests (``image_tasks/manifests/*.{image,collab,ultravr}_qa.jsonl``,
``video_tasks/manifests/*.{video,navigation}_qa.jsonl``), whose row counts are cross-checked
against the ledger. Without a ledger the manifests are read on their own.

Each task is attacked by solvers that read only text (question, option labels, option ids):
priors (letter, label), numeric and length/alphabetical rank rules and learned ranks, boosted
trees over hand-made option features, a TF-IDF logistic regression pairing question and option
words, nearest-question and exact-question memory (within the task and across the family's
tasks), odd-one-out and grid-adjacency rules and other form rules (``REGISTRY`` lists them).
Learners are trained leave-one-unit-out (the unit: landmark, mission, UAV group or survey view;
all of its rows are held out together; above 20 units, 10 unit-grouped folds): that accuracy
(exact set for multi-answer rows) is the one reported, against chance = mean 1/len(options)
(counts: 1/number of distinct gold counts of the task), and multi-answer rows also against a
size-matched null (random options of the size the attack picked).

The p values are exact one-sided (Poisson-)binomial tails. A rule's hits are independent given
the options, so its leave-one-unit-out hits are tested directly. A learner's are not (two rows
that are each other's nearest neighbour, or share a majority prior, are right or wrong together:
in a random-gold simulation their hit variance was 1.7-3x binomial), so its p comes from a
prequential pass of the same attack: each block of units answered only from the units before it
in one seeded order of the family's units, whose hits are exactly independent Bernoulli(1/k)
when golds carry no text signal.

A (task, attack) is flagged when its accuracy exceeds chance + margin and its adjusted p is
below alpha; the unadjusted criterion (p < alpha alone, which a sound release of a thousand
tests meets almost always) is reported beside it. The default adjustment is hierarchical: the
tests of one task (or family pool) get one Simes p, Benjamini-Hochberg selects tasks, and Holm
tests the attacks within a selected task at alpha * selected / tasks (Benjamini-Bogomolov), so a
sound release is flagged with probability about alpha and a leak that many attacks find does not
let a fluke elsewhere through.

The "avoid X" check asks, for every attack that uses no gold (a rule), whether picking uniformly
among the options X did not pick beats chance, i.e. whether X is right less often than chance:
a trace of rows filtered on X. Every attack is also pooled over each family's tasks.

Exit codes: 0 nothing flagged, 1 something flagged, 2 unreadable input.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # a shared 2-core machine: one thread per model

import argparse
import json
import math
import re
import sys
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from scipy.stats import binom
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import normalize

Answer = frozenset[str]  # option ids, or the count as text
Scores = np.ndarray  # one float per option, higher = more likely the gold

MAX_LOUO_UNITS = 20
GROUPED_FOLDS = 10
QUESTION_KINDS = ("choice", "multi", "count")
MANIFEST_GLOBS = (
    "image_tasks/manifests/*.image_qa.jsonl",
    "image_tasks/manifests/*.collab_qa.jsonl",
    "image_tasks/manifests/*.ultravr_qa.jsonl",
    "video_tasks/manifests/*.video_qa.jsonl",
    "video_tasks/manifests/*.navigation_qa.jsonl",
)
_STOP_WORDS = (
    "a an the of to in on at by for from with and or is are was were be been it its this that these "
    "those which what who whom whose where when how as into onto than then there their them they you "
    "your our we i he she his her do does did has have had will would can could should"
)
STOP = frozenset(_STOP_WORDS.split())
_NEGATION_WORDS = "not no never none neither nor nothing nobody without cannot isn't aren't"
NEGATIONS = frozenset(_NEGATION_WORDS.split())
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


# -- rows -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    sample_id: str
    family: str
    task: str
    unit: str
    kind: str  # "choice" | "multi" | "count"
    question: str  # the prompt without its option lines
    options: tuple[tuple[str, str], ...]  # (option id, label); empty for counts
    gold: Answer

    @property
    def k(self) -> int:
        return len(self.options)

    @property
    def ids(self) -> list[str]:
        return [i for i, _ in self.options]

    @property
    def labels(self) -> list[str]:
        return [lab for _, lab in self.options]

    def gold_labels(self) -> frozenset[str]:
        return frozenset(norm(lab) for i, lab in self.options if i in self.gold)

    def gold_index(self) -> list[int]:
        return [j for j, i in enumerate(self.ids) if i in self.gold]


def norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOP}


def strip_options(prompt: str, options: Sequence[tuple[str, str]]) -> str:
    """The question without its option list ("Options:" and "A. label" lines)."""
    out = []
    ids = {i for i, _ in options}
    labels = {norm(lab) for _, lab in options}
    for line in prompt.splitlines():
        s = line.strip()
        if s.lower().rstrip(":") in ("options", "choices", "answer options"):
            continue
        m = re.match(r"^\(?([A-Za-z0-9]{1,3})[.):]\s*(.*)$", s)
        if m and m.group(1) in ids and norm(m.group(2)) in labels:
            continue
        out.append(line)
    return "\n".join(out).strip()


# -- reading a release ------------------------------------------------------------------------


@dataclass
class Inputs:
    rows: list[Row]
    source: str
    checks: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: line {n} is not JSON ({e.msg})") from None
    return out


def _manifest_row(d: dict[str, Any], suffix: str) -> Row | None:
    """A manifest line as a :class:`Row`, when no ledger says it (field names per family)."""
    if suffix == "image_qa":
        opts, task, unit, family = (
            d.get("label_options", []),
            d["task_type"],
            d["landmark_id"],
            "dualcog_image",
        )
        kind, gold = "choice", frozenset([d["answer_option_id"]])
    elif suffix == "video_qa":
        opts, task, unit, family = d.get("choice_options", []), d["form"], d["landmark_id"], "dualcog_video"
        if task == "env_visibility_reasoning":
            kind, gold = (
                "count",
                frozenset([str(d.get("gold_environment_answer", {}).get("visible_count", ""))]),
            )
        else:
            kind, gold = "multi", frozenset(d.get("answer_option_ids", []))
    else:
        family = {"collab_qa": "aircop_collab", "ultravr_qa": "ultravr", "navigation_qa": "urbanvideo_nav"}[
            suffix
        ]
        unit_field = {"collab_qa": "group_id", "ultravr_qa": "unit", "navigation_qa": "mission_id"}[suffix]
        opts, task, unit = d.get("options", []), d["task"], d[unit_field]
        kind, gold = "choice", frozenset([d["answer_option_id"]])
    options = tuple((o["option_id"], o["label"]) for o in opts)
    question = d.get("question") or strip_options(d.get("prompt_text", ""), options)
    return Row(d["sample_id"], family, task, str(unit), kind, question, options, gold)


def _manifests(folder: Path) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Manifest file (relative) -> [(suffix, line)]."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for pattern in MANIFEST_GLOBS:
        suffix = pattern.rsplit(".", 2)[-2]
        for path in sorted(folder.glob(pattern)):
            out[str(path.relative_to(folder))] = [(suffix, d) for d in _jsonl(path)]
    return out


def load(folder: Path, family: str | None) -> Inputs:
    manifests = _manifests(folder)
    by_id: dict[str, dict[str, Any]] = {}
    manifest_of: dict[str, str] = {}
    for name, lines in manifests.items():
        for _, d in lines:
            by_id[d["sample_id"]] = d
            manifest_of[d["sample_id"]] = name
    ledger = folder / "qc_rows.jsonl"
    problems: list[str] = []
    if ledger.exists():
        rows = []
        statuses: Counter[str] = Counter()
        for d in _jsonl(ledger):
            statuses[d.get("status", "?")] += 1
            if d.get("status") != "released" or d.get("kind") not in QUESTION_KINDS:
                continue
            options = tuple((str(i), str(lab)) for i, lab in d.get("options", []))
            full = by_id.get(d["sample_id"], {})
            question = full.get("question") or strip_options(full.get("prompt_text") or d["prompt"], options)
            rows.append(
                Row(
                    d["sample_id"],
                    d["family"],
                    d["task"],
                    str(d["unit"]),
                    d["kind"],
                    question,
                    options,
                    frozenset(str(g) for g in d.get("gold", [])),
                )
            )
        source = str(ledger)
        checks = _crosscheck(rows, manifests, manifest_of, by_id)
        checks["ledger_status"] = dict(statuses)
        problems += checks["problems"]
    else:
        problems.append("no qc_rows.jsonl: the rows are read from the manifests alone")
        rows = [r for lines in manifests.values() for s, d in lines if (r := _manifest_row(d, s)) is not None]
        source = "manifests"
        checks = {"manifests": {k: len(v) for k, v in manifests.items()}}
    if family:
        rows = [r for r in rows if family.lower() in r.family.lower()]
    bad = [r.sample_id for r in rows if problem(r)]
    if bad:
        problems.append(f"{len(bad)} rows with an unusable gold skipped (e.g. {bad[0]})")
        rows = [r for r in rows if not problem(r)]
    return Inputs(rows, source, checks, problems)


def problem(r: Row) -> str | None:
    if r.kind == "choice" and (len(r.gold) != 1 or not r.gold <= set(r.ids)):
        return "gold not one option"
    if r.kind == "multi" and (not r.gold or not r.gold <= set(r.ids)):
        return "gold not among the options"
    if r.kind == "count" and (len(r.gold) != 1 or not next(iter(r.gold)).lstrip("-").isdigit()):
        return "gold not one count"
    return None


def _crosscheck(
    rows: list[Row],
    manifests: dict[str, list[tuple[str, dict[str, Any]]]],
    manifest_of: dict[str, str],
    by_id: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Released ledger rows against manifest lines, per family and per manifest file."""
    released = {r.sample_id: r for r in rows}
    in_manifests = set(manifest_of)
    per_family: dict[str, dict[str, int]] = defaultdict(lambda: {"ledger": 0, "manifest": 0})
    for r in rows:
        per_family[r.family]["ledger"] += 1
        if r.sample_id in in_manifests:
            per_family[r.family]["manifest"] += 1
    missing = sorted(set(released) - in_manifests)
    extra = sorted(in_manifests - set(released))
    problems = []
    if missing:
        problems.append(f"{len(missing)} released ledger rows are in no manifest (e.g. {missing[0]})")
    if extra:
        problems.append(
            f"{len(extra)} manifest rows are not released questions in the ledger (e.g. {extra[0]})"
        )
    mism = 0
    for sid, r in released.items():
        d = by_id.get(sid)
        if d is None:
            continue
        m = _manifest_row(d, manifest_of[sid].rsplit(".", 2)[-2])
        if m is not None and (m.gold != r.gold or m.ids != r.ids or m.task != r.task):
            mism += 1
    if mism:
        problems.append(f"{mism} released rows differ from their manifest line (gold, options or task)")
    return {
        "released_questions": len(released),
        "manifest_lines": {k: len(v) for k, v in manifests.items()},
        "per_family": {k: dict(v) for k, v in sorted(per_family.items())},
        "missing_in_manifests": missing[:20],
        "not_in_ledger": extra[:20],
        "mismatched": mism,
        "problems": problems,
    }


# -- tasks and folds --------------------------------------------------------------------------


Fold = tuple[np.ndarray, np.ndarray]  # (train, test) row indices of a task


@dataclass
class Task:
    """The rows of one task, its folds, and what a fold may read of the task's family.

    ``folds`` hold each unit out in turn and train on every other unit: the accuracy reported.
    ``past`` (prequential) predicts each block of units from the blocks before it in one seeded
    order of the family's units: its hits are exactly independent Bernoulli(1/k) in a sound
    release, which the leave-one-unit-out hits are not (two rows that are each other's nearest
    neighbour, or that share a majority prior, are right or wrong together), so the p values of
    attacks that learn from gold come from it."""

    name: str
    family: str
    kind: str
    rows: list[Row]
    folds: list[Fold]
    past: list[Fold] = field(default_factory=list)
    family_rows: list[Row] = field(default_factory=list)  # every row of its family (any task)
    unit_rank: dict[str, int] = field(default_factory=dict)  # the family's seeded unit order
    prequential: bool = False  # the folds in use are ``past``

    @property
    def units(self) -> int:
        return len({r.unit for r in self.rows})

    def readable(self, test: np.ndarray) -> list[Row]:
        """The family's rows a fold may learn from: units other than the held ones, or only the
        units before them when prequential."""
        held = {self.rows[i].unit for i in test}
        if self.prequential:
            first = min(self.unit_rank[u] for u in held)
            return [r for r in self.family_rows if self.unit_rank[r.unit] < first]
        return [r for r in self.family_rows if r.unit not in held]


def make_folds(rows: Sequence[Row]) -> list[Fold]:
    """Leave one unit out; above MAX_LOUO_UNITS units, GROUPED_FOLDS unit-grouped folds."""
    units = sorted({r.unit for r in rows})
    if len(units) < 2:
        return []
    groups = np.array([units.index(r.unit) for r in rows])
    idx = np.arange(len(rows))
    if len(units) <= MAX_LOUO_UNITS:
        return [(idx[groups != g], idx[groups == g]) for g in range(len(units))]
    return [(tr, te) for tr, te in GroupKFold(n_splits=GROUPED_FOLDS).split(idx, groups=groups)]


def unit_order(family: str, rows: Sequence[Row]) -> dict[str, int]:
    """A seeded random order of a family's units (it never looks at a gold)."""
    units = sorted({r.unit for r in rows})
    perm = _rng("order", family).permutation(len(units))
    return {units[j]: int(rank) for rank, j in enumerate(perm)}


def past_folds(rows: Sequence[Row], rank: dict[str, int]) -> list[Fold]:
    """Blocks of units in the family's order, each predicted from the blocks before it (one unit
    a block up to MAX_LOUO_UNITS units, else GROUPED_FOLDS blocks); the first block is never
    answered."""
    units = sorted({r.unit for r in rows}, key=lambda u: rank[u])
    if len(units) < 2:
        return []
    n_blocks = len(units) if len(units) <= MAX_LOUO_UNITS else GROUPED_FOLDS
    block = {
        u: b
        for b, part in enumerate(np.array_split(np.arange(len(units)), n_blocks))
        for u in (units[j] for j in part)
    }
    of = np.array([block[r.unit] for r in rows])
    idx = np.arange(len(rows))
    return [(idx[of < b], idx[of == b]) for b in range(1, n_blocks)]


def make_tasks(rows: Sequence[Row]) -> list[Task]:
    """Rows grouped by (family, task); a task name two families share is qualified by family."""
    by_task: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        by_task[r.family, r.task].append(r)
    shared = {t for t, n in Counter(t for _, t in by_task).items() if n > 1}
    by_family: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_family[r.family].append(r)
    ranks_of = {f: unit_order(f, rs) for f, rs in by_family.items()}
    out = []
    for (family, name), rs in sorted(by_task.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        kind = Counter(r.kind for r in rs).most_common(1)[0][0]
        rs = [r for r in rs if r.kind == kind]  # a task mixing kinds is audited on its main kind
        label = f"{family}:{name}" if name in shared else name
        rank = ranks_of[family]
        out.append(
            Task(label, family, kind, rs, make_folds(rs), past_folds(rs, rank), by_family[family], rank)
        )
    return out


# -- picking ----------------------------------------------------------------------------------


def _rng(*key: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("|".join(key).encode()))


def pick(row: Row, scores: Scores, attack: str, top: int = 1) -> Answer | None:
    """The ``top`` best-scored options; ties are broken at random (seeded by row and attack), so a
    rule that cannot tell the options apart is at chance, never at "the first letter". An attack
    whose scores are all equal does not answer the row (a coin flip tests nothing)."""
    if np.ptp(np.asarray(scores, dtype=float)) <= 1e-12:
        return None
    jitter = _rng(row.sample_id, attack).random(len(scores))
    order = np.lexsort((jitter, -np.asarray(scores, dtype=float)))
    return frozenset(row.ids[j] for j in order[: max(1, min(top, row.k))])


def size_mode(rows: Sequence[Row]) -> int:
    sizes = Counter(len(r.gold) for r in rows)
    return sizes.most_common(1)[0][0] if sizes else 1


# -- option structure -------------------------------------------------------------------------


def number_of(label: str) -> float | None:
    m = _NUMBER.search(label)
    return float(m.group()) if m else None


def numbers(row: Row) -> np.ndarray | None:
    """The options' numbers, when every option states one and there are 3 or more."""
    vals = [number_of(lab) for lab in row.labels]
    if row.k < 3 or any(v is None for v in vals):
        return None
    return np.array(vals, dtype=float)


def ranks(values: np.ndarray | Sequence[float]) -> np.ndarray:
    """0-based rank, ties sharing their mean rank."""
    v = np.asarray(values, dtype=float)
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v))
    r[order] = np.arange(len(v))
    for x in np.unique(v):
        same = v == x
        r[same] = r[same].mean()
    return r


_VERT = {"top": 0, "upper": 0, "middle": 1, "centre": 1, "center": 1, "central": 1, "bottom": 2, "lower": 2}
_HORZ = {"left": 0, "middle": 1, "centre": 1, "center": 1, "central": 1, "right": 2}
_FILLER_WORDS = (
    "the of in at on region area part portion corner side edge quadrant third cell view image frame "
    "picture zone sector square"
)
_FILLER = frozenset(_FILLER_WORDS.split())


def grid_cell(label: str) -> tuple[int, int] | None:
    """A region label on a 3x3 image grid ("top left", "middle centre", "lower-right corner")."""
    toks = [w for w in words(label) if w not in _FILLER]
    if len(toks) == 1:
        t = toks[0]
        if t in ("left", "right"):
            return 1, _HORZ[t]
        if t in _VERT:
            return _VERT[t], 1
        return None
    if len(toks) == 2:
        a, b = toks
        if a in _VERT and b in _HORZ:
            return _VERT[a], _HORZ[b]
        if a in ("left", "right") and b in _VERT:
            return _VERT[b], _HORZ[a]
    return None


def cells(row: Row) -> np.ndarray | None:
    got = [grid_cell(lab) for lab in row.labels]
    if row.k < 3 or any(c is None for c in got) or len(set(got)) < row.k:
        return None
    return np.array(got, dtype=float)


def char_vectors(labels: Sequence[str]) -> np.ndarray | None:
    try:
        m = CountVectorizer(analyzer="char_wb", ngram_range=(3, 5)).fit_transform(
            [lab.lower() for lab in labels]
        )
    except ValueError:  # no n-gram at all
        return None
    return np.asarray(normalize(m).todense())


def word_vectors(labels: Sequence[str]) -> np.ndarray | None:
    try:
        m = CountVectorizer(token_pattern=r"(?u)\b\w+\b").fit_transform([lab.lower() for lab in labels])
    except ValueError:
        return None
    return np.asarray(normalize(m).todense())


def centroid_distance(vecs: np.ndarray) -> np.ndarray:
    """Each option's cosine distance to the centroid of the other options."""
    k = len(vecs)
    total = vecs.sum(axis=0)
    out = np.empty(k)
    for j in range(k):
        c = (total - vecs[j]) / max(1, k - 1)
        nc = np.linalg.norm(c)
        out[j] = 1.0 - (float(vecs[j] @ c) / nc if nc > 0 else 0.0)
    return out


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def option_features(row: Row) -> np.ndarray:
    """Hand-made features of each option of a row (k x F), all relative to its row where it
    matters, for the boosted-tree attack."""
    k = row.k
    labels = row.labels
    lens = np.array([len(lab) for lab in labels], dtype=float)
    nw = np.array([len(words(lab)) for lab in labels], dtype=float)
    q = content(row.question)
    cont = [content(lab) for lab in labels]
    wsets = [set(words(lab)) for lab in labels]
    first = [words(lab)[0] if words(lab) else "" for lab in labels]
    last = [words(lab)[-1] if words(lab) else "" for lab in labels]
    tri = [{lab.lower()[i : i + 3] for i in range(max(1, len(lab) - 2))} for lab in labels]
    overlap = np.array([len(c & q) for c in cont], dtype=float)
    share = np.array([np.mean([jaccard(wsets[j], wsets[i]) for i in range(k) if i != j]) for j in range(k)])
    tshare = np.array([np.mean([jaccard(tri[j], tri[i]) for i in range(k) if i != j]) for j in range(k)])
    ffreq = np.array([sum(f == g for g in first) - 1 for f in first], dtype=float) / max(1, k - 1)
    lfreq = np.array([sum(f == g for g in last) - 1 for f in last], dtype=float) / max(1, k - 1)
    neg = np.array([float(bool(set(words(lab)) & NEGATIONS)) for lab in labels])
    nums = numbers(row)
    nrank = ranks(nums) / (k - 1) if nums is not None else np.full(k, np.nan)
    nval = nums if nums is not None else np.full(k, np.nan)
    grid = cells(row)
    if grid is not None:
        cheb = np.abs(grid[:, None, :] - grid[None, :, :]).max(axis=2)
        adj = ((cheb == 1).sum(axis=1)).astype(float)
        gdist = np.linalg.norm(grid - grid.mean(axis=0), axis=1)
    else:
        adj = gdist = np.full(k, np.nan)
    cv = char_vectors(labels)
    odd = centroid_distance(cv) if cv is not None else np.zeros(k)
    pos = np.arange(k, dtype=float)
    sd = lens.std() or 1.0
    cols = [
        lens,
        nw,
        ranks(lens) / max(1, k - 1),
        (lens - lens.mean()) / sd,
        (lens == lens.max()).astype(float),
        (lens == lens.min()).astype(float),
        ranks(nw) / max(1, k - 1),
        ffreq,
        lfreq,
        overlap,
        ranks(overlap) / max(1, k - 1),
        (overlap == overlap.max()).astype(float),
        (overlap == overlap.min()).astype(float),
        share,
        ranks(share) / max(1, k - 1),
        tshare,
        ranks(tshare) / max(1, k - 1),
        neg,
        nrank,
        nval,
        adj,
        gdist,
        odd,
        ranks(odd) / max(1, k - 1),
        pos,
        pos / max(1, k - 1),
        np.full(k, float(k)),
        np.array([float(any(ch.isdigit() for ch in lab)) for lab in labels]),
        np.array([lab.count(",") + words(lab).count("and") for lab in labels], dtype=float),
        np.array(_alpha_keys(labels)) / max(1, k - 1),
    ]
    return np.column_stack(cols)


def _alpha_keys(labels: Sequence[str]) -> list[float]:
    order = sorted(range(len(labels)), key=lambda j: norm(labels[j]))
    out = [0.0] * len(labels)
    for r, j in enumerate(order):
        out[j] = float(r)
    return out


# -- attacks ----------------------------------------------------------------------------------

# a scorer attack gives option scores per test row (None: it does not answer that row); an
# answer attack gives answers directly. Rules (``uses_gold`` False) read no gold at all: the
# "avoid X" check runs on them.
ScoreFn = Callable[[Task, np.ndarray, np.ndarray], list[Scores | None]]
AnswerFn = Callable[[Task, np.ndarray, np.ndarray], list[Answer | None]]


@dataclass(frozen=True)
class Attack:
    name: str
    kinds: frozenset[str]
    uses_gold: bool
    doc: str
    scores: ScoreFn | None = None
    answers: AnswerFn | None = None


REGISTRY: dict[str, Attack] = {}
OPTIONS = frozenset({"choice", "multi"})


def rule(name: str, doc: str) -> Callable[[Callable[[Row], Scores | None]], Callable[[Row], Scores | None]]:
    """Register a per-row rule (scores from the row alone)."""

    def wrap(fn: Callable[[Row], Scores | None]) -> Callable[[Row], Scores | None]:
        def run(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
            return [fn(task.rows[i]) for i in test]

        REGISTRY[name] = Attack(name, OPTIONS, False, doc, scores=run)
        return fn

    return wrap


def scorer(
    name: str, doc: str, kinds: frozenset[str] = OPTIONS, uses_gold: bool = True
) -> Callable[[ScoreFn], ScoreFn]:
    """Register an attack that scores the options of the held-out rows, learning on the others."""

    def wrap(fn: ScoreFn) -> ScoreFn:
        REGISTRY[name] = Attack(name, kinds, uses_gold, doc, scores=fn)
        return fn

    return wrap


def answerer(name: str, doc: str, kinds: frozenset[str] = OPTIONS) -> Callable[[AnswerFn], AnswerFn]:
    """Register an attack that answers the held-out rows directly (memory, count priors)."""

    def wrap(fn: AnswerFn) -> AnswerFn:
        REGISTRY[name] = Attack(name, kinds, True, doc, answers=fn)
        return fn

    return wrap


# 1. priors -------------------------------------------------------------------------------------


@scorer("letter_prior", "the option id most often gold in other units (the commonest gold id set)")
def letter_prior(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    ids: Counter[str] = Counter(i for t in train for i in task.rows[t].gold)
    return [np.array([ids.get(i, 0) for i in task.rows[j].ids], dtype=float) for j in test]


@scorer("label_prior", "the option whose label was most often gold (per time it was offered) in other units")
def label_prior(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    gold: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for t in train:
        r = task.rows[t]
        seen.update(norm(lab) for lab in r.labels)
        gold.update(r.gold_labels())
    out: list[Scores | None] = []
    for j in test:
        r = task.rows[j]
        prior = 1.0 / r.k
        out.append(np.array([(gold[norm(lab)] + prior) / (seen[norm(lab)] + 1) for lab in r.labels]))
    return out


# 2. numeric options ----------------------------------------------------------------------------


def _rank_learned(order: Callable[[Row], np.ndarray | None]) -> ScoreFn:
    def run(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
        by_k: dict[int, Counter[float]] = defaultdict(Counter)
        for t in train:
            r = task.rows[t]
            v = order(r)
            if v is not None:
                rk = ranks(v)
                by_k[r.k].update(float(rk[g]) for g in r.gold_index())
        out: list[Scores | None] = []
        for j in test:
            r = task.rows[j]
            v = order(r)
            if v is None or not by_k.get(r.k):
                out.append(None)
                continue
            rk = ranks(v)
            out.append(np.array([by_k[r.k].get(float(x), 0) for x in rk], dtype=float))
        return out

    return run


REGISTRY["num_rank_learned"] = Attack(
    "num_rank_learned",
    OPTIONS,
    True,
    "the gold's commonest rank among numeric options in other units",
    scores=_rank_learned(numbers),
)
REGISTRY["length_rank_learned"] = Attack(
    "length_rank_learned",
    OPTIONS,
    True,
    "the gold's commonest rank by label length in other units",
    scores=_rank_learned(lambda r: np.array([len(lab) for lab in r.labels], dtype=float)),
)
REGISTRY["alpha_rank_learned"] = Attack(
    "alpha_rank_learned",
    OPTIONS,
    True,
    "the gold's commonest alphabetical rank in other units",
    scores=_rank_learned(lambda r: np.array(_alpha_keys(r.labels))),
)


@rule("num_second_smallest", "the second-smallest numeric option")
def num_second_smallest(row: Row) -> Scores | None:
    v = numbers(row)
    return None if v is None else -np.abs(ranks(v) - 1)


@rule("num_median", "the numeric option nearest the options' median")
def num_median(row: Row) -> Scores | None:
    v = numbers(row)
    return None if v is None else -np.abs(v - np.median(v))


@rule("num_smallest", "the smallest numeric option")
def num_smallest(row: Row) -> Scores | None:
    v = numbers(row)
    return None if v is None else -v


@rule("num_largest", "the largest numeric option")
def num_largest(row: Row) -> Scores | None:
    v = numbers(row)
    return None if v is None else v


# 3. boosted trees over option features -----------------------------------------------------------


def _features(task: Task, idx: Iterable[int], cache: dict[int, np.ndarray]) -> list[np.ndarray]:
    out = []
    for i in idx:
        if i not in cache:
            cache[i] = option_features(task.rows[i])
        out.append(cache[i])
    return out


_FEATURE_CACHE: dict[tuple[str, int], dict[int, np.ndarray]] = {}


@scorer(
    "option_gbm", "gradient-boosted trees over hand-made option features (length, overlap, form, rank, ...)"
)
def option_gbm(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    cache = _FEATURE_CACHE.setdefault((task.name, id(task.rows)), {})
    ftr = _features(task, train, cache)
    # how often each label is offered in other units (uses no gold)
    offered: Counter[str] = Counter(norm(lab) for t in train for lab in task.rows[t].labels)

    def with_freq(i: int, f: np.ndarray) -> np.ndarray:
        freq = np.array([offered[norm(lab)] for lab in task.rows[i].labels], dtype=float)
        # a feature the row does not have (no numbers, no grid) is -1, which trees split off
        x = np.column_stack([f, freq, ranks(freq) / max(1, task.rows[i].k - 1)])
        return np.asarray(np.nan_to_num(x, nan=-1.0), dtype=float)

    x = np.vstack([with_freq(i, f) for i, f in zip(train, ftr, strict=True)])
    y = np.concatenate([np.isin(task.rows[i].ids, list(task.rows[i].gold)) for i in train]).astype(int)
    if len(set(y)) < 2:
        return [None] * len(test)
    model = HistGradientBoostingClassifier(
        max_iter=80,
        learning_rate=0.08,
        max_leaf_nodes=8,
        min_samples_leaf=8,
        l2_regularization=1.0,
        random_state=0,
    )
    model.fit(x, y)
    out: list[Scores | None] = []
    for i, f in zip(test, _features(task, test, cache), strict=True):
        out.append(model.predict_proba(with_freq(i, f))[:, 1])
    return out


# 4. a linear model over question and option n-grams -------------------------------------------------


def _identity(tokens: list[str]) -> list[str]:
    return tokens


def _cross_tokens(row: Row, j: int) -> list[str]:
    """Question words paired with the option's words and with its id: a wording that decides
    the answer ("descended" -> "about as far") or its letter."""
    q = sorted(content(row.question))[:80]
    o = sorted(content(row.labels[j]))
    return [f"{a}|{b}" for a in q for b in o] + [f"{a}|@{row.ids[j]}" for a in q]


@scorer("tfidf_lr", "logistic regression over option char 3-5 and word 1-2 grams and question x option words")
def tfidf_lr(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    def docs(idx: np.ndarray) -> tuple[list[str], list[list[str]]]:
        texts, cross = [], []
        for i in idx:
            r = task.rows[i]
            for j in range(r.k):
                texts.append(r.labels[j].lower())
                cross.append(_cross_tokens(r, j))
        return texts, cross

    tt, tc = docs(train)
    y = np.concatenate([np.isin(task.rows[i].ids, list(task.rows[i].gold)) for i in train]).astype(int)
    if len(set(y)) < 2:
        return [None] * len(test)
    vecs = [
        (TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True), 0),
        (TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b", sublinear_tf=True), 0),
        (TfidfVectorizer(analyzer=_identity, sublinear_tf=True), 1),
    ]
    xs = []
    for vec, which in vecs:
        try:
            xs.append(vec.fit_transform(tt if which == 0 else tc))
        except ValueError:  # empty vocabulary
            xs.append(None)
    used = [(v, w) for (v, w), x in zip(vecs, xs, strict=True) if x is not None]
    x = sparse.hstack([m for m in xs if m is not None]).tocsr()
    model = LogisticRegression(C=1.0, solver="liblinear", max_iter=2000)
    model.fit(x, y)
    et, ec = docs(test)
    xe = sparse.hstack([v.transform(et if w == 0 else ec) for v, w in used]).tocsr()
    p = model.decision_function(xe)
    out: list[Scores | None] = []
    at = 0
    for i in test:
        k = task.rows[i].k
        out.append(p[at : at + k])
        at += k
    return out


@answerer(
    "tfidf_lr_count",
    "logistic regression from question word 1-2 and char 3-5 grams to the count",
    frozenset({"count"}),
)
def count_lr(task: Task, train: np.ndarray, test: np.ndarray) -> list[Answer | None]:
    y = [next(iter(task.rows[i].gold)) for i in train]
    if len(set(y)) < 2:
        return [frozenset([y[0]])] * len(test) if y else [None] * len(test)
    vw = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    vc = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True)
    qt = [task.rows[i].question.lower() for i in train]
    x = sparse.hstack([vw.fit_transform(qt), vc.fit_transform(qt)]).tocsr()
    model = LogisticRegression(C=1.0, max_iter=2000)
    model.fit(x, y)
    qe = [task.rows[i].question.lower() for i in test]
    pred = model.predict(sparse.hstack([vw.transform(qe), vc.transform(qe)]).tocsr())
    return [frozenset([str(p)]) for p in pred]


@scorer(
    "question_nb",
    "naive Bayes from the question's words to the gold label (a wording that decides the answer)",
)
def question_nb(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    by_label: dict[str, Counter[str]] = defaultdict(Counter)
    prior: Counter[str] = Counter()
    vocab: set[str] = set()
    for t in train:
        r = task.rows[t]
        q = content(r.question)
        vocab |= q
        for lab in r.gold_labels():
            prior[lab] += 1
            by_label[lab].update(q)
    out: list[Scores | None] = []
    v = len(vocab) + 1
    for i in test:
        r = task.rows[i]
        q = content(r.question) & vocab
        scores = []
        for lab in r.labels:
            c = by_label.get(norm(lab), Counter())
            total = sum(c.values())
            s = math.log(prior[norm(lab)] + 1) + sum(math.log((c[w] + 1) / (total + v)) for w in q)
            scores.append(s)
        out.append(np.array(scores) if any(prior[norm(lab)] for lab in r.labels) else None)
    return out


# 5. memory -----------------------------------------------------------------------------------------


def _neighbour_answer(row: Row, other: Row) -> Answer | None:
    """``other``'s gold carried onto ``row``: the same count, or the options with its gold labels."""
    if row.kind == "count":
        return other.gold
    want = other.gold_labels()
    got = frozenset(i for i, lab in row.options if norm(lab) in want)
    return got or None


@answerer(
    "knn_memory",
    "the gold of the most similar question (TF-IDF cosine) in other units",
    frozenset(QUESTION_KINDS),
)
def knn_memory(task: Task, train: np.ndarray, test: np.ndarray) -> list[Answer | None]:
    vec = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b", sublinear_tf=True)
    try:
        xt = vec.fit_transform([task.rows[i].question.lower() for i in train])
    except ValueError:
        return [None] * len(test)
    sims = (vec.transform([task.rows[i].question.lower() for i in test]) @ xt.T).toarray()
    out: list[Answer | None] = []
    for a, i in enumerate(test):
        got: Answer | None = None
        for b in np.argsort(-sims[a], kind="stable")[:10]:
            if sims[a, b] <= 0:
                break
            got = _neighbour_answer(task.rows[i], task.rows[train[b]])
            if got is not None:
                break
        out.append(got)
    return out


@answerer(
    "family_memory",
    "the gold of the most similar question of any task of the family in other units (a fact asked twice)",
)
def family_memory(task: Task, train: np.ndarray, test: np.ndarray) -> list[Answer | None]:
    pool = [r for r in task.readable(test) if r.kind != "count"]
    if not pool:
        return [None] * len(test)
    vec = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"(?u)\b\w+\b", sublinear_tf=True)
    try:
        xt = vec.fit_transform([r.question.lower() for r in pool])
    except ValueError:
        return [None] * len(test)
    sims = (vec.transform([task.rows[i].question.lower() for i in test]) @ xt.T).toarray()
    out: list[Answer | None] = []
    for a, i in enumerate(test):
        got: Answer | None = None
        for b in np.argsort(-sims[a], kind="stable")[:10]:
            if sims[a, b] <= 0:
                break
            got = _neighbour_answer(task.rows[i], pool[b])
            if got is not None:
                break
        out.append(got)
    return out


@answerer(
    "exact_memory",
    "the answer of the identical question in other units (majority)",
    frozenset(QUESTION_KINDS),
)
def exact_memory(task: Task, train: np.ndarray, test: np.ndarray) -> list[Answer | None]:
    seen: dict[str, list[Row]] = defaultdict(list)
    for t in train:
        seen[norm(task.rows[t].question)].append(task.rows[t])
    out: list[Answer | None] = []
    for i in test:
        votes = Counter(
            a for o in seen.get(norm(task.rows[i].question), []) if (a := _neighbour_answer(task.rows[i], o))
        )
        out.append(votes.most_common(1)[0][0] if votes else None)
    return out


# count priors ------------------------------------------------------------------------------------


@answerer("count_mode", "the commonest count in other units", frozenset({"count"}))
def count_mode(task: Task, train: np.ndarray, test: np.ndarray) -> list[Answer | None]:
    c = Counter(next(iter(task.rows[i].gold)) for i in train)
    best = min(c.items(), key=lambda kv: (-kv[1], int(kv[0])))[0] if c else None
    return [frozenset([best]) if best is not None else None for _ in test]


@answerer("count_median", "the median count of other units", frozenset({"count"}))
def count_median(task: Task, train: np.ndarray, test: np.ndarray) -> list[Answer | None]:
    v = [int(next(iter(task.rows[i].gold))) for i in train]
    if not v:
        return [None] * len(test)
    return [frozenset([str(int(np.floor(np.median(v))))]) for _ in test]


# 6. odd one out ------------------------------------------------------------------------------------


@rule("odd_char", "the option farthest from the other options' centroid (char 3-5 grams)")
def odd_char(row: Row) -> Scores | None:
    v = char_vectors(row.labels)
    return None if v is None or row.k < 3 else centroid_distance(v)


@rule("typical_char", "the option nearest the other options' centroid (char 3-5 grams)")
def typical_char(row: Row) -> Scores | None:
    v = char_vectors(row.labels)
    return None if v is None or row.k < 3 else -centroid_distance(v)


@rule("odd_word", "the option farthest from the other options' centroid (words)")
def odd_word(row: Row) -> Scores | None:
    v = word_vectors(row.labels)
    return None if v is None or row.k < 3 else centroid_distance(v)


@rule("typical_word", "the option nearest the other options' centroid (words)")
def typical_word(row: Row) -> Scores | None:
    v = word_vectors(row.labels)
    return None if v is None or row.k < 3 else -centroid_distance(v)


# 7. grid adjacency --------------------------------------------------------------------------------


@rule("grid_adjacent", "the region option adjacent (8-neighbourhood) to the most other options")
def grid_adjacent(row: Row) -> Scores | None:
    g = cells(row)
    if g is None:
        return None
    cheb = np.abs(g[:, None, :] - g[None, :, :]).max(axis=2)
    return np.asarray((cheb == 1).sum(axis=1), dtype=float)


@rule("grid_centroid", "the region option nearest the centroid of the options' cells")
def grid_centroid(row: Row) -> Scores | None:
    g = cells(row)
    return None if g is None else -np.linalg.norm(g - g.mean(axis=0), axis=1)


# 8. form rules ----------------------------------------------------------------------------------


@rule("longest", "the longest option")
def longest(row: Row) -> Scores | None:
    return np.array([len(lab) for lab in row.labels], dtype=float)


@rule("shortest", "the shortest option")
def shortest(row: Row) -> Scores | None:
    return -np.array([len(lab) for lab in row.labels], dtype=float)


@rule("max_question_overlap", "the option repeating the most of the question's words")
def max_question_overlap(row: Row) -> Scores | None:
    q = content(row.question)
    return np.array([len(content(lab) & q) for lab in row.labels], dtype=float)


@rule("min_question_overlap", "the option repeating the fewest of the question's words")
def min_question_overlap(row: Row) -> Scores | None:
    q = content(row.question)
    return -np.array([len(content(lab) & q) for lab in row.labels], dtype=float)


@rule("unique_first_word", "the option whose first word the fewest other options share")
def unique_first_word(row: Row) -> Scores | None:
    first = [(words(lab) or [""])[0] for lab in row.labels]
    return -np.array([first.count(f) for f in first], dtype=float)


@rule("unique_shape", "the option whose word count and digit/negation shape the fewest others share")
def unique_shape(row: Row) -> Scores | None:
    def shape(lab: str) -> tuple[int, bool, bool]:
        w = words(lab)
        return len(w), any(ch.isdigit() for ch in lab), bool(set(w) & NEGATIONS)

    s = [shape(lab) for lab in row.labels]
    return -np.array([s.count(x) for x in s], dtype=float)


def _offered(task: Task, train: np.ndarray) -> Counter[str]:
    return Counter(norm(lab) for t in train for lab in task.rows[t].labels)


@scorer(
    "rarest_label", "the option whose label other units offer least often (no gold used)", uses_gold=False
)
def rarest_label(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    c = _offered(task, train)
    return [-np.array([c[norm(lab)] for lab in task.rows[i].labels], dtype=float) for i in test]


@scorer(
    "commonest_label", "the option whose label other units offer most often (no gold used)", uses_gold=False
)
def commonest_label(task: Task, train: np.ndarray, test: np.ndarray) -> list[Scores | None]:
    c = _offered(task, train)
    return [np.array([c[norm(lab)] for lab in task.rows[i].labels], dtype=float) for i in test]


# -- running ---------------------------------------------------------------------------------------


def run_attack(task: Task, attack: Attack, prequential: bool = False) -> list[Answer | None]:
    """One answer (or None) per row of the task. Trained attacks learn on the other units only
    (``prequential``: on the units before); a rule runs on each row alone (the folds still give
    multi-answer rows their set size)."""
    n = len(task.rows)
    preds: list[Answer | None] = [None] * n
    if prequential:
        task = replace(task, prequential=True)
    folds = task.past if prequential else task.folds
    if not folds:
        if attack.uses_gold or attack.answers is not None:
            return preds
        if attack.scores is None:
            return preds
        idx = np.arange(n)
        folds = [(np.array([], dtype=int), idx)]
    for train, test in folds:
        if attack.answers is not None:
            got = attack.answers(task, train, test)
            for i, a in zip(test, got, strict=True):
                preds[i] = a
            continue
        assert attack.scores is not None
        top = size_mode([task.rows[t] for t in train]) if task.kind == "multi" else 1
        for i, s in zip(test, attack.scores(task, train, test), strict=True):
            if s is not None and len(s) == task.rows[i].k:
                preds[i] = pick(task.rows[i], s, attack.name, top)
    return preds


def chance_of(task: Task, row: Row) -> float:
    if row.kind == "count":
        return 1.0 / len({next(iter(r.gold)) for r in task.rows})
    return 1.0 / row.k


@dataclass
class Scored:
    """An attack's answered rows: hit or not, the chance of a hit, and for multi-answer rows the
    chance of a random set of the size it answered (the size-matched null)."""

    rows: list[Row] = field(default_factory=list)
    hits: list[bool] = field(default_factory=list)
    chance: list[float] = field(default_factory=list)
    null: list[float] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.hits)

    @property
    def h(self) -> int:
        return sum(self.hits)

    def __add__(self, other: Scored) -> Scored:
        return Scored(
            self.rows + other.rows, self.hits + other.hits, self.chance + other.chance, self.null + other.null
        )


def scored(task: Task, preds: Sequence[Answer | None]) -> Scored:
    out = Scored()
    for r, a in zip(task.rows, preds, strict=True):
        if a is None:
            continue
        out.rows.append(r)
        out.hits.append(a == r.gold)
        out.chance.append(chance_of(task, r))
        if r.kind == "multi":
            out.null.append((len(a) == len(r.gold)) / math.comb(r.k, len(a)))
    return out


# -- statistics ---------------------------------------------------------------------------------------


def poisson_binomial(probs: Sequence[float]) -> np.ndarray:
    """The distribution of a sum of independent Bernoulli(probs) (the exact binomial test for
    rows whose chance differs, e.g. 3 and 4 options)."""
    dist = np.zeros(len(probs) + 1)
    dist[0] = 1.0
    for p in probs:
        dist[1:] = dist[1:] * (1 - p) + dist[:-1] * p
        dist[0] *= 1 - p
    return dist


def p_greater(probs: Sequence[float], hits: int) -> float:
    return float(min(1.0, poisson_binomial(probs)[hits:].sum())) if probs else 1.0


def p_less(probs: Sequence[float], hits: int) -> float:
    return float(min(1.0, poisson_binomial(probs)[: hits + 1].sum())) if probs else 1.0


def mde(n: int, chance: float, alpha: float, margin: float, power: float = 0.8) -> float | None:
    """The smallest accuracy over chance the test flags with the given power at n rows (raw p)."""
    if n == 0:
        return None
    ks = np.arange(n + 1)
    ok = (binom.sf(ks - 1, n, chance) < alpha) & (ks / n > chance + margin)
    if not ok.any():
        return None
    c = int(ks[ok][0])
    for d in np.arange(0.01, 1.0 - chance + 1e-9, 0.01):
        if binom.sf(c - 1, n, min(1.0, chance + d)) >= power:
            return round(float(d), 2)
    return None


def adjust(ps: Sequence[float], method: str) -> list[float]:
    m = len(ps)
    if m == 0 or method == "none":
        return list(ps)
    order = np.argsort(ps)
    p = np.asarray(ps, dtype=float)[order]
    if method == "holm":
        adj = np.maximum.accumulate(np.minimum(1.0, p * (m - np.arange(m))))
    elif method == "bh":
        adj = np.minimum.accumulate((p * m / np.arange(1, m + 1))[::-1])[::-1]
        adj = np.minimum(adj, 1.0)
    else:
        raise ValueError(method)
    out = np.empty(m)
    out[order] = adj
    return out.tolist()


@dataclass
class Result:
    """One test: an attack on a task (or pooled over a family), or the "avoid X" check."""

    scope: str  # task name or "family:<name>"
    family: str
    attack: str
    test: str  # "beats chance" | "avoid"
    n: int  # leave-one-unit-out: rows answered, right, accuracy, chance
    hits: int
    acc: float
    chance: float
    p: float  # exact, from the prequential pass for attacks that learn from gold
    test_n: int
    test_hits: int
    null_chance: float | None = None  # multi rows: the size-matched null
    null_p: float | None = None
    p_adj: float = 1.0
    raw_flag: bool = False
    flag: bool = False
    examples: list[str] = field(default_factory=list)

    def margin_ok(self, margin: float) -> bool:
        if self.test == "avoid":
            return self.acc > self.chance  # (1-acc_X)/(k-1) can never reach chance + 10 pp at k >= 4
        if self.null_chance is not None and self.acc > self.null_chance + margin:
            return True
        return self.acc > self.chance + margin

    def key_p(self) -> float:
        return max(self.p, self.null_p) if self.null_p is not None else self.p


def result(scope: str, family: str, attack: str, louo: Scored, test: Scored) -> Result:
    res = Result(
        scope,
        family,
        attack,
        "beats chance",
        louo.n,
        louo.h,
        louo.h / louo.n if louo.n else 0.0,
        float(np.mean(louo.chance)) if louo.n else 0.0,
        p_greater(test.chance, test.h),
        test.n,
        test.h,
    )
    if louo.null:
        res.null_chance = float(np.mean(louo.null))
        res.null_p = p_greater(test.null, test.h) if len(test.null) == test.n else 1.0
    res.examples = [r.sample_id for r, ok in zip(louo.rows, louo.hits, strict=True) if ok][:8]
    return res


def avoid_result(task: Task, attack: Attack, s: Scored) -> Result | None:
    """Picking uniformly among the options X did not pick: (1 - hit_X) / (k - 1) per row; it
    beats chance exactly when X is right less often than chance (tested on X's hits)."""
    keep = [j for j, r in enumerate(s.rows) if r.kind == "choice" and r.k > 1]
    if not keep:
        return None
    rows = [s.rows[j] for j in keep]
    hits = [s.hits[j] for j in keep]
    chance = [1.0 / r.k for r in rows]
    acc = float(np.mean([(1 - ok) / (r.k - 1) for r, ok in zip(rows, hits, strict=True)]))
    h = sum(hits)
    return Result(
        task.name,
        task.family,
        f"avoid:{attack.name}",
        "avoid",
        len(rows),
        h,
        acc,
        float(np.mean(chance)),
        p_less(chance, h),
        len(rows),
        h,
    )


# -- the audit -------------------------------------------------------------------------------------------


@dataclass
class TaskReport:
    task: Task
    results: list[Result]
    avoid: list[Result]
    mde: float | None
    chance: float


Outcomes = dict[str, tuple[Scored, Scored]]  # attack -> (leave-one-unit-out, test pass)


def audit_task(task: Task, alpha: float, margin: float) -> tuple[TaskReport, Outcomes]:
    results, avoid = [], []
    outcomes: Outcomes = {}
    for attack in REGISTRY.values():
        if task.kind not in attack.kinds:
            continue
        louo = scored(task, run_attack(task, attack))
        if louo.n == 0:
            continue
        # a rule's hits are independent given the options; a learner's are not across folds
        learns = attack.uses_gold or task.kind == "multi"
        test = scored(task, run_attack(task, attack, prequential=True)) if learns else louo
        results.append(result(task.name, task.family, attack.name, louo, test))
        outcomes[attack.name] = (louo, test)
        if not learns and task.kind == "choice":
            a = avoid_result(task, attack, louo)
            if a is not None:
                avoid.append(a)
    chance = float(np.mean([chance_of(task, r) for r in task.rows]))
    return TaskReport(task, results, avoid, mde(len(task.rows), chance, alpha, margin), chance), outcomes


def pool_families(reports: list[TaskReport], outcomes: dict[str, Outcomes]) -> list[Result]:
    """Each attack's hits pooled over a family's tasks (a habit shared by tasks too small to show
    it). The prequential order is the family's, so pooled test hits stay independent."""
    fams: dict[str, list[str]] = defaultdict(list)
    for rep in reports:
        fams[rep.task.family].append(rep.task.name)
    out = []
    for fam, tasks in sorted(fams.items()):
        if len(tasks) < 2:
            continue
        for name in REGISTRY:
            got = [outcomes[t][name] for t in tasks if name in outcomes[t]]
            if not got:
                continue
            louo, test = Scored(), Scored()
            for a, b in got:
                louo, test = louo + a, test + b
            res = result(f"family:{fam}", fam, name, louo, test)
            res.null_chance = res.null_p = None  # the pool mixes kinds: chance is 1/k per row
            out.append(res)
    return out


@dataclass
class Audit:
    reports: list[TaskReport]
    families: list[Result]
    correction: str
    alpha: float
    margin: float

    def all_results(self) -> list[Result]:
        return [x for rep in self.reports for x in rep.results + rep.avoid] + self.families

    def flagged(self) -> list[Result]:
        return [x for x in self.all_results() if x.flag]

    def raw_flagged(self) -> list[Result]:
        return [x for x in self.all_results() if x.raw_flag]


def simes(ps: Sequence[float]) -> float:
    """One p for a group of tests (valid under positive dependence, as between attacks)."""
    p = np.sort(np.asarray(ps, dtype=float))
    return float(min(1.0, (p * len(p) / np.arange(1, len(p) + 1)).min())) if len(p) else 1.0


def hierarchical(groups: Sequence[Sequence[float]], alpha: float) -> list[list[float]]:
    """Adjusted p per test, tests grouped by task (or family pool): a Simes p per group,
    Benjamini-Hochberg over the groups (R of M selected), then Holm within a selected group at
    level alpha * R / M (Benjamini and Bogomolov 2014). A test's adjusted p is below alpha exactly
    when that procedure rejects it. A task whose leak many attacks find counts once, so it does
    not make a fluke in another task pass, as one BH over every test would."""
    group_p = adjust([simes(g) for g in groups], "bh")
    selected = sum(q <= alpha for q in group_p)
    scale = len(groups) / max(1, selected)
    return [
        [max(q, min(1.0, w * scale)) for w in adjust(list(g), "holm")]
        for g, q in zip(groups, group_p, strict=True)
    ]


def run_audit(rows: Sequence[Row], alpha: float, margin: float, correction: str) -> Audit:
    reports = []
    outcomes: dict[str, Outcomes] = {}
    for task in make_tasks(rows):
        rep, o = audit_task(task, alpha, margin)
        reports.append(rep)
        outcomes[task.name] = o
    fams = pool_families(reports, outcomes)
    audit = Audit(reports, fams, correction, alpha, margin)
    results = audit.all_results()
    if correction == "hier":
        by_scope: dict[str, list[Result]] = defaultdict(list)
        for x in results:
            by_scope[x.scope].append(x)
        groups = list(by_scope.values())
        adjusted = hierarchical([[x.key_p() for x in g] for g in groups], alpha)
        adj_of = {
            id(x): a for g, ag in zip(groups, adjusted, strict=True) for x, a in zip(g, ag, strict=True)
        }
        adj = [adj_of[id(x)] for x in results]
    else:
        adj = adjust([x.key_p() for x in results], correction)
    for x, pa in zip(results, adj, strict=True):
        x.p_adj = pa
        ok = x.margin_ok(margin)
        x.raw_flag = ok and x.key_p() < alpha
        x.flag = ok and pa < alpha
    return audit


# -- output -----------------------------------------------------------------------------------------------


def best_of(results: list[Result]) -> Result | None:
    if not results:
        return None
    return min(results, key=lambda x: (not x.flag, x.p_adj, -(x.acc - x.chance)))


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p < 0.01 else f"{p:.3f}"


def table(audit: Audit) -> str:
    head = (
        f"{'family':<15} {'task':<36} {'kind':<6} {'n':>4} {'units':>5} {'chance':>6} {'mde':>5}  "
        f"{'best attack':<22} {'acc':>5} {'p':>7} {'p_adj':>7}  flag"
    )
    lines = [head, "-" * len(head)]
    for rep in audit.reports:
        t = rep.task
        b = best_of(rep.results)
        m = f"{rep.mde:.2f}" if rep.mde is not None else "  -  "
        if b is None:
            lines.append(
                f"{t.family:<15.15} {t.name:<36.36} {t.kind:<6} {len(t.rows):>4} {t.units:>5} "
                f"{rep.chance:>6.3f} {m:>5}  (no attack answered)"
            )
            continue
        flag = "LEAK" if b.flag else ("raw" if b.raw_flag else "")
        lines.append(
            f"{t.family:<15.15} {t.name:<36.36} {t.kind:<6} {len(t.rows):>4} {t.units:>5} {rep.chance:>6.3f} "
            f"{m:>5}  {b.attack:<22.22} {b.acc:>5.3f} {_fmt_p(b.key_p()):>7} {_fmt_p(b.p_adj):>7}  {flag}"
        )
        if b.n != len(t.rows):
            lines[-1] += f" (answered {b.n}, chance {b.chance:.3f})"
    return "\n".join(lines)


def family_table(audit: Audit) -> str:
    lines = []
    by_fam: dict[str, list[Result]] = defaultdict(list)
    for x in audit.families:
        by_fam[x.family].append(x)
    for fam, xs in sorted(by_fam.items()):
        b = best_of(xs)
        if b is None:
            continue
        flag = "LEAK" if b.flag else ("raw" if b.raw_flag else "")
        lines.append(
            f"{fam:<15} pooled  best {b.attack:<22} n={b.n:<4} acc {b.acc:.3f} vs {b.chance:.3f}  "
            f"p {_fmt_p(b.p)}  p_adj {_fmt_p(b.p_adj)}  {flag}"
        )
    return "\n".join(lines)


def describe(x: Result) -> str:
    s = f"{x.scope} / {x.attack}: {x.hits}/{x.n} = {x.acc:.3f} vs chance {x.chance:.3f}, p {_fmt_p(x.p)}"
    if (x.test_n, x.test_hits) != (x.n, x.hits):
        s += f" (prequential {x.test_hits}/{x.test_n})"
    if x.null_p is not None:
        s += f" (size-matched null {x.null_chance:.3f}, p {_fmt_p(x.null_p)})"
    return s + f", adjusted {_fmt_p(x.p_adj)}"


def to_json(audit: Audit, inputs: Inputs, folder: Path) -> dict[str, Any]:
    def res(x: Result) -> dict[str, Any]:
        d = {
            "attack": x.attack,
            "test": x.test,
            "n": x.n,
            "hits": x.hits,
            "acc": round(x.acc, 4),
            "chance": round(x.chance, 4),
            "p": x.p,
            "test_n": x.test_n,
            "test_hits": x.test_hits,
            "p_adj": x.p_adj,
            "raw_flag": x.raw_flag,
            "flag": x.flag,
        }
        if x.null_p is not None:
            d |= {"null_chance": round(x.null_chance or 0.0, 4), "null_p": x.null_p}
        if x.flag or x.raw_flag:
            d["examples_right"] = x.examples
        return d

    tasks = {}
    for rep in audit.reports:
        b = best_of(rep.results)
        tasks[rep.task.name] = {
            "family": rep.task.family,
            "kind": rep.task.kind,
            "rows": len(rep.task.rows),
            "units": rep.task.units,
            "folds": len(rep.task.folds),
            "chance": round(rep.chance, 4),
            "mde": rep.mde,
            "best": res(b) if b else None,
            "flag": any(x.flag for x in rep.results + rep.avoid),
            "attacks": {x.attack: res(x) for x in rep.results},
            "avoid": {x.attack: res(x) for x in rep.avoid},
        }
    fams: dict[str, dict[str, Any]] = defaultdict(dict)
    for x in audit.families:
        fams[x.family][x.attack] = res(x)
    return {
        "release": str(folder),
        "source": inputs.source,
        "inputs": inputs.checks,
        "problems": inputs.problems,
        "rows": len(inputs.rows),
        "correction": audit.correction,
        "alpha": audit.alpha,
        "margin": audit.margin,
        "tests": len(audit.all_results()),
        "attacks": {
            a.name: {"doc": a.doc, "kinds": sorted(a.kinds), "uses_gold": a.uses_gold}
            for a in REGISTRY.values()
        },
        "tasks": tasks,
        "families": dict(fams),
        "flagged": [[x.scope, x.attack] for x in audit.flagged()],
        "raw_flagged": [[x.scope, x.attack] for x in audit.raw_flagged()],
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("release", type=Path, help="the release folder (.../runs/<run-id>/)")
    ap.add_argument("--json", type=Path, help="write the full results here")
    ap.add_argument("--family", help="audit only the families whose name contains this")
    ap.add_argument(
        "--correction",
        choices=("hier", "bh", "holm", "none"),
        default="hier",
        help="hier (default): Simes per task, BH over tasks, Holm within; bh/holm: over every test; "
        "none: the raw criterion",
    )
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--margin", type=float, default=0.10, help="accuracy over chance that counts as a leak")
    args = ap.parse_args(argv)
    if not args.release.is_dir():
        print(f"not a folder: {args.release}", file=sys.stderr)
        return 2
    try:
        inputs = load(args.release, args.family)
    except (OSError, ValueError, KeyError) as e:
        print(f"cannot read the release: {e}", file=sys.stderr)
        return 2
    if not inputs.rows:
        print("no released question rows found", file=sys.stderr)
        return 2
    audit = run_audit(inputs.rows, args.alpha, args.margin, args.correction)
    print(f"release {args.release}: {len(inputs.rows)} released question rows from {inputs.source}")
    if "per_family" in inputs.checks:
        c = inputs.checks
        fams = ", ".join(f"{f} {v['ledger']}/{v['manifest']}" for f, v in c["per_family"].items())
        print(f"  ledger vs manifests (released questions / found in a manifest): {fams}")
        print(f"  manifest lines: {sum(c['manifest_lines'].values())}; rows differing: {c['mismatched']}")
    for p in inputs.problems:
        print(f"  input check: {p}")
    print(
        f"{len(audit.all_results())} tests; {args.correction} adjustment; flag: acc > chance + "
        f"{args.margin:.2f} and p_adj < {args.alpha} (raw: the same with the unadjusted p)\n"
    )
    print(table(audit))
    ft = family_table(audit)
    if ft:
        print("\n" + ft)
    flagged = audit.flagged()
    raw = [x for x in audit.raw_flagged() if not x.flag]
    print(f"\nflagged ({len(flagged)}):")
    for x in sorted(flagged, key=lambda x: x.p_adj):
        print("  " + describe(x))
    if raw:
        print(f"raw criterion only, not significant after adjustment ({len(raw)}):")
        for x in sorted(raw, key=lambda x: x.p)[:40]:
            print("  " + describe(x))
    if args.json:
        args.json.write_text(json.dumps(to_json(audit, inputs, args.release), indent=1) + "\n")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
