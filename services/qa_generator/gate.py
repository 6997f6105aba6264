"""Blind gate: can a solver that never sees a pixel answer the release?

The solvers of :mod:`services.qa_generator.blind_solvers` read only what a model could read
without looking. A task's units (landmarks, missions, UAV groups, survey views) are split into
at most ``FOLDS`` groups (one unit each when there are few) and each group is answered by
solvers fitted on the rest, so a unit's own rows never teach a solver about it.

Per task the gate tests: every solver's score above chance (exact binomial on the rows it
answers; a seeded Monte Carlo null for multi-select set-F1), every rule's score *below* chance
(avoiding its pick would beat chance: what filtering rows on a solver's answer produces), gold
labels against what the options offer (each row's gold uniform among its options), gold letters
(QC's balance tests) and, for rows with an answer box, a constant box. Errors are controlled over
the release (:mod:`services.qa_generator.significance`): Bonferroni within a task,
Benjamini-Hochberg across tasks at half of ``ALPHA``. A task that rejects is *withheld* with the
tests that rejected it. Then each family pools each solver's hits over its tasks left, which
sees a habit too faint for any small task alone (the same adjustment across families, at the
other half): a rejected family withholds those tasks whose own rows lean the same way. A sound
release thus passes with probability at least ``1 - ALPHA``. A task too small for its test to
see a ``MIN_LEAK`` leak is *unverified*. Units whose description
another unit shares are withheld as ambiguous references. Nothing else is dropped: the gate
never removes rows a solver answers, which would leave the rest answerable by avoiding it.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from skyqa.contracts.qa import FamilyGate, GateTest, SolverScore, TaskGate
from skyqa.families import Item
from skyqa.scoring import iou, set_f1

from services.qa_generator import significance as sig
from services.qa_generator.blind_solvers import FEATURES, RULES, SOLVERS, Prediction, Solver

ALPHA = 0.05
BOX_PRIOR_MAX = 0.15
MONTE_CARLO = 2000
FOLDS = 10
MIN_ANSWERED = 8  # rows a solver must answer for its score to be tested
# a family's pooled leak withholds those of its tasks whose own test leans the same way at least
# this much (one-sided p): a task the habit does not show in is left alone
SAME_HABIT = 0.2


@dataclass
class Scored:
    """One solver on one task: its hits over the rows it answered."""

    hits: float  # right answers, or summed set-F1
    answered: int
    chance: float  # mean chance over the rows it answered
    right: set[str] = field(default_factory=set)
    null_sd: float = 0.0  # multi-select: the Monte Carlo null's standard deviation of the mean
    # what its tests read (a trained solver's prequential score, see _prequential); None: this
    test: Scored | None = None

    def pool(self, other: Scored) -> None:
        """Add ``other``'s rows (weights: rows answered)."""
        total = self.answered + other.answered
        self.chance = (self.chance * self.answered + other.chance * other.answered) / total
        self.hits += other.hits
        self.answered = total


@dataclass
class GateResult:
    tasks: dict[str, TaskGate]
    families: dict[str, FamilyGate]
    withheld: dict[str, list[str]]  # task -> the reasons it is withheld
    withheld_units: dict[str, str]  # unit -> why every row of it is withheld
    tests: int  # p-values adjusted together (tasks and families)
    # every gated row -> the solvers that answered it right (the QC ledger's record)
    right_by: dict[str, list[str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.withheld and not self.withheld_units

    @property
    def failures(self) -> list[str]:
        out = [f"{task}: {why}" for task, reasons in sorted(self.withheld.items()) for why in reasons]
        return out + sorted(set(self.withheld_units.values()))

    @property
    def unverified(self) -> list[str]:
        return sorted(t for t, g in self.tasks.items() if g.status == "unverified")


def _seed(task: str) -> int:
    return int.from_bytes(hashlib.sha256(f"gate:{task}".encode()).digest()[:8], "big")


def _folds(items: list[Item]) -> list[set[str]]:
    """Unit groups: each answered by solvers trained on the others. One unit per group up to
    ``FOLDS`` units (leave-one-unit-out), else ``FOLDS`` seeded groups."""
    units = sorted({it.unit for it in items}, key=lambda u: hashlib.sha256(u.encode()).digest())
    k = min(FOLDS, len(units))
    return [set(units[i::k]) for i in range(k)]


def _out_of_fold(items: list[Item], solver: Solver, folds: list[set[str]]) -> list[Prediction | None]:
    out: dict[str, Prediction | None] = {}
    for fold in folds:
        train = [t for t in items if t.unit not in fold]
        held = [it for it in items if it.unit in fold]
        out.update(zip((it.sample_id for it in held), solver(train, held), strict=True))
    return [out[it.sample_id] for it in items]


def _prequential(items: list[Item], solver: Solver, blocks: int) -> list[Prediction | None]:
    """Each block of units answered by the solver fitted on the blocks before it (the first
    abstains). Leave-one-unit-out answers share most of their training rows, so their errors
    go together and their hits spread wider than a binomial's (1.7 to 3.2 times the variance on
    fair releases): a p-value from them is too small. Answered in order, each row's gold is,
    under no leak, any of its options with its chance whatever came before, so the hits follow
    the binomial exactly."""
    units = sorted({it.unit for it in items}, key=lambda u: hashlib.sha256(f"pre:{u}".encode()).digest())
    k = min(blocks, len(units))
    edges = [round(b * len(units) / k) for b in range(k + 1)]
    order = {u: b for b in range(k) for u in units[edges[b] : edges[b + 1]]}
    out: dict[str, Prediction | None] = {it.sample_id: None for it in items}
    for b in range(1, k):
        train = [t for t in items if order[t.unit] < b]
        held = [it for it in items if order[it.unit] == b]
        out.update(zip((it.sample_id for it in held), solver(train, held), strict=True))
    return [out[it.sample_id] for it in items]


def _chance(it: Item, count_space: int) -> float:
    return 1 / count_space if it.kind == "count" else 1 / len(it.options)


def _score(task: str, items: list[Item], preds: list[Prediction | None], count_space: int) -> Scored | None:
    pairs = [(it, p) for it, p in zip(items, preds, strict=True) if p is not None]
    if len(pairs) < MIN_ANSWERED:
        return None
    right = {it.sample_id for it, p in pairs if p == it.gold}
    if items[0].kind != "multi":
        chance = float(np.mean([_chance(it, count_space) for it, _ in pairs]))
        return Scored(float(len(right)), len(pairs), chance, right)
    # multi-select: set-F1 against same-size random picks
    rng = np.random.default_rng(_seed(task))
    sims = np.zeros(MONTE_CARLO)
    for it, pred in pairs:
        ids = [oid for oid, _ in it.options]
        k = min(len(pred), len(ids))
        golds = np.array([oid in it.gold for oid in ids])
        picks = np.argsort(rng.random((MONTE_CARLO, len(ids))), axis=1)[:, :k]
        sims += 2 * golds[picks].sum(axis=1) / (k + len(it.gold))
    sims /= len(pairs)
    f1 = sum(set_f1(it.gold, p) for it, p in pairs)
    return Scored(f1, len(pairs), float(sims.mean()), right, float(sims.std()))


def _upper_p(s: Scored) -> float:
    if s.null_sd:
        return sig.normal_upper(s.hits / s.answered, s.chance, s.null_sd)
    return sig.upper(round(s.hits), s.answered, s.chance)


def _tested(scored: dict[str, Scored]) -> dict[str, Scored]:
    """What each solver's tests read: its prequential score when trained (none when too few
    rows were answered that way), else its own."""
    out = {}
    for name, s in scored.items():
        if name in RULES:
            out[name] = s
        elif s.test is not None:
            out[name] = s.test
    return out


def _label_test(task: str, items: list[Item], gate: TaskGate) -> list[GateTest]:
    """Per difficulty, gold labels against what the options offer: a row's gold is any of its
    options with equal chance, so a label is expected as the gold in ``sum(1/k)`` over the rows
    that offer it. A label that is offered but (almost) never the answer can be ruled out."""
    out = []
    for difficulty in sorted({it.difficulty for it in items}):
        of_d = [it for it in items if it.difficulty == difficulty]
        expected: dict[str, float] = defaultdict(float)
        golds: Counter[str] = Counter()
        for it in of_d:
            for oid, lab in it.options:
                expected[lab] += 1 / len(it.options)
                golds[lab] += oid in it.gold
        space = sorted(expected)
        gate.label_counts[difficulty] = {lab: golds[lab] for lab in space}
        p = sig.weighted_chi2([golds[lab] for lab in space], [expected[lab] for lab in space])
        gate.label_chi2_p[difficulty] = round(p, 6)
        never = [lab for lab in space if golds[lab] == 0 and expected[lab] >= 2]
        out.append(
            GateTest(
                name=f"labels {difficulty}",
                p=p,
                line=f"gold labels ({difficulty}) are not spread over what the options offer (chi2 "
                f"p={p:.3g}{'; never the answer: ' + ', '.join(never[:6]) if never else ''}); "
                "leaking feature: gold label distribution",
            )
        )
    return out


def _box_test(items: list[Item], folds: list[set[str]], gate: TaskGate) -> list[GateTest]:
    boxed = [it for it in items if len(it.box) == 4]
    if not boxed or len(boxed) != len(items):
        return []
    hits = 0
    for fold in folds:
        train = [t.box for t in boxed if t.unit not in fold]
        if train:
            prior = np.mean(train, axis=0).tolist()
            hits += sum(iou(prior, it.box) >= 0.5 for it in boxed if it.unit in fold)
    gate.box_prior_acc50 = round(hits / len(boxed), 4)
    p = sig.upper(hits, len(boxed), BOX_PRIOR_MAX)
    gate.box_prior_p = round(p, 6)
    return [
        GateTest(
            name="constant box",
            p=p,
            line=f"a constant box scores Acc@0.5 {gate.box_prior_acc50:.3f} (> {BOX_PRIOR_MAX}, "
            f"p={p:.3g}); leaking feature: landmark placement in the image",
        )
    ]


def _letter_tests(report: dict[str, float]) -> list[GateTest]:
    return [
        GateTest(
            name=f"letters {key.removesuffix('_p')}",
            p=p,
            line=f"gold letters fail {key.removesuffix('_p')} (p={p:.3g}); "
            "leaking feature: answer position (gold letter)",
        )
        for key, p in sorted(report.items())
        if key.endswith("_p")
    ]


def _solver_tests(scored: dict[str, Scored]) -> list[GateTest]:
    """``scored``: what each solver's tests read (see :func:`_tested`)."""
    out = []
    for name, s in sorted(scored.items()):
        acc = s.hits / s.answered
        p = _upper_p(s)
        out.append(
            GateTest(
                name=name,
                p=p,
                line=f"{name} scores {acc:.3f} without pixels on {s.answered} rows against chance "
                f"{s.chance:.3f} (p={p:.3g}); leaking feature: {FEATURES[name]}",
            )
        )
        if name in RULES:
            below = sig.lower(round(s.hits), s.answered, s.chance)
            out.append(
                GateTest(
                    name=f"avoid {name}",
                    p=below,
                    line=f"{name} scores {acc:.3f} on {s.answered} rows, below chance {s.chance:.3f} "
                    f"(p={below:.3g}): avoiding its pick beats chance; leaking feature: a selection "
                    f"that removed rows by {FEATURES[name]}",
                )
            )
    return out


def _task_gate(
    task: str, items: list[Item], letters: dict[str, float]
) -> tuple[TaskGate, list[GateTest], dict[str, Scored]]:
    kind = items[0].kind
    count_space = max(2, len({g for it in items for g in it.gold})) if kind == "count" else 0
    folds = _folds(items)
    scored: dict[str, Scored] = {}
    for name, solver in SOLVERS.items():
        s = _score(task, items, _out_of_fold(items, solver, folds), count_space)
        if s is None:
            continue
        if name not in RULES:
            s.test = _score(task, items, _prequential(items, solver, FOLDS), count_space)
        scored[name] = s
    gate = TaskGate(
        kind=kind,
        family=items[0].family,
        rows=len(items),
        units=len({it.unit for it in items}),
        chance=round(float(np.mean([_chance(it, count_space) for it in items])), 4),
        best_solver="",
        solvers={},
    )
    tests = _solver_tests(_tested(scored))
    if kind == "choice":
        tests += _label_test(task, items, gate)
    tests += _letter_tests(letters)
    tests += _box_test(items, folds, gate)
    for name, s in scored.items():
        raw = next((t.p for t in tests if t.name == name), 1.0)
        below = next((t.p for t in tests if t.name == f"avoid {name}"), None)
        gate.solvers[name] = SolverScore(
            score=round(s.hits / s.answered, 4),
            ci=list(sig.wilson(round(s.hits), s.answered)) if not s.null_sd else _normal_ci(s),
            chance=round(s.chance, 4),
            answered=s.answered,
            raw_p=round(raw, 8),
            p_value=round(min(1.0, raw * len(tests)), 8),
            below_p=None if below is None else round(below, 8),
        )
    if gate.solvers:
        lead = {k: s.score - s.chance for k, s in gate.solvers.items()}
        gate.best_solver = max(lead, key=lambda k: (lead[k], k))
    return gate, tests, scored


def _normal_ci(s: Scored) -> list[float]:
    acc = s.hits / s.answered
    half = 1.96 * s.null_sd
    return [round(max(0.0, acc - half), 4), round(min(1.0, acc + half), 4)]


def _family_tests(scored: dict[str, dict[str, Scored]]) -> tuple[FamilyGate, list[GateTest]]:
    """Each solver's hits pooled over the family's tasks (weights: rows answered)."""
    pooled: dict[str, Scored] = {}
    tested: dict[str, Scored] = {}
    for by_solver in scored.values():
        for name, s in by_solver.items():
            if s.null_sd:
                continue  # set-F1 does not pool with accuracies
            pooled.setdefault(name, Scored(0.0, 0, 0.0)).pool(s)
        for name, s in _tested(by_solver).items():
            if not s.null_sd:
                tested.setdefault(name, Scored(0.0, 0, 0.0)).pool(s)
    tests = _solver_tests(tested)
    fam = FamilyGate(tasks=sorted(scored), solvers={})
    for name, s in pooled.items():
        raw = next((t.p for t in tests if t.name == name), 1.0)
        fam.solvers[name] = SolverScore(
            score=round(s.hits / s.answered, 4),
            ci=list(sig.wilson(round(s.hits), s.answered)),
            chance=round(s.chance, 4),
            answered=s.answered,
            raw_p=round(raw, 8),
            p_value=round(min(1.0, raw * len(tests)), 8),
        )
    return fam, tests


def run_gate(
    items: list[Item], letters: dict[str, dict[str, float]], drawn: Mapping[str, int] | None = None
) -> GateResult:
    """``items``: every family's questions as the gate sees them; ``letters``: QC's letter
    balance of the same items (:func:`qc.letter_balance`); ``drawn``: the draw each task's rows
    are (a task drawn again after being withheld; every draw tried counts as tests)."""
    drawn = drawn or {}
    by_task: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_task[it.task].append(it)
    tasks: dict[str, TaskGate] = {}
    tests: dict[str, list[GateTest]] = {}
    scored: dict[str, dict[str, dict[str, Scored]]] = defaultdict(dict)  # family -> task -> solver
    right_by: dict[str, list[str]] = {}
    for task in sorted(by_task):
        rows = by_task[task]
        if len({it.unit for it in rows}) < 2:
            continue  # leaving a unit out needs another unit to learn from
        gate, mine, by_solver = _task_gate(task, rows, letters.get(task, {}))
        gate.draw = drawn.get(task, 0)
        tasks[task], tests[task] = gate, mine
        scored[gate.family][task] = by_solver
        for it in rows:
            right_by[it.sample_id] = sorted(n for n, s in by_solver.items() if it.sample_id in s.right)
    withheld = _reject(tasks, tests)
    # second stage: each family's solvers pooled over the tasks the first left, so a habit too
    # faint for any of its tasks alone is seen, and one leaking task does not condemn the rest
    families: dict[str, FamilyGate] = {}
    pooled: dict[str, list[GateTest]] = {}
    for family, by_task_scored in sorted(scored.items()):
        left = {t: s for t, s in by_task_scored.items() if t not in withheld}
        if len(left) > 1:
            families[family], pooled[family] = _family_tests(left)
    for family, guilty in _reject_families(families, pooled).items():
        for task in families[family].tasks:
            gate = tasks[task]
            for t in guilty:
                name = t.name.removeprefix("avoid ")
                own = gate.solvers.get(name)
                if own is None:
                    continue
                p = own.below_p if t.name.startswith("avoid ") else own.raw_p
                if p is None or p > SAME_HABIT:
                    continue  # its own rows do not lean the way the family's do
                gate.failures.append(f"family {family} pooled: {t.line}")
                gate.status = "withheld"
                withheld[task] = gate.failures
    withheld_units = _shared_descriptions(items)
    return GateResult(tasks, families, withheld, withheld_units, len(tests) + len(pooled), right_by)


def _reject(tasks: dict[str, TaskGate], tests: dict[str, list[GateTest]]) -> dict[str, list[str]]:
    """First stage: Bonferroni within each task, Benjamini-Hochberg across tasks at half the
    release's level; fills each task's p-values, detectable leak and status."""
    # a task on its k-th draw has had k + 1 chances to pass: each counts
    raw = {
        task: min(1.0, sig.bonferroni([t.p for t in ts]) * (tasks[task].draw + 1))
        for task, ts in tests.items()
    }
    adjusted = sig.benjamini_hochberg(raw)
    rejected = {task for task, p in adjusted.items() if p <= ALPHA / 2}
    # BH rejects every value at most alpha * r / m for the largest rejected rank r
    threshold = max((raw[t] for t in rejected), default=0.0)
    withheld: dict[str, list[str]] = {}
    m = max(1, len(tests))
    for task, gate in tasks.items():
        gate.p_value, gate.raw_p = round(adjusted[task], 8), round(raw[task], 8)
        gate.tests = [t.model_copy(update={"p": round(t.p, 8)}) for t in tests[task]]
        lone = ALPHA / 2 / (m * max(1, len(tests[task])))  # the level a single leak must meet
        gate.detectable = sig.detectable(gate.rows, gate.chance, lone)
        if task in rejected:
            tried = len(tests[task]) * (gate.draw + 1)
            gate.failures = [t.line for t in tests[task] if t.p * tried <= threshold]
            gate.status = "withheld"
            withheld[task] = gate.failures
        elif gate.detectable > sig.MIN_LEAK:
            gate.status = "unverified"
    return withheld


def _reject_families(
    families: dict[str, FamilyGate], tests: dict[str, list[GateTest]]
) -> dict[str, list[GateTest]]:
    """Second stage, the same at the other half of the level: the tests that reject each
    rejected family."""
    raw = {family: sig.bonferroni([t.p for t in ts]) for family, ts in tests.items()}
    adjusted = sig.benjamini_hochberg(raw)
    rejected = {family for family, p in adjusted.items() if p <= ALPHA / 2}
    threshold = max((raw[f] for f in rejected), default=0.0)
    out = {}
    for family, fam in families.items():
        fam.p_value, fam.raw_p = round(adjusted[family], 8), round(raw[family], 8)
        if family in rejected:
            guilty = [t for t in tests[family] if t.p * len(tests[family]) <= threshold]
            fam.failures = [t.line for t in guilty]
            out[family] = guilty
    return out


def _shared_descriptions(items: list[Item]) -> dict[str, str]:
    """Units whose description another unit shares: a question naming it would not say which
    unit it asks about."""
    by_text: dict[str, set[str]] = defaultdict(set)
    for it in items:
        if it.description:
            by_text[it.description.strip().lower()].add(it.unit)
    out: dict[str, str] = {}
    for text, units in sorted(by_text.items()):
        if len(units) > 1:
            why = (
                f"units {', '.join(sorted(units))} share the description '{text}'; "
                "leaking feature: ambiguous reference"
            )
            out.update(dict.fromkeys(units, why))
    return out
