"""UltraVR-style ultra-resolution aerial reasoning: comparison, logical verification and
relational inference questions about the run's survey views, each with a typed GT-CoT trace.

A row's difficulty is how tiny its evidence is: the smallest object its answer rests on (or, for
an absence, of the kind that is absent) covers less than ``TINY`` of the image (hard), less
than ``SMALL`` (medium), or more (easy) (:func:`.templates.difficulty`).

Per task the family chooses among the candidates (:mod:`.templates`) of all the release's views
together (:func:`select`), at most ``PER_TASK`` about one view, so that nothing a model reads
without the image goes with the gold (:func:`choose`): a numeric option set's ranks are asked
in turns; what a categorical question is about (a bundle, two classes, a region) is asked with
every label of its task in turns, drawn uniformly among the groups that offer every label its
turn still needs (so the choice does not depend on the gold); then the candidate whose gold
label the release has least of at the row's difficulty, preferring labels its cues (bundle,
regions, claimed number) have gone with least. A question text is asked once per release
(gold-blind: two views of one survey would otherwise share a question and, often, its
answer). Rows release one by one; the unit is the survey view.
What planning removed as ambiguous is counted by reason in ``ultravr_candidates.json``; every
view's objects with their box, class, colour, orientation label, quadrant and visibility go to
``ultravr_objects.jsonl``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from skyqa import keys
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance, dump_json, load_json
from skyqa.contracts.qa import Funnel, Option, ReasoningStep
from skyqa.contracts.ultra import SurveyTask
from skyqa.contracts.ultravr import CandidateFunnel, SurveyObjectRow, UltraRow, UltraStep
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import mcq, options
from skyqa.families.base import (
    CardPart,
    Checked,
    Item,
    Mark,
    MediaRef,
    PlanInputs,
    Planned,
    Rendered,
    Stored,
    box4,
)
from skyqa.families.ultravr.checks import check_rows
from skyqa.families.ultravr.objects import FAR, NEAR, REGIONS, landmarks_of, norm_box, objects_of
from skyqa.families.ultravr.templates import (
    CATEGORY,
    DISPLAY,
    LABELS,
    RANKED,
    Candidate,
    View,
    candidates,
    difficulty,
    fact,
)
from skyqa.media_policy import MediaPolicy
from skyqa.reviewed import description, rendered_id
from skyqa.steps import score_steps

LETTERS = "ABCD"
PER_TASK = 12  # rows of one task about one view, at most
TASKS = tuple(CATEGORY)
OVER = "ultra-resolution answer over-represented"
CANDIDATES_FILE = "image_tasks/surveys/candidates.json"
OBJECTS_FILE = "image_tasks/surveys/objects.jsonl"
SYSTEM = (
    "You are looking at one ultra-resolution aerial image. Its four regions are the quadrants cut "
    "by its horizontal and vertical centre lines (upper-left, upper-right, lower-left, "
    "lower-right); an object belongs to the region that holds the centre of its box. An object "
    f"is near a landmark when the centre of its box is within {NEAR:.0%} of the image's longer "
    "side of the landmark. Answer the "
    'multiple-choice question. Reply with one JSON object and nothing else: {"answer_option_id": "<letter>"}'
)
STEP_SCHEMA = (
    'Answer every step in order as a string in "steps" (a box list as JSON '
    "[[x1, y1, x2, y2], ...] normalized to [0, 1], a box as [x1, y1, x2, y2] or none), then the "
    "question. Reply with one JSON object and nothing else: "
    '{"steps": ["...", "..."], "answer_option_id": "A"}'
)


NOTES = (
    "UltraVR-style rows: a count difference is UltraVR RS's conditioned count comparison (one "
    "object type in two regions, each near a reviewed landmark wholly inside its region, nine "
    f"steps); an object is near a landmark when its box centre lies within {NEAR:.0%} of the "
    f"image's longer side of the landmark's box, and a count with an object between {NEAR:.0%} "
    f"and {FAR:.0%} is not asked. Totals, ratios and orders follow CCTV's 11-step comparison "
    "trace and compare bundles of one "
    "super-category only (cars, trucks and buses are vehicles); a view asks a fact once (a "
    "bundle's two claims are one fact). Source elements not built here: the CCTV, WSI and AD "
    "domains (the scenes have no people, slides or industrial grids; CCTV's comparison, claim and "
    "relative-position templates are asked of vehicles and other small objects, without facing "
    'directions); landmark conditions other than nearness to a reviewed landmark ("within the '
    'fenced lot", "along the tree-lined boulevard"); UltraVR V3\'s answer-localising evidence '
    "crops (V3 sends the four quadrants); expert review of every row (replaced by the "
    "geometric second-path QC); a landmark's occlusion (landmarks are not survey targets)."
)


def typed(step: UltraStep) -> Any:
    """A step's answer as the JSON value its format names (UltraVR's ``ground_truth``)."""
    if step.answer_format in ("bbox_coordinates_list", "bbox"):
        return None if step.answer == "none" else json.loads(step.answer)
    if step.answer_format == "integer":
        return int(step.answer)
    if step.answer_format == "boolean":
        return step.answer == "yes"
    return step.answer


def landmark_names(landmarks: Sequence[ValidInstance]) -> dict[int, str]:
    """How a question names each reviewed landmark, by its instance id in rendered segmentation
    (its main view's, else its views' most common: the mission planner's rule): the head of its
    description ("gray residential building") when no other landmark's starts alike, else the
    whole description; a description another landmark shares names neither (:mod:`.twins`)."""
    full = {vi.instance_id: description(vi) for vi in landmarks}
    shared = Counter(full.values())
    heads = Counter(d.split(",")[0].strip() for d in full.values())
    out = {}
    for vi in landmarks:
        d = full[vi.instance_id]
        if shared[d] > 1:
            continue
        rid = rendered_id(vi)
        head = d.split(",")[0].strip()
        out[rid] = head if heads[head] == 1 else d
    return out


def unit_of(survey_id: str, view: str) -> str:
    return f"{survey_id}_{view}"


class UltraVR:
    name = "ultravr"
    noun = "ultra-resolution"
    # UltraVR's V2 sends the original image and leaves resizing or tiling to each model's own
    # preprocessing (V1 thumbnails and V3/V4 quadrants are conditions of their own)
    media_policy = MediaPolicy(source="UltraVR V2: the original ultra-resolution image, as stored")
    manifest = "ultravr_qa"
    files: Mapping[str, str] = MappingProxyType(
        {
            "ultravr_qa": "image_tasks/manifests/{scene}.ultravr_qa.jsonl",
            # UltraVR's sample layout: options by letter, the GT-CoT as reasoning_supervision steps
            "ultravr_samples": "image_tasks/manifests/{scene}.ultravr_samples.json",
            "ultravr_objects": "image_tasks/manifests/{scene}.ultravr_objects.jsonl",
            "ultravr_candidates": "image_tasks/manifests/{scene}.ultravr_candidates.json",
        }
    )
    row_model = UltraRow
    unit_kind = "survey_view"
    unit_rows: int | None = None
    rows_field: str | None = None
    funnel: Mapping[str, str] = MappingProxyType({})
    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({t: mcq.METRICS for t in CATEGORY})
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType(
        {c: tuple(t for t, cat in CATEGORY.items() if cat == c) for c in dict.fromkeys(CATEGORY.values())}
    )

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}  # its units are survey views, not landmarks

    def plan(self, inputs: PlanInputs) -> Planned[UltraRow]:
        out = Planned[UltraRow](rows=[])
        removed: Counter[str] = Counter()
        considered = 0
        objects_lines = []
        pooled: list[Pooled] = []
        names = landmark_names(inputs.landmarks)
        for n, entry in enumerate(inputs.missions.surveys):
            task = load_json(SurveyTask, inputs.store.get(entry.task), "survey task")
            final = keys.final_task(inputs.run_id, task.survey_id)
            for k, (view, measured) in enumerate(zip(task.views, task.measured, strict=True)):
                objs = objects_of(measured.objects, task.width, task.height)
                image = inputs.rel(f"{final}/{measured.image}")
                unit = unit_of(task.survey_id, view.view)
                for o in objs:
                    row = SurveyObjectRow(
                        survey_id=task.survey_id,
                        view=view.view,
                        image=image,
                        instance_id=o.instance_id,
                        class_name=o.class_name,
                        box_xyxy=list(o.box),
                        box_xyxy_norm=norm_box(o, task.width, task.height),
                        pixels=o.pixels,
                        colour=o.colour,
                        orientation=o.orientation,
                        regions=sorted(o.regions),
                        problem=o.problem,
                    )
                    objects_lines.append(row.model_dump_json())
                rng = np.random.default_rng([inputs.seed, n, k, 0x17A, inputs.draw])
                v = View(
                    objs,
                    task.width,
                    task.height,
                    landmarks=landmarks_of(measured.objects, names, task.width, task.height),
                )
                found = candidates(v, claim_offset=int(rng.integers(6)), rng=rng)
                considered += len(found) + sum(v.removed.values())
                removed += v.removed
                # options that single one out by form or by the question's words are not
                # asked: decided from the question and the option set alone, so every member
                # stays as likely the gold
                pooled += [
                    Pooled(c, task, view.view, unit, image, (n, k), difficulty(c, task.width, task.height))
                    for c in found
                    if options.singled_out(c.question, c.options) is None
                ]
            out.missions[task.survey_id] = task.survey_id
        picked = select(pooled, inputs.seed, inputs.draw)
        for p, j in sorted(picked, key=lambda x: (x[0].order, TASKS.index(x[0].c.task), x[1])):
            sample_id = f"{p.unit}_{p.c.task}_{j}"
            out.rows.append(self._row(inputs, sample_id, p.task, p.view, p.unit, p.image, p.c))
        report = CandidateFunnel(
            candidates=considered, removed=dict(sorted(removed.items())), rows=len(out.rows)
        )
        out.files[CANDIDATES_FILE] = dump_json(report)
        out.files[OBJECTS_FILE] = "".join(f"{x}\n" for x in objects_lines).encode()
        return out

    def _row(
        self,
        inputs: PlanInputs,
        sample_id: str,
        task: SurveyTask,
        view: str,
        unit: str,
        image: str,
        c: Candidate,
    ) -> UltraRow:
        labels = list(c.options)
        opts = [Option(option_id=LETTERS[i], label=lab) for i, lab in enumerate(labels)]
        user = mcq.user_prompt(c.question, opts)
        return UltraRow(
            sample_id=sample_id,
            scene_id=inputs.scene_id,
            engine=inputs.engine,
            survey_id=task.survey_id,
            view=view,
            unit=unit,
            image=image,
            width=task.width,
            height=task.height,
            category=c.category,
            task=c.task,
            task_display_name=DISPLAY[c.task],
            question=c.question,
            options=opts,
            answer_option_id=LETTERS[labels.index(c.gold)],
            answer_label=c.gold,
            reasoning_steps=list(c.steps),
            evidence={**c.evidence, "regions": list(REGIONS)},
            difficulty=difficulty(c, task.width, task.height),
            prompt_text=user,
            user_prompt=user,
            system_prompt=SYSTEM,
        )

    def check(self, rows: list[UltraRow], rendered: Rendered) -> Checked[UltraRow]:
        tasks: dict[str, SurveyTask | None] = {}
        for sid in sorted({r.survey_id for r in rows}):
            key = f"{keys.final_task(rendered.run_id, sid)}/{keys.SURVEY_TASK}"
            try:
                tasks[sid] = load_json(SurveyTask, rendered.store.get(key), "survey task")
            except (BlobNotFound, InvalidInput):
                tasks[sid] = None
        return Checked(rows, check_rows(rows, tasks))

    def balance(self, rows: list[UltraRow]) -> dict[str, str]:
        return mcq.balance(rows, self.difficulty, OVER)

    def item(self, row: UltraRow) -> Item:
        options = tuple((o.option_id, o.label) for o in row.options)
        return Item(
            row.sample_id,
            row.task,
            row.unit,
            row.difficulty,
            "choice",
            row.prompt_text,
            options,
            frozenset([row.answer_option_id]),
            category=row.category,
            family=self.name,
            texts=tuple(label for _, label in options),
        )

    def exports(self, rows: list[UltraRow]) -> dict[str, bytes | Stored]:
        samples = [
            {
                "id": r.sample_id,
                "image": r.image,
                "category": r.category,
                "task": r.task,
                "question": r.question,
                "options": {o.option_id: o.label for o in r.options},
                "answer": r.answer_option_id,
                "reasoning_supervision": {
                    "step_type": "multi_step_qa",
                    "steps": [
                        {
                            "step_id": f"S{i}",
                            "question": s.question,
                            "ground_truth": typed(s),
                            "answer_format": s.answer_format,
                            "operation": s.operation,
                        }
                        for i, s in enumerate(r.reasoning_steps, 1)
                    ],
                },
            }
            for r in rows
        ]
        return {
            "ultravr_samples": json.dumps({"samples": samples}, indent=1, ensure_ascii=False).encode(),
            "ultravr_objects": Stored(OBJECTS_FILE, "application/x-ndjson"),
            "ultravr_candidates": Stored(CANDIDATES_FILE, "application/json"),
        }

    def difficulty(self, row: UltraRow) -> str:
        return row.difficulty

    def prompts(self, row: UltraRow) -> tuple[str, str]:
        return row.system_prompt, row.user_prompt

    def media(self, row: UltraRow) -> list[MediaRef]:
        return [MediaRef("the image", row.image)]

    def marks(self, row: UltraRow) -> list[Mark]:
        out = []
        for i, s in enumerate(row.reasoning_steps, 1):
            if s.answer_format not in ("bbox", "bbox_coordinates_list"):
                continue
            try:
                found = json.loads(s.answer)
            except ValueError:  # "none" (no such object), or a step a stored row garbled
                continue
            boxes = found if s.answer_format == "bbox_coordinates_list" else [found]
            for b in boxes if isinstance(boxes, list) else []:
                if isinstance(b, list) and len(b) == 4 and all(isinstance(v, int | float) for v in b):
                    out.append(Mark(row.image, box4(b), f"S{i} {s.operation}"))
        return out

    def steps(self, row: UltraRow) -> list[ReasoningStep]:
        return list(row.reasoning_steps)

    def parse(self, row: UltraRow, text: str) -> Parsed:
        return mcq.parse(row, text)

    def score(self, row: UltraRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        out = mcq.score(row, parsed)
        if steps:
            out.update(score_steps(row.reasoning_steps, parsed.steps if parsed.kind == "choice" else None))
        return out

    def rotations(self, row: UltraRow) -> list[UltraRow]:
        return mcq.rotations(row)

    def with_steps(self, row: UltraRow) -> UltraRow:
        listing = "\n".join(f"S{i}. {s.question}" for i, s in enumerate(row.reasoning_steps, 1))
        user = (
            f"{row.user_prompt}\n\nBefore answering, answer these steps in order:\n{listing}\n{STEP_SCHEMA}"
        )
        return row.model_copy(update={"sample_id": f"{row.sample_id}_steps", "user_prompt": user})

    def guess(self, row: UltraRow, rng: np.random.Generator) -> dict[str, Any]:
        return mcq.guess(row, rng)

    def prior(self, row: UltraRow, rows: Sequence[UltraRow]) -> dict[str, Any]:
        return mcq.prior(row, rows, lambda r: r.unit)

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| ultra-resolution rows (UltraVR style) | {funnel.family_rows.get(self.name, 0)} |"],
            drops=[],
            files=[
                (
                    "ultravr_qa",
                    f"- `{rel['ultravr_qa']}`: UltraVR-style rows (comparison, logical verification, "
                    "relational inference)\n  about ultra-resolution nadir and oblique survey views, "
                    "each with a typed GT-CoT trace\n  (`reasoning_steps`: question, answer, "
                    "operation GND/PER/QUA/INT/INF, `answer_format`).",
                ),
                (
                    "ultravr_samples",
                    f"- `{rel['ultravr_samples']}`: the same rows in UltraVR's sample layout "
                    "(`samples`; `options` by letter,\n  `reasoning_supervision.steps` S1..Sn with "
                    "typed `ground_truth`).",
                ),
                (
                    "ultravr_objects",
                    f"- `{rel['ultravr_objects']}`: every small object of every survey view: box, "
                    "class, colour,\n  orientation label, quadrant(s) and why it is not countable "
                    "without doubt (`problem`).",
                ),
                (
                    "ultravr_candidates",
                    f"- `{rel['ultravr_candidates']}`: candidates considered and those removed as "
                    "ambiguous, by reason.",
                ),
            ],
            notes=NOTES,
        )


@dataclass(frozen=True)
class Pooled:
    """A candidate with the view it asks about."""

    c: Candidate
    task: SurveyTask
    view: str
    unit: str
    image: str
    order: tuple[int, int]  # (survey, view): the rows' order in the manifest
    level: str  # the row's difficulty


def cell(task: str, shown: tuple[str, ...], rank: int | None) -> tuple[str, ...]:
    """The key counting how often a numeric option set was asked with its gold at ``rank``."""
    return ("cell", task, *shown, str(rank))


class TaskPool:
    """One task's candidates over the release, those still askable indexed by what the
    question is about (its group), so that a choice reads one group, not the whole pool."""

    def __init__(self, task: str, items: list[Pooled], rng: np.random.Generator) -> None:
        self.items = items
        self.tie = rng.random(len(items))  # seeded ties
        # numeric tasks: the key of the candidate's (option set, gold rank), and of its set's ranks
        self.cell = [cell(task, p.c.options, p.c.rank) for p in items]
        self.cells = [tuple(cell(task, p.c.options, r) for r in range(4)) for p in items]
        self.alive = set(range(len(items)))
        self.by_question: dict[str, list[int]] = {}
        self.by_fact: dict[tuple[str, str], list[int]] = {}  # (unit, the fact, however worded)
        self.by_unit: dict[str, list[int]] = {}
        self.by_group: dict[str, set[int]] = {}
        self.kinds: dict[str, Counter[str]] = {}
        # categorical tasks: the labels a group has still to be asked with in its current turn
        self.every = frozenset(LABELS.get(task, ()))
        self.turn: dict[str, frozenset[str]] = {}
        for i, p in enumerate(items):
            self.by_question.setdefault(p.c.question, []).append(i)
            self.by_fact.setdefault((p.unit, fact(p.c)), []).append(i)
            self.by_unit.setdefault(p.unit, []).append(i)
            self.by_group.setdefault(p.c.group, set()).add(i)
            self.kinds.setdefault(p.c.group, Counter())[p.c.kind] += 1

    def drop(self, ids: list[int]) -> None:
        for i in ids:
            if i in self.alive:
                self.alive.discard(i)
                p = self.items[i]
                self.by_group[p.c.group].discard(i)
                self.kinds[p.c.group][p.c.kind] -= 1

    def groups(self) -> list[str]:
        """The groups that can be asked now: with a candidate left for every label of their
        current turn (at a turn's start, every label of the task)."""
        return sorted(
            g
            for g, ids in self.by_group.items()
            if ids and all(self.kinds[g][k] > 0 for k in self.turn.get(g, self.every))
        )

    def asked(self, group: str, label: str) -> None:
        left = self.turn.get(group, self.every) - {label}
        self.turn[group] = left or self.every


def select(pooled: list[Pooled], seed: int, draw: int) -> list[tuple[Pooled, int]]:
    """The rows of the release, each with its number among its view's rows of its task.

    Per task, candidates are chosen one at a time by :func:`choose` from those of every view
    together: a view offering two or three of a task's labels for what it counts is common, one
    offering all four is rare, and the views of a release together often do (a view alone
    would ask almost nothing of the categorical tasks, whose groups start a turn only with
    every label on offer). A view keeps at most ``PER_TASK`` rows of a task, a question text is
    asked once per release (gold-blind: two views would otherwise share a question and, often,
    its answer), and a view is asked a fact once (:func:`.templates.fact`: the same fact named
    the other way round, or a bundle's claims worded with other numbers or regions)."""
    out: list[tuple[Pooled, int]] = []
    for t, asked in enumerate(TASKS):
        rng = np.random.default_rng([seed, 0x5E1, draw, t])  # a task's draws do not move another's
        pool = TaskPool(asked, [p for p in pooled if p.c.task == asked], rng)
        taken: Counter[str] = Counter()
        used: Counter[tuple[str, ...]] = Counter()
        while (p := choose(asked, pool, used, rng)) is not None:
            out.append((p, taken[p.unit]))
            taken[p.unit] += 1
            pool.drop(pool.by_question[p.c.question])
            pool.drop(pool.by_fact[(p.unit, fact(p.c))])
            if taken[p.unit] == PER_TASK:
                pool.drop(pool.by_unit[p.unit])
    return out


def choose(
    task: str, pool: TaskPool, used: Counter[tuple[str, ...]], rng: np.random.Generator
) -> Pooled | None:
    """One candidate of ``task``, or None when the pool has none to offer; counts it in ``used``.

    Numeric tasks: each candidate's options were drawn holding its gold at a uniform rank; of
    an option set the ranks are asked in turn (none a second time before every rank had its
    turn), so that given the options every member was the gold equally often although small
    counts are far more common than large ones (turns per option set only, not per difficulty
    too: a set's last, partial turn favours its common values, and more sets, more such turns).

    Categorical tasks: what the question is about (its group) is asked with the task's labels
    in turns, each label once a turn, so that given the group every label is the gold equally
    often; a turn starts only where the views offer the group with every label, and a group
    is drawn uniformly among those that offer every label its turn still needs (one that
    offers one label only would be asked only with it). In the group, of the labels its turn
    still needs, the candidate whose label the release has least of at its difficulty and
    over the task. Then, in both, the candidate whose cues went with its label least; seeded
    ties."""

    def cues(c: Candidate) -> int:
        return sum(used[("cue", task, cue, c.kind)] for cue in c.cues)

    if task in RANKED:
        turn = [i for i in pool.alive if used[pool.cell[i]] <= min(used[k] for k in pool.cells[i])]
        if not turn:
            return None
        best = min(turn, key=lambda i: (used[pool.cell[i]], cues(pool.items[i].c), pool.tie[i]))
        p = pool.items[best]
    else:
        names = pool.groups()
        if not names:
            return None
        group = names[int(rng.integers(len(names)))]
        need = pool.turn.get(group, pool.every)
        mine = [i for i in pool.by_group[group] if pool.items[i].c.kind in need]

        def balance(p: Pooled) -> int:
            return used[("level", task, p.level, p.c.kind)] + used[("label", task, p.c.kind)]

        best = min(mine, key=lambda i: (balance(pool.items[i]), cues(pool.items[i].c), pool.tie[i]))
        p = pool.items[best]
        pool.asked(group, p.c.kind)
        used[("level", task, p.level, p.c.kind)] += 1
        used[("label", task, p.c.kind)] += 1
    used[cell(task, p.c.options, p.c.rank)] += 1
    for cue in p.c.cues:
        used[("cue", task, cue, p.c.kind)] += 1
    return p


FAMILY = UltraVR()
