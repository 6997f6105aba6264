"""Blind gate: can a solver that never sees a pixel answer the release?

The solvers of :mod:`services.qa_generator.blind_solvers` read only what a model could read
without looking. The landmarks are split into at most ``FOLDS`` groups (one landmark each when
there are few) and each group is answered by solvers fitted on the rest, so a landmark's own
rows never teach a solver about it; ``box_prior``, the mean answer box elsewhere in the task,
is scored as Acc@0.5.

Per task, every solver's score is tested against chance + ``MARGIN`` (one-sided, exact
binomial for single answers and counts, a seeded Monte Carlo null of same-size random picks
for multi-select set-F1; Holm over the solvers tried). Chance is one over the row's options,
and for counts one over the number of distinct visible counts the task's rows have. The
release fails when a test rejects at ``ALPHA``, when the box prior is significantly above
``BOX_PRIOR_MAX``, when gold labels or letters are not uniform over what the options offer,
or when two landmarks share a description. Rows every answering solver gets right are
dropped.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from skyqa.contracts.qa import SolverScore, TaskGate
from skyqa.families import Item
from skyqa.scoring import iou, set_f1

from services.qa_generator.blind_solvers import SOLVERS, Prediction, Solver

# scipy.stats is imported where the gate uses it (scikit-learn likewise in the solvers): together
# they hold about 150 MB resident, which the qa-generator would otherwise carry from start while
# it waits for missions, and the gate runs once per release.

MARGIN = 0.03
ALPHA = 0.05
BOX_PRIOR_MAX = 0.15
MONTE_CARLO = 2000
FOLDS = 10


@dataclass
class GateResult:
    tasks: dict[str, TaskGate]
    failures: list[str]  # one line per reason, naming the leaking feature
    solved_by_all: list[str]  # sample ids every answering solver got right
    # every gated row (its task had rows of two units or more) -> the solvers that answered it
    right_by: dict[str, list[str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.failures


def _seed(task: str) -> int:
    return int.from_bytes(hashlib.sha256(f"gate:{task}".encode()).digest()[:8], "big")


def _binomial(hits: int, n: int, chance: float) -> tuple[float, tuple[float, float]]:
    from scipy.stats import binomtest

    test = binomtest(hits, n, min(chance + MARGIN, 0.999), alternative="greater")
    ci = binomtest(hits, n).proportion_ci(0.95, method="wilson")  # two-sided, for the report
    return float(test.pvalue), (round(float(ci.low), 4), round(float(ci.high), 4))


def _multi_null(
    items: list[Item], preds: list[Prediction], observed: float, task: str
) -> tuple[float, float]:
    """Mean set-F1 of same-size random picks (its mean), and P(null + MARGIN >= observed)."""
    rng = np.random.default_rng(_seed(task))
    sims = np.zeros(MONTE_CARLO)
    for it, pred in zip(items, preds, strict=True):
        ids = [oid for oid, _ in it.options]
        k = min(len(pred), len(ids))
        golds = np.array([oid in it.gold for oid in ids])
        picks = np.argsort(rng.random((MONTE_CARLO, len(ids))), axis=1)[:, :k]
        hits = golds[picks].sum(axis=1)
        sims += 2 * hits / (k + len(it.gold))
    sims /= len(items)
    return float(sims.mean()), float(np.mean(sims + MARGIN >= observed - 1e-12))


def _holm(p: dict[str, float]) -> dict[str, float]:
    order = sorted(p, key=lambda k: p[k])
    out, running = {}, 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * p[k]))
        out[k] = running
    return out


def _folds(items: list[Item]) -> list[set[str]]:
    """Landmark groups: each answered by solvers trained on the others. One landmark per group
    up to ``FOLDS`` landmarks (leave-one-landmark-out), else ``FOLDS`` seeded groups."""
    landmarks = sorted({it.unit for it in items}, key=lambda lm: hashlib.sha256(lm.encode()).digest())
    k = min(FOLDS, len(landmarks))
    return [set(landmarks[i::k]) for i in range(k)]


def _lolo(items: list[Item], solver: Solver, folds: list[set[str]]) -> list[Prediction | None]:
    out: dict[str, Prediction | None] = {}
    for fold in folds:
        train = [t for t in items if t.unit not in fold]
        held = [it for it in items if it.unit in fold]
        out.update(zip((it.sample_id for it in held), solver(train, held), strict=True))
    return [out[it.sample_id] for it in items]


def _chance(it: Item, count_space: int) -> float:
    return 1 / count_space if it.kind == "count" else 1 / len(it.options)


def _task_gate(task: str, items: list[Item]) -> tuple[TaskGate, dict[str, set[str]]]:
    kind = items[0].kind
    count_space = max(2, len({g for it in items for g in it.gold})) if kind == "count" else 0
    raw_p: dict[str, float] = {}
    scores: dict[str, SolverScore] = {}
    right: dict[str, set[str]] = {}
    folds = _folds(items)
    for name, solver in SOLVERS.items():
        preds = _lolo(items, solver, folds)
        if any(p is None for p in preds):
            continue
        done = [p for p in preds if p is not None]
        right[name] = {it.sample_id for it, p in zip(items, done, strict=True) if p == it.gold}
        if kind == "multi":
            per = [set_f1(it.gold, p) for it, p in zip(items, done, strict=True)]
            observed = float(np.mean(per))
            chance, p_value = _multi_null(items, done, observed, task)
            half = 1.96 * float(np.std(per, ddof=1)) / np.sqrt(len(per)) if len(per) > 1 else 1.0
            ci = (round(max(0.0, observed - half), 4), round(min(1.0, observed + half), 4))
        else:
            hits = len(right[name])
            chance = float(np.mean([_chance(it, count_space) for it in items]))
            observed = hits / len(items)
            p_value, ci = _binomial(hits, len(items), chance)
        raw_p[name] = p_value
        scores[name] = SolverScore(
            score=round(observed, 4), ci=list(ci), chance=round(chance, 4), p_value=1.0
        )
    for name, p in _holm(raw_p).items():
        scores[name].p_value = round(p, 6)
    best = max(scores, key=lambda k: (scores[k].score - scores[k].chance, k))
    gate = TaskGate(kind=kind, rows=len(items), best_solver=best, solvers=scores)
    if kind == "choice":
        _label_balance(task, items, gate)
    for name, s in sorted(scores.items()):
        if s.p_value < ALPHA:
            gate.failures.append(
                f"{task}: {name} scores {s.score:.3f} without pixels against chance {s.chance:.3f} "
                f"(+{MARGIN:.2f}, p={s.p_value:.4g}); leaking feature: {_feature(name)}"
            )
    boxed = [it for it in items if len(it.box) == 4]
    if boxed and len(boxed) == len(items):
        hits = 0
        for fold in folds:
            train = [t.box for t in boxed if t.unit not in fold]
            if train:
                prior = np.mean(train, axis=0).tolist()
                hits += sum(iou(prior, it.box) >= 0.5 for it in boxed if it.unit in fold)
        gate.box_prior_acc50 = round(hits / len(boxed), 4)
        from scipy.stats import binomtest

        p = float(binomtest(hits, len(boxed), BOX_PRIOR_MAX, alternative="greater").pvalue)
        gate.box_prior_p = round(p, 6)
        if p < ALPHA:
            gate.failures.append(
                f"{task}: a constant box scores Acc@0.5 {gate.box_prior_acc50:.3f} (> {BOX_PRIOR_MAX}, "
                f"p={p:.4g}); leaking feature: landmark placement in the image"
            )
    return gate, right


def _label_balance(task: str, items: list[Item], gate: TaskGate) -> None:
    """Gold-label counts per difficulty over every label the task's options use, and a
    chi-square test of uniformity: a label that is an option but never (or always) the answer
    can be ruled out (or in) without looking."""
    from scipy.stats import chisquare

    for difficulty in sorted({it.difficulty for it in items}):
        of_d = [it for it in items if it.difficulty == difficulty]
        space = sorted({lab for it in of_d for _, lab in it.options})
        golds = Counter(lab for it in of_d for oid, lab in it.options if oid in it.gold)
        counts = {lab: golds.get(lab, 0) for lab in space}
        gate.label_counts[difficulty] = counts
        observed = list(counts.values())
        p = float(chisquare(observed).pvalue) if sum(observed) >= len(observed) > 1 else 1.0
        gate.label_chi2_p[difficulty] = round(p, 6)
        if p < ALPHA:
            never = [lab for lab, n in counts.items() if n == 0]
            gate.failures.append(
                f"{task} {difficulty}: gold labels are not uniform over the options' label space "
                f"(chi2 p={p:.4g}{'; never the answer: ' + ', '.join(never) if never else ''}); "
                "leaking feature: gold label distribution"
            )


def letter_failures(balance: dict[str, dict[str, float]]) -> list[str]:
    """Failures from QC's letter balance (uniformity per difficulty, letter x difficulty)."""
    out = []
    for task, report in sorted(balance.items()):
        for key, p in sorted(report.items()):
            if key.endswith("_p") and p < ALPHA:
                out.append(
                    f"{task}: gold letters fail {key.removesuffix('_p')} (p={p:.4g}); "
                    "leaking feature: answer position (gold letter)"
                )
    return out


def _feature(solver: str) -> str:
    return {
        "letter_prior": "answer position (gold letter)",
        "label_prior": "gold label distribution",
        "text_model": "prompt and option text or option structure",
        "most_specific": "option structure (the gold option names the others)",
    }[solver]


def shared_descriptions(descriptions: dict[str, str]) -> list[str]:
    """One failure line per description used by more than one landmark."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for lm, text in sorted(descriptions.items()):
        by_text[text.strip().lower()].append(lm)
    return [
        f"landmarks {', '.join(lms)} share the description '{text}'; leaking feature: ambiguous reference"
        for text, lms in sorted(by_text.items())
        if len(lms) > 1
    ]


def run_gate(items: list[Item], letters: dict[str, dict[str, float]]) -> GateResult:
    """``items``: every family's rows as the gate sees them; ``letters``: QC's letter balance of
    the same items (:func:`qc.letter_balance`). Folds are release units (landmarks)."""
    by_task: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        by_task[it.task].append(it)
    tasks: dict[str, TaskGate] = {}
    solved: set[str] = set()
    failures: list[str] = []
    right_by: dict[str, list[str]] = {}
    for task in sorted(by_task):
        if len({it.unit for it in by_task[task]}) < 2:
            continue  # leave-one-landmark-out needs another landmark to learn from
        gate, right = _task_gate(task, by_task[task])
        tasks[task] = gate
        if right:
            solved |= set.intersection(*right.values())
        for it in by_task[task]:
            right_by[it.sample_id] = sorted(name for name, ids in right.items() if it.sample_id in ids)
        failures += gate.failures
    # a family that names no unit in words has nothing to compare
    descriptions = {it.unit: it.description for it in items if it.description}
    failures += shared_descriptions(descriptions)
    failures += letter_failures(letters)
    return GateResult(tasks, failures, sorted(solved), right_by)
