"""AirCopBench-style collaborative perception: 14 question types over the run's UAV groups,
each answered by a rule on what the renderer measured and what each view's recorded
degradation did (see :mod:`.facts` and :mod:`.questions`).

Every view of a group is shown degraded by a recorded transform (``none`` included): over the
run the kinds follow a seeded schedule so every kind appears once the run has seven views, with
a seeded strength of 0.35 to 1. A row shows all of its group's views, labelled UAV1..UAVn. Per
group and type the family keeps one question, the candidate whose gold the release has least
of; options are shuffled onto letters cycling per type, distractors more similar than 0.85 to a
kept option dropped. Rows release one by one.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from PIL import Image

from skyqa import keys, media
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance, load_json
from skyqa.contracts.aircop import GroupTask
from skyqa.contracts.collab import COLLAB_DISPLAY, COLLAB_GROUPS, COLLAB_TASKS, CollabRow, collab_group_of
from skyqa.contracts.qa import DegradeRequest, Funnel, Option, ReasoningStep
from skyqa.degrade import KINDS, degraded_jpeg, draw
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import mcq
from skyqa.families.aircop.checks import check_rows
from skyqa.families.aircop.export import aircop_questions
from skyqa.families.aircop.facts import ViewQuality, perceive, unique_names
from skyqa.families.aircop.questions import BUILDERS, Group, Question
from skyqa.families.base import CardPart, Checked, Item, Mark, MediaRef, PlanInputs, Planned, Rendered
from skyqa.families.structure import MAX_SIMILARITY
from skyqa.vocab.directions import similarity

LETTERS = "ABCD"
OVER = "collaboration answer over-represented"
SYSTEM = (
    "You are one of several drones observing the same area at the same moment; the images are "
    "their views, labelled UAV1, UAV2, ... Answer the multiple-choice question about them. Reply "
    'with one JSON object and nothing else: {"answer_option_id": "<letter>"}'
)


def view_path(group_id: str, uav: str) -> str:
    return f"image_tasks/groups/{group_id}/{uav}.jpg"


class AirCop:
    name = "aircop_collab"
    noun = "collaboration"
    manifest = "collab_qa"
    files: Mapping[str, str] = MappingProxyType(
        {
            "collab_qa": "image_tasks/manifests/{scene}.collab_qa.jsonl",
            # AirCopBench's question JSON (question_id, question_type, options, correct_answer, uav_paths)
            "collab_aircop": "image_tasks/manifests/{scene}.aircop_questions.json",
        }
    )
    row_model = CollabRow
    unit_kind = "uav_group"
    unit_rows: int | None = None
    rows_field: str | None = None
    funnel: Mapping[str, str] = MappingProxyType({})
    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({t: mcq.METRICS for t in COLLAB_TASKS})
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType(COLLAB_GROUPS)

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}  # its units are UAV groups, not landmarks

    def plan(self, inputs: PlanInputs) -> Planned[CollabRow]:
        out = Planned[CollabRow](rows=[])
        used: Counter[tuple[str, str]] = Counter()
        placed: Counter[str] = Counter()
        rng = np.random.default_rng([inputs.seed, 0xA1C0])
        schedule = ["none", "none", *KINDS[1:]]
        schedule = [schedule[i] for i in rng.permutation(len(schedule))]
        view = 0
        for n, entry in enumerate(inputs.missions.groups):
            task = load_json(GroupTask, inputs.store.get(entry.task), "group task")
            final = keys.final_task(inputs.run_id, task.group_id)
            frames, masks, qualities, images = [], [], [], []
            for u, uav in enumerate(task.uavs):
                clean = inputs.store.get(f"{final}/{task.images[u]}")
                seg = inputs.store.get(f"{final}/{task.segmentation[u]}")
                frames.append(np.asarray(Image.open(io.BytesIO(clean)).convert("RGB")))
                masks.append(media.decode_segmentation(seg)[1])
                kind = schedule[view % len(schedule)]  # the degradation of this view
                strength = 0.0 if kind == "none" else float(rng.uniform(0.35, 1.0))
                d = draw(kind, strength, seed=int(rng.integers(2**31)))
                view += 1
                _, measured = degraded_jpeg(clean, d)
                qualities.append(ViewQuality(d, measured.quality, measured.limited_by))
                images.append(view_path(task.group_id, uav.uav))
                out.degraded.append(
                    DegradeRequest(
                        output_image=images[-1],
                        source_image=inputs.rel(f"{final}/{task.images[u]}"),
                        degradation=d,
                    )
                )
            names = unique_names(task, frames, masks)
            g = Group(task, perceive(task, qualities), qualities, names)
            for t, asked in enumerate(COLLAB_TASKS):
                stream = np.random.default_rng([inputs.seed, n, t])
                found = [q for q in BUILDERS[asked](g) if len(_distinct(q.options)) >= 2]
                order = [found[i] for i in stream.permutation(len(found))]
                q = min(order, key=lambda c: used[(c.task, c.key)]) if order else None
                if q is None:
                    continue
                used[(q.task, q.key)] += 1
                options = _distinct(q.options)
                slot = (placed[asked] + t) % len(options)
                placed[asked] += 1
                out.rows.append(
                    self._row(inputs, f"{task.group_id}_{asked}", task, q, options, images, stream, slot)
                )
            out.missions[task.group_id] = task.group_id
        return out

    def _row(
        self,
        inputs: PlanInputs,
        sample_id: str,
        task: GroupTask,
        q: Question,
        options: tuple[str, ...],
        images: list[str],
        rng: np.random.Generator,
        slot: int,
    ) -> CollabRow:
        others = [options[1:][i] for i in rng.permutation(len(options) - 1)]
        labels = [*others[:slot], options[0], *others[slot:]]
        opts = [Option(option_id=LETTERS[k], label=lab) for k, lab in enumerate(labels)]
        user = mcq.user_prompt(q.question, opts)
        n = len(task.uavs)
        return CollabRow(
            sample_id=sample_id,
            scene_id=inputs.scene_id,
            engine=inputs.engine,
            task=q.task,
            task_display_name=COLLAB_DISPLAY[q.task],
            group=collab_group_of(q.task),
            group_id=task.group_id,
            uav=q.uav,
            images=images,
            image_labels=[u.uav for u in task.uavs],
            question=q.question,
            options=opts,
            answer_option_id=LETTERS[labels.index(options[0])],
            answer_label=options[0],
            evidence=dict(q.evidence),
            difficulty="easy" if n <= 3 else "medium" if n <= 5 else "hard",
            prompt_text=user,
            user_prompt=user,
            system_prompt=SYSTEM,
        )

    def check(self, rows: list[CollabRow], rendered: Rendered) -> Checked[CollabRow]:
        tasks: dict[str, GroupTask | None] = {}
        for gid in sorted({r.group_id for r in rows}):
            key = f"{keys.final_task(rendered.run_id, gid)}/{keys.GROUP_TASK}"
            try:
                tasks[gid] = load_json(GroupTask, rendered.store.get(key), "group task")
            except (BlobNotFound, InvalidInput):
                tasks[gid] = None
        verdict = check_rows(rows, tasks, rendered.store, rendered.run_id, rendered.degraded)
        return Checked(rows, verdict.reasons)

    def balance(self, rows: list[CollabRow]) -> dict[str, str]:
        return mcq.balance(rows, self.difficulty, OVER)

    def item(self, row: CollabRow) -> Item:
        options = tuple((o.option_id, o.label) for o in row.options)
        return Item(
            row.sample_id,
            row.task,
            row.group_id,
            row.difficulty,
            "choice",
            row.prompt_text,
            options,
            frozenset([row.answer_option_id]),
            category=row.group,
            family=self.name,
            texts=tuple(label for _, label in options),
        )

    def exports(self, rows: list[CollabRow]) -> dict[str, bytes]:
        return {"collab_aircop": aircop_questions(rows)}

    def difficulty(self, row: CollabRow) -> str:
        return row.difficulty

    def prompts(self, row: CollabRow) -> tuple[str, str]:
        return row.system_prompt, row.user_prompt

    def media(self, row: CollabRow) -> list[MediaRef]:
        return [MediaRef(label, path) for label, path in zip(row.image_labels, row.images, strict=True)]

    def marks(self, row: CollabRow) -> list[Mark]:
        return []

    def steps(self, row: CollabRow) -> list[ReasoningStep]:
        return []

    def parse(self, row: CollabRow, text: str) -> Parsed:
        return mcq.parse(row, text)

    def score(self, row: CollabRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        return mcq.score(row, parsed)

    def rotations(self, row: CollabRow) -> list[CollabRow]:
        return mcq.rotations(row)

    def with_steps(self, row: CollabRow) -> CollabRow | None:
        return None

    def guess(self, row: CollabRow, rng: np.random.Generator) -> dict[str, Any]:
        return mcq.guess(row, rng)

    def prior(self, row: CollabRow, rows: Sequence[CollabRow]) -> dict[str, Any]:
        return mcq.prior(row, rows, lambda r: r.group_id)

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| collaboration rows (AirCopBench style) | {funnel.family_rows.get(self.name, 0)} |"],
            drops=[],
            files=[
                (
                    "collab_qa",
                    f"- `{rel['collab_qa']}`: collaborative-perception rows, 14 AirCopBench question types "
                    "over the\n  UAV groups' views (one image per UAV, degraded as recorded in "
                    "`render_requests`); `evidence`\n  holds what each answer was derived from.",
                ),
                (
                    "collab_aircop",
                    f"- `{rel['collab_aircop']}`: the same rows as AirCopBench's question JSON "
                    "(`question_id`,\n  `question_type`, `question`, `options`, `correct_answer`, "
                    "`uav_paths`).",
                ),
            ],
        )


def _distinct(options: tuple[str, ...]) -> tuple[str, ...]:
    """The gold and the distractors no more similar than 0.85 to any option kept before them."""
    kept: list[str] = []
    for o in options:
        if o not in kept and all(similarity(o, k) <= MAX_SIMILARITY for k in kept):
            kept.append(o)
    return tuple(kept[: len(LETTERS)])


FAMILY = AirCop()
