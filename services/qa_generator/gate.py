"""Blind gate: can a solver that never sees a pixel answer the release?

The solvers of :mod:`services.qa_generator.blind_solvers` read only what a model could read
without looking. A task's units (landmarks, missions, UAV groups, survey views) are split into
at most ``FOLDS`` groups (one unit each up to ``FOLDS`` units) and each group is answered by
solvers fitted on the rest: the score each solver shows. Its tests read answers given in order
instead (:func:`_prequential`), which makes them exact.

Per task the gate tests every solver's score above chance (exact binomial on the rows it
answers; for multi-select, the golds its picks catch against random picks of the same size),
every rule's score *below* chance (avoiding its pick would beat chance: what filtering rows on a
solver's answer produces), gold labels and gold letters against what the rows offer, and a
constant answer box. A task drawn again after it was withheld is also tested on the rows of all
its draws together, so a leak of its generator cannot be washed out by drawing until one draw
passes (the balance of its golds and letters excepted: each draw deals it anew). A task of
one unit gets the tests that learn nothing and is at most *unverified*.

Errors are controlled over the release (:mod:`services.qa_generator.significance`): Bonferroni
within a task, Benjamini-Hochberg across tasks at half of ``ALPHA``; a task that rejects is
*withheld* with the tests that rejected it. Then each family pools each solver over its tasks
left, which sees a habit too faint for any small task alone: Benjamini-Hochberg across families
at the other half, and within each rejected family Benjamini-Bogomolov picks the tasks whose own
rows show the habit (BH on their own p at the level scaled by the share of families rejected),
or, when none does, the one task those solvers point at most (a family that fails never ships
every task it pooled). A release with no leak withholds nothing with probability at least
``1 - ALPHA``. A task too small for its test to see a ``MIN_LEAK`` leak is *unverified*. Units
named in words alone (``Item.description``) that another unit shares are withheld as ambiguous
references (a construction rule, not a test). Nothing else is dropped: the gate never removes
rows a solver answers, which would leave the rest answerable by avoiding it.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from skyqa.contracts.qa import FamilyGate, GateTest, SolverScore, TaskGate
from skyqa.families import Item
from skyqa.scoring import iou, set_f1

from services.qa_generator import blind_solvers, significance as sig
from services.qa_generator.blind_solvers import BALANCE, FEATURES, RULES, SOLVERS, Prediction, Solver

ALPHA = 0.05
BOX_PRIOR_MAX = 0.15
FOLDS = 10
MIN_ANSWERED = 8  # rows a solver must answer for its score to be tested


@dataclass
class Scored:
    """One solver on one task: its hits over the rows it answered."""

    hits: float  # right answers, or summed set-F1
    answered: int
    chance: float  # mean chance over the rows it answered (multi-select: a pick's)
    right: set[str] = field(default_factory=set)
    # multi-select: each row's (options, golds, picks) and the golds the picks caught
    draws: list[tuple[int, int, int]] = field(default_factory=list)
    caught: int = 0
    # what its tests read: a trained solver's prequential answers (see _prequential); None
    # for a rule, whose answers learn nothing and are tested as they are
    test: Scored | None = None

    def pool(self, other: Scored) -> None:
        """Add ``other``'s rows (weights: rows answered)."""
        total = self.answered + other.answered
        self.chance = (self.chance * self.answered + other.chance * other.answered) / total
        self.hits += other.hits
        self.answered = total
        self.draws += other.draws
        self.caught += other.caught


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


def _order(units: Sequence[str], salt: str) -> list[str]:
    return sorted(units, key=lambda u: hashlib.sha256(f"{salt}:{u}".encode()).digest())


def _folds(items: list[Item]) -> list[set[str]]:
    """Unit groups: each answered by solvers trained on the others. One unit per group up to
    ``FOLDS`` units (leave-one-unit-out), else ``FOLDS`` seeded groups."""
    units = _order(list({it.unit for it in items}), "fold")
    k = min(FOLDS, len(units))
    return [set(units[i::k]) for i in range(k)]


def _out_of_fold(items: list[Item], solver: Solver, folds: list[set[str]]) -> list[Prediction | None]:
    out: dict[str, Prediction | None] = {}
    for fold in folds:
        train = [t for t in items if t.unit not in fold]
        held = [it for it in items if it.unit in fold]
        out.update(zip((it.sample_id for it in held), solver(train, held), strict=True))
    return [out[it.sample_id] for it in items]


def _prequential(items: list[Item], solver: Solver) -> list[Prediction | None]:
    """Each block of units answered by the solver fitted on the blocks before it (the first
    abstains). Leave-one-unit-out answers share most of their training rows, so their errors
    go together and their hits spread wider than a binomial's (1.7 to 3.2 times the variance on
    fair releases): a p-value from them is too small. Answered in order, each row's gold is,
    under no leak, any of its options with its chance whatever came before, so the hits follow
    the binomial exactly."""
    units = _order(list({it.unit for it in items}), "pre")
    k = min(FOLDS, len(units))
    edges = [round(b * len(units) / k) for b in range(k + 1)]
    block = {u: b for b in range(k) for u in units[edges[b] : edges[b + 1]]}
    out: dict[str, Prediction | None] = {it.sample_id: None for it in items}
    for b in range(1, k):
        train = [t for t in items if block[t.unit] < b]
        held = [it for it in items if block[it.unit] == b]
        out.update(zip((it.sample_id for it in held), solver(train, held), strict=True))
    return [out[it.sample_id] for it in items]


def _chance(it: Item, count_space: int) -> float:
    if it.kind == "count":
        return 1 / count_space
    if it.kind == "multi":
        return len(it.gold) / len(it.options)  # a random pick's chance of being a gold
    return 1 / len(it.options)


def _score(items: list[Item], preds: list[Prediction | None], count_space: int) -> Scored | None:
    pairs = [(it, p) for it, p in zip(items, preds, strict=True) if p is not None]
    if len(pairs) < MIN_ANSWERED:
        return None
    right = {it.sample_id for it, p in pairs if p == it.gold}
    chance = float(np.mean([_chance(it, count_space) for it, _ in pairs]))
    if items[0].kind != "multi":
        return Scored(float(len(right)), len(pairs), chance, right)
    f1 = sum(set_f1(it.gold, p) for it, p in pairs)
    draws = [(len(it.options), len(it.gold), min(len(p), len(it.options))) for it, p in pairs]
    caught = sum(len(p & it.gold) for it, p in pairs)
    return Scored(f1, len(pairs), chance, right, draws, caught)


def _upper_p(s: Scored) -> float:
    if s.draws:
        return sig.hits_upper(s.draws, s.caught)
    return sig.upper(round(s.hits), s.answered, s.chance)


def _tested(scored: dict[str, Scored]) -> dict[str, Scored]:
    """What each solver's tests read: its prequential answers when trained (none when too few
    rows were answered that way), else its own."""
    out = {}
    for name, s in scored.items():
        if name in RULES:
            out[name] = s
        elif s.test is not None:
            out[name] = s.test
    return out


def _solver_tests(scored: dict[str, Scored], suffix: str = "") -> list[GateTest]:
    """``scored``: what each solver's tests read (see :func:`_tested`)."""
    out = []
    for name, s in sorted(scored.items()):
        acc = s.hits / s.answered
        p = _upper_p(s)
        # a multi-select test counts the golds its picks caught, not their set-F1
        expected = sum(g * k / n for n, g, k in s.draws)
        caught = f" (its picks catch {s.caught} golds, random ones {expected:.1f})" if s.draws else ""
        out.append(
            GateTest(
                name=name + suffix,
                p=p,
                line=f"{name} scores {acc:.3f} without pixels on {s.answered} rows{suffix} against "
                f"chance {s.chance:.3f}{caught} (p={p:.3g}); leaking feature: {FEATURES[name]}",
            )
        )
        if name in RULES and not s.draws:
            # trained solvers are not tested this way: balanced golds put a prior fitted on
            # the other rows below chance by construction, which no model answering one row
            # at a time can use
            below = sig.lower(round(s.hits), s.answered, s.chance)
            out.append(
                GateTest(
                    name=f"avoid {name}{suffix}",
                    p=below,
                    line=f"{name} scores {acc:.3f} on {s.answered} rows{suffix}, below chance "
                    f"{s.chance:.3f} (p={below:.3g}): avoiding its pick beats chance; leaking "
                    f"feature: a selection that removed rows by {FEATURES[name]}",
                )
            )
    return out


def _offered_tests(items: list[Item], gate: TaskGate) -> list[GateTest]:
    """Gold labels and gold letters against what the rows offer, per difficulty: a label (or a
    letter) offered but (almost) never the answer can be ruled out without looking."""
    out = []
    for difficulty in sorted({it.difficulty for it in items}):
        of_d = [it for it in items if it.difficulty == difficulty]
        golds = [next(iter(it.gold)) for it in of_d]
        labels = [dict(it.options) for it in of_d]
        rows = [(list(lab.values()), lab[g]) for lab, g in zip(labels, golds, strict=True)]
        p = sig.offered_chi2(rows)
        gate.label_chi2_p[difficulty] = round(p, 6)
        counts: dict[str, int] = {}
        for offered, gold in rows:
            for lab in offered:
                counts.setdefault(lab, 0)
            counts[gold] += 1
        gate.label_counts[difficulty] = dict(sorted(counts.items()))
        never = [lab for lab, n in sorted(counts.items()) if n == 0 and sum(lab in o for o, _ in rows) >= 8]
        out.append(
            GateTest(
                name=f"labels {difficulty}",
                p=p,
                line=f"gold labels ({difficulty}) are not spread over what the options offer (p={p:.3g}"
                f"{'; never the answer: ' + ', '.join(never[:6]) if never else ''}); "
                "leaking feature: gold label distribution",
            )
        )
        letters = sig.offered_chi2(
            [([oid for oid, _ in it.options], g) for it, g in zip(of_d, golds, strict=True)]
        )
        out.append(
            GateTest(
                name=f"letters {difficulty}",
                p=letters,
                line=f"gold letters ({difficulty}) are not spread over the options' letters "
                f"(p={letters:.3g}); leaking feature: answer position (gold letter)",
            )
        )
    return out


def _box_test(items: list[Item], folds: list[set[str]], gate: TaskGate) -> list[GateTest]:
    boxed = [it for it in items if len(it.box) == 4]
    if not boxed or len(boxed) != len(items) or len(folds) < 2:
        return []
    hits = 0
    for fold in folds:
        train = [t.box for t in boxed if t.unit not in fold]
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


def _solve(
    items: list[Item], count_space: int, trained: bool, skip: frozenset[str] = frozenset()
) -> dict[str, Scored]:
    """Every solver that answers enough rows: rules always, trained ones when ``trained`` (the
    task has another unit to learn from); none of ``skip``."""
    folds = _folds(items)
    scored: dict[str, Scored] = {}
    for name, solver in SOLVERS.items():
        if name in skip or (name not in RULES and not trained):
            continue
        s = _score(items, _out_of_fold(items, solver, folds), count_space)
        if s is None:
            continue
        if name not in RULES:
            s.test = _score(items, _prequential(items, solver), count_space)
        scored[name] = s
    return scored


def _task_gate(
    items: list[Item], earlier: list[Item], draw: int
) -> tuple[TaskGate, list[GateTest], dict[str, Scored]]:
    kind = items[0].kind
    every = [*earlier, *items]
    count_space = max(2, len({g for it in every for g in it.gold})) if kind == "count" else 0
    units = len({it.unit for it in items})
    scored = _solve(items, count_space, trained=units >= 2)
    gate = TaskGate(
        kind=kind,
        family=items[0].family,
        rows=len(items),
        units=units,
        chance=round(float(np.mean([_chance(it, count_space) for it in items])), 4),
        best_solver="",
        solvers={},
        draw=draw,
    )
    tests = _solver_tests(_tested(scored))
    if earlier:
        # every draw of the task together: how its family words and builds its rows (the
        # balance of golds and letters is each draw's own, which a fresh draw deals anew: the
        # rows are read with their options in label order, so no solver sees a draw's letters)
        pooled = [_unlettered(it) for it in every]
        together = _solve(pooled, count_space, trained=units >= 2, skip=BALANCE)
        tests += _solver_tests(_tested(together), f" over draws 0-{draw}")
    if kind == "choice":
        tests += _offered_tests(items, gate)
    tests += _box_test(items, _folds(items), gate)
    by_name = {t.name: t.p for t in tests}
    for name, s in scored.items():
        raw = by_name.get(name, 1.0)
        shown = s.hits / s.answered
        gate.solvers[name] = SolverScore(
            score=round(shown, 4),
            ci=list(sig.wilson(round(s.hits), s.answered)) if not s.draws else _mean_ci(s),
            chance=round(s.chance, 4),
            answered=s.answered,
            raw_p=round(raw, 8),
            p_value=round(min(1.0, raw * len(tests)), 8),
            below_p=None if f"avoid {name}" not in by_name else round(by_name[f"avoid {name}"], 8),
        )
    if gate.solvers:
        lead = {k: s.score - s.chance for k, s in gate.solvers.items()}
        gate.best_solver = max(lead, key=lambda k: (lead[k], k))
    return gate, tests, scored


def _unlettered(item: Item) -> Item:
    """The row with its options sorted by label under its own ids in order: what its family
    wrote, without where its draw put the gold."""
    if not item.options:
        return item
    ids = sorted(oid for oid, _ in item.options)
    ordered = sorted(item.options, key=lambda o: (o[1].lower(), o[0]))
    new = {oid: ids[i] for i, (oid, _) in enumerate(ordered)}
    options = tuple((new[oid], label) for oid, label in ordered)
    return replace(item, options=options, gold=frozenset(new.get(g, g) for g in item.gold))


def _mean_ci(s: Scored) -> list[float]:
    """A normal interval of a mean set-F1 from its rows' spread."""
    mean = s.hits / s.answered
    half = 1.96 * float(np.sqrt(mean * (1 - mean) / s.answered))
    return [round(max(0.0, mean - half), 4), round(min(1.0, mean + half), 4)]


def _family_tests(scored: dict[str, dict[str, Scored]]) -> tuple[FamilyGate, list[GateTest]]:
    """Each solver's hits pooled over the family's tasks (weights: rows answered)."""
    pooled: dict[str, Scored] = {}
    tested: dict[str, Scored] = {}
    for by_solver in scored.values():
        for name, s in by_solver.items():
            if not s.draws:  # set-F1 does not pool with accuracies
                pooled.setdefault(name, Scored(0.0, 0, 0.0)).pool(s)
        for name, s in _tested(by_solver).items():
            if not s.draws:
                tested.setdefault(name, Scored(0.0, 0, 0.0)).pool(s)
    tests = _solver_tests(tested)
    by_name = {t.name: t.p for t in tests}
    fam = FamilyGate(tasks=sorted(scored), solvers={})
    for name, s in pooled.items():
        raw = by_name.get(name, 1.0)
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
    items: list[Item],
    drawn: Mapping[str, int] | None = None,
    earlier: Mapping[str, list[Item]] | None = None,
) -> GateResult:
    """``items``: every family's questions as the gate sees them; ``drawn``: the draw each
    task's rows are (a task drawn again after it was withheld), ``earlier``: the rows of its
    earlier draws."""
    drawn, earlier = drawn or {}, earlier or {}
    by_task: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_task[it.task].append(it)
    tasks: dict[str, TaskGate] = {}
    tests: dict[str, list[GateTest]] = {}
    scored: dict[str, dict[str, dict[str, Scored]]] = defaultdict(dict)  # family -> task -> solver
    right_by: dict[str, list[str]] = {}
    try:
        for task in sorted(by_task):
            rows = by_task[task]
            gate, mine, by_solver = _task_gate(rows, earlier.get(task, []), drawn.get(task, 0))
            tasks[task], tests[task] = gate, mine
            if gate.units >= 2:
                scored[gate.family][task] = by_solver
            for it in rows:
                right_by[it.sample_id] = sorted(n for n, s in by_solver.items() if it.sample_id in s.right)
        withheld = _reject(tasks, tests)
        families, stage_two = _second_stage(scored, withheld, tasks, tests)
    finally:
        # the solvers' memos hold every item they saw: kept for one gate, never across releases
        blind_solvers.forget()
    return GateResult(
        tasks, families, withheld, _shared_descriptions(items), len(tests) + stage_two, right_by
    )


def _rejected(raw: dict[str, float], level: float) -> tuple[dict[str, float], set[str], float]:
    """Benjamini-Hochberg at ``level``: the adjusted values, the keys rejected, and the largest
    raw value rejected (BH rejects every value up to it)."""
    adjusted = sig.benjamini_hochberg(raw)
    rejected = {k for k, p in adjusted.items() if p <= level}
    return adjusted, rejected, max((raw[k] for k in rejected), default=0.0)


def _reject(tasks: dict[str, TaskGate], tests: dict[str, list[GateTest]]) -> dict[str, list[str]]:
    """First stage: Bonferroni within each task, Benjamini-Hochberg across tasks at half the
    release's level; fills each task's p-values, detectable leak and status."""
    raw = {t: sig.bonferroni([x.p for x in ts]) for t, ts in tests.items()}
    adjusted, rejected, threshold = _rejected(raw, ALPHA / 2)
    withheld: dict[str, list[str]] = {}
    m = max(1, len(tests))
    for task, gate in tasks.items():
        mine = tests[task]
        gate.p_value, gate.raw_p = round(adjusted[task], 8), round(raw[task], 8)
        gate.tests = [t.model_copy(update={"p": round(t.p, 8)}) for t in mine]
        # the rows a trained solver's test reads (the first block is never answered), at the
        # level a single leak in this task has to meet
        answered = max((s.answered for s in gate.solvers.values()), default=0)
        tested = answered - answered // FOLDS if gate.units >= 2 else answered
        gate.detectable = sig.detectable(tested, gate.chance, ALPHA / 2 / (m * max(1, len(mine))))
        if task in rejected:
            gate.failures = [t.line for t in mine if t.p * len(mine) <= threshold]
            gate.status = "withheld"
            withheld[task] = list(gate.failures)
        elif gate.detectable > sig.MIN_LEAK or gate.units < 2:
            gate.status = "unverified"
    return withheld


def _second_stage(
    scored: dict[str, dict[str, dict[str, Scored]]],
    withheld: dict[str, list[str]],
    tasks: dict[str, TaskGate],
    tests: dict[str, list[GateTest]],
) -> tuple[dict[str, FamilyGate], int]:
    """Each family's solvers pooled over its tasks the first stage left; the families rejected
    (Benjamini-Hochberg at half the release's level) withhold the tasks whose own tests of the
    rejecting solvers reject at that level scaled by the share of families rejected
    (Benjamini-Bogomolov), or else the task whose own tests of them are smallest. Adds to
    ``withheld``; returns the families and how many were tested."""
    families: dict[str, FamilyGate] = {}
    pooled: dict[str, list[GateTest]] = {}
    for family, by_task in sorted(scored.items()):
        left = {t: s for t, s in by_task.items() if t not in withheld}
        if len(left) > 1:
            families[family], pooled[family] = _family_tests(left)
    raw = {f: sig.bonferroni([t.p for t in ts]) for f, ts in pooled.items()}
    adjusted, rejected, threshold = _rejected(raw, ALPHA / 2)
    for family, fam in families.items():
        fam.p_value, fam.raw_p = round(adjusted[family], 8), round(raw[family], 8)
        if family not in rejected:
            continue
        guilty = [t for t in pooled[family] if t.p * len(pooled[family]) <= threshold]
        fam.failures = [t.line for t in guilty]
        names = {t.name for t in guilty}
        own = {
            task: sig.bonferroni([t.p for t in tests[task] if t.name in names] or [1.0]) for task in fam.tasks
        }
        level = ALPHA / 2 * len(rejected) / max(1, len(families))
        _, picked, _ = _rejected(own, level)
        # the family's rejection says some task of it leaks: when no task's own rows pass the
        # scaled level, the one the rejecting solvers point at most is withheld (a family that
        # fails never ships all its tasks)
        picked = picked or {min(own, key=lambda t: (own[t], t))}
        for task in sorted(picked):
            why = [f"family {family} pooled: {t.line}" for t in guilty]
            tasks[task].failures += why
            tasks[task].status = "withheld"
            withheld[task] = list(tasks[task].failures)
    return families, len(pooled)


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
