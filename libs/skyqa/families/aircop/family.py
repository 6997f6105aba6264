"""AirCopBench-style collaborative perception: 14 question types over the run's UAV groups,
each answered by a rule on what the renderer measured and what each view's recorded
degradation did (see :mod:`.facts` and :mod:`.questions`).

Every view of a group is shown degraded by a recorded transform (``none`` included): over the
run the kinds follow a seeded schedule so every kind appears once the run has seven views, with
a seeded strength of 0.35 to 1. A row shows all of its group's views, labelled UAV1..UAVn. Per
group and type the family keeps one question, the candidate whose gold the release has least
of, with options drawn so that the set does not point at its gold (:func:`choose`); the gold's
letter cycles per type and the distractors take the other letters in a random order. Rows
release one by one.
"""

from __future__ import annotations

import io
import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
from skyqa.degrade import KINDS, degraded_jpeg, draw, lost_mask
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import mcq
from skyqa.families.aircop.checks import LETTERS, check_rows
from skyqa.families.aircop.export import aircop_questions
from skyqa.families.aircop.facts import ViewQuality, contents, group_names, perceive, shown_names
from skyqa.families.aircop.paths import marked_path, view_path
from skyqa.families.aircop.questions import (
    BUILDERS,
    MAX_OPTIONS,
    NUMERIC,
    RELEASED,
    SPACES,
    Group,
    Question,
    count_range,
    object_recognition,
    presence_rates,
)
from skyqa.families.base import CardPart, Checked, Item, Mark, MediaRef, PlanInputs, Planned, Rendered, box4
from skyqa.families.options import lettered, singled_out
from skyqa.families.structure import MAX_SIMILARITY
from skyqa.media_policy import MediaPolicy
from skyqa.vocab.directions import similarity

OVER = "collaboration answer over-represented"
SYSTEM = (
    "You are one of several drones observing the same area at the same moment; the images are "
    "their views, labelled UAV1, UAV2, ... Answer the multiple-choice question about them. Reply "
    'with one JSON object and nothing else: {"answer_option_id": "<letter>"}'
)


NOT_BUILT = (
    "Source elements not built here (AirCopBench collaboration rows): real-world two-UAV views "
    "(Real2); pedestrians, bicycles and moving objects (no such classes or motion in the scenes), "
    "so no motion states in grounding or matching; questions written by GPT-4o "
    "or by people (every question is rule-derived from the renderer's measurements); UAV-choice "
    "questions (scene comparison, observing posture, who to collaborate) in groups too small to offer "
    'four UAVs (the source pads them with "None" or "a ground-based sensor"); an "about equal" '
    "option (near-ties inside the margin are not asked). Counting and the view with most vehicles "
    "are asked of the whole picture only where every vehicle in it is clearly one; elsewhere (wide "
    "city views with far cars of a few pixels) of a region drawn as a red box on the view and named "
    "in the question, holding no vehicle a person might or might not count (a wrong option's box in "
    "a comparison is compared by the most a person could count in it). Objects are named by colour "
    "and class, or pointed at by the named object they stand nearest to (the source's free-text "
    'descriptions such as "approaching the intersection from the left" are not built). Object Recognition '
    "lists four kinds and asks how many of them the view shows (the source asks for the number "
    "of types without a list). A type whose label space the release's views fill with fewer than "
    "four golds (Scene Description in a city dominated by buildings and open ground) is not asked: "
    "a label offered but never the answer is ruled out without looking."
)


def marked_views(
    task: GroupTask, q: Question, images: list[str], requests: dict[str, DegradeRequest]
) -> list[str]:
    """The row's images: each view the question names a region of is the same degraded view
    with the region drawn on it (its request added to ``requests``), the others as they are."""
    out = list(images)
    labels = [u.uav for u in task.uavs]
    for label, box in q.marks:
        u = labels.index(label)
        base = requests[view_path(task.group_id, label)]
        path = marked_path(task.group_id, label, box)
        requests.setdefault(path, base.model_copy(update={"output_image": path, "marked": list(box)}))
        out[u] = path
    return out


def row_regions(row: CollabRow) -> list[tuple[str, tuple[float, float, float, float]]]:
    """(image path, box) of each region the row's evidence names; a malformed entry is an error."""
    regions = row.evidence.get("regions", {})
    if not isinstance(regions, dict):
        raise InvalidInput(f"{row.sample_id}: evidence regions is not a mapping")
    out = []
    for label, box in sorted(regions.items()):
        if label not in row.image_labels or not isinstance(box, list):
            raise InvalidInput(f"{row.sample_id}: a region names no view of the row")
        out.append((row.images[row.image_labels.index(label)], box4(box)))
    return out


class AirCop:
    name = "aircop_collab"
    noun = "collaboration"
    # AirCopBench's 1920x1080 UAV views go through VLMEvalKit as stored
    media_policy = MediaPolicy(source="AirCopBench: every UAV's view as stored")
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
        rng = np.random.default_rng([inputs.seed, 0xA1C0])
        schedule = ["none", "none", *KINDS[1:]]
        schedule = [schedule[i] for i in rng.permutation(len(schedule))]
        view = 0
        groups: list[tuple[GroupTask, Group, list[str]]] = []
        for entry in inputs.missions.groups:
            task = load_json(GroupTask, inputs.store.get(entry.task), "group task")
            final = keys.final_task(inputs.run_id, task.group_id)
            frames, masks, classes, qualities, images, views = [], [], [], [], [], []
            for u, uav in enumerate(task.uavs):
                clean = inputs.store.get(f"{final}/{task.images[u]}")
                seg = inputs.store.get(f"{final}/{task.segmentation[u]}")
                frames.append(np.asarray(Image.open(io.BytesIO(clean)).convert("RGB")))
                cls, instance = media.decode_segmentation(seg)
                masks.append(instance)
                classes.append(cls)
                kind = schedule[view % len(schedule)]  # the degradation of this view
                strength = 0.0 if kind == "none" else float(rng.uniform(0.35, 1.0))
                d = draw(kind, strength, seed=int(rng.integers(2**31)))
                view += 1
                _, measured = degraded_jpeg(clean, d)
                qualities.append(ViewQuality(d, measured.quality, measured.limited_by))
                views.append(contents(cls, instance, lost_mask(d, instance.shape[1], instance.shape[0])))
                images.append(view_path(task.group_id, uav.uav))
                out.degraded.append(
                    DegradeRequest(
                        output_image=images[-1],
                        source_image=inputs.rel(f"{final}/{task.images[u]}"),
                        degradation=d,
                    )
                )
            seen_names = shown_names(task, frames, masks, views)
            names = group_names(task, seen_names)
            group = Group(task, perceive(task, qualities), qualities, names, views, seen_names)
            groups.append((task, group, images))
            out.missions[task.group_id] = task.group_id
        start = [
            int(x)
            for x in np.random.default_rng([inputs.seed, 0x5107, inputs.draw]).integers(
                len(LETTERS), size=len(COLLAB_TASKS)
            )
        ]
        requests = {r.output_image: r for r in out.degraded}
        chosen = choose([g for _, g, _ in groups], inputs.seed, inputs.draw)
        for c, slot in zip(chosen, letter_slots(chosen, start), strict=True):
            task, _, images = groups[c.group]
            asked = COLLAB_TASKS[c.kind]
            opts, answer = lettered(c.labels, slot, LETTERS, c.rng)
            shown = marked_views(task, c.question, images, requests)
            sample_id = "_".join([task.group_id, asked, *([c.question.uav] if c.question.uav else [])])
            out.rows.append(self._row(inputs, sample_id, task, c.question, opts, answer, shown))
        out.degraded = list(requests.values())
        return out

    def _row(
        self,
        inputs: PlanInputs,
        sample_id: str,
        task: GroupTask,
        q: Question,
        opts: list[Option],
        answer: str,
        images: list[str],
    ) -> CollabRow:
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
            answer_option_id=answer,
            answer_label=q.gold,
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
        """The regions a question names, as drawn on the views the model is shown."""
        return [Mark(path, box, "reference") for path, box in row_regions(row)]

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
            notes=NOT_BUILT,
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


def letter_slots(chosen: Sequence[Chosen], start: Sequence[int]) -> list[int]:
    """Where each chosen row's gold goes among its options (taken modulo their number): per
    type and gold, in turns from the type's seeded ``start``, each gold one letter on from the
    gold before. A type asked once or twice per release would otherwise have its gold at A in
    every release of a benchmark, and one turn per type would lock letters to golds, which
    :func:`choose` also deals in turns ("above it" was the gold at A 17 times in 33 at 40
    landmarks: the label at "its" letter was the answer)."""
    placed: Counter[tuple[int, str]] = Counter()
    offset: dict[tuple[int, str], int] = {}
    out = []
    for c in chosen:
        gold = (c.kind, c.question.key)
        offset.setdefault(gold, sum(k[0] == c.kind for k in offset))
        out.append(placed[gold] + offset[gold] + int(start[c.kind]))
        placed[gold] += 1
    return out


Slot = tuple[int, int, str]  # (group index, type index, the UAV asked about or "" for the group)


@dataclass
class Chosen:
    group: int  # index of the group in the plan
    kind: int  # index of the type in COLLAB_TASKS
    question: Question
    labels: list[str]  # the option texts, gold first
    rng: np.random.Generator  # the slot's stream, which places the options next


def choose(groups: Sequence[Group], seed: int, draw: int = 0) -> list[Chosen]:
    """Per group, type and UAV the question is about one question, its options drawn (see
    :mod:`.questions`), in group, type and UAV order; ``draw`` > 0 draws again (a task the blind
    gate withheld). AirCopBench asks each type of every UAV of a capture (its ids name the UAV:
    ``Sim3_OC_UAV1_1001``); a type about the group as a whole (the view with most vehicles, the
    UAV farthest away) is asked once.

    Candidates are tried in a seeded order, those whose gold the release has least of first
    (among equals, a gold fewer slots can offer), so golds spread over their labels as far as
    the groups allow. A candidate whose draw fails (a count window that would leave the range)
    or whose drawn set is not :func:`fair` gives way to the next candidate with another gold:
    never to one with the same gold, which would draw again for that gold until a set passed,
    and make the sets a gold is asked with depend on which gold it is. Types in ``RELEASED`` draw
    from a pool of the golds this type has in the whole release, so they are chosen first, their
    golds evened out (:func:`even_golds`), and drawn once every slot has its gold (a set that
    fails then gives way to a next candidate whose gold is in the pool, not yet asked as often
    as the others)."""
    used: Counter[tuple[str, str]] = Counter()
    rates = presence_rates(groups)  # recognition lists kinds weighed by how common they are
    found: dict[Slot, list[Question]] = {}
    for n, g in enumerate(groups):
        for t, asked in enumerate(COLLAB_TASKS):
            built = object_recognition(g, rates) if asked == "object_recognition" else BUILDERS[asked](g)
            for c in built:
                found.setdefault((n, t, c.uav), []).append(c)
    # per type, how many slots offer each gold: a gold few slots offer goes first among equals
    offered = Counter((t, key) for (_, t, _), qs in found.items() for key in {c.key for c in qs})
    # a count type's range of golds over the release's candidates (questions.count_range): its
    # windows stay within it, so none offers a value that is never the gold (see options.window)
    ceiling: dict[int, tuple[str, ...]] = {}
    for t, asked in enumerate(COLLAB_TASKS):
        if asked not in NUMERIC:
            continue
        offers = [{int(c.gold) for c in qs} for (_, tt, _), qs in found.items() if tt == t]
        if (span := count_range(offers)) is not None:
            ceiling[t] = (str(span[1]), str(span[0]), str(span[2]))
    orders: dict[Slot, list[Question]] = {}
    streams: dict[Slot, np.random.Generator] = {}
    picked: dict[Slot, tuple[int, list[str]]] = {}
    for slot in sorted(found):
        n, t, uav = slot
        asked = COLLAB_TASKS[t]
        qs = found[slot]
        streams[slot] = stream = np.random.default_rng([seed, n, t, _uav_number(uav), draw])
        order = [qs[i] for i in stream.permutation(len(qs))]
        orders[slot] = order = sorted(order, key=lambda c: (used[c.task, c.key], offered[t, c.key]))
        failed: set[str] = set()
        for i, c in enumerate(order):
            if c.key in failed or _over_quota(used, asked, c.key, ceiling.get(t, ())):
                continue
            labels = [] if asked in RELEASED else c.draw(stream, ceiling.get(t, ()))
            if labels is not None and (asked in RELEASED or fair(c.question, labels)):
                picked[slot] = (i, labels)
                _count(used, c, 1)
                break
            failed.add(c.key)
    for kind in sorted(NUMERIC):
        # every row of a count type offers the same four values (count_range): its golds evened
        _even_out(COLLAB_TASKS.index(kind), picked, orders, used)
    for kind in sorted(RELEASED):
        t = COLLAB_TASKS.index(kind)
        mine = _even_out(t, picked, orders, used)
        for slot, i in mine:  # drawn again below, from the pool of the golds kept
            del picked[slot]
            _count(used, orders[slot][i], -1)
        pool = [k for k in SPACES[kind] if k in {orders[slot][i].key for slot, i in mine}]
        each = len(mine) // max(1, len(pool))  # how often each key of the pool is the gold
        for slot, i in mine:
            failed = set()
            for j, c in enumerate(orders[slot][i:], start=i):
                if c.key in failed or c.key not in pool or used[c.task, c.key] >= each:
                    continue
                labels = c.draw(streams[slot], pool)
                if labels is not None and fair(c.question, labels):
                    picked[slot] = (j, labels)
                    _count(used, c, 1)
                    break
                failed.add(c.key)
        # a row whose every set failed leaves its key short: the others are cut to match
        _even_out(t, picked, orders, used)
    return [
        Chosen(slot[0], slot[1], orders[slot][i], labels, streams[slot])
        for slot, (i, labels) in sorted(picked.items())
    ]


def _uav_number(uav: str) -> int:
    """UAV3 -> 3, the group as a whole -> 0: a slot's stream seed."""
    digits = "".join(ch for ch in uav if ch.isdigit())
    return int(digits) if digits else 0


def _over_quota(used: Counter[tuple[str, str]], task: str, key: str, span: Sequence[str]) -> bool:
    """A count type's gold already asked as often as the release's groups can offer the least
    offered value of its range (:func:`.questions.count_range`): not asked again. Views showing
    a few vehicles clearly are common and views showing many rare, so golds left to themselves
    pile up at the low end of the range, where the window of options puts the gold at the
    smallest option; given the window every rank is alike only if the golds spread evenly."""
    return len(span) == 3 and used[task, key] >= int(span[2])


def _count(used: Counter[tuple[str, str]], q: Question, by: int) -> None:
    used[q.task, q.key] += by


def _even_out(
    t: int,
    picked: dict[Slot, tuple[int, list[str]]],
    orders: dict[Slot, list[Question]],
    used: Counter[tuple[str, str]],
) -> list[tuple[Slot, int]]:
    """Drops the picks of type ``t`` whose golds :func:`even_golds` does not keep; returns the
    kept ones (slot, candidate index), in slot order."""
    mine = sorted((slot, i) for slot, (i, _) in picked.items() if slot[1] == t)
    kept = []
    for (slot, i), keep in zip(mine, even_golds([orders[s][i].key for s, i in mine]), strict=True):
        if keep:
            kept.append((slot, i))
        else:
            del picked[slot]
            _count(used, orders[slot][i], -1)
    return kept


def even_golds(golds: Sequence[str]) -> list[bool]:
    """Which picks of a fixed label space (their golds, in group order) are asked: the same
    number ``c`` of each key, the first ``c`` of a key in group order, keys picked fewer than
    ``c`` times not at all; ``c`` the count that asks the most rows with at least
    ``MAX_OPTIONS`` keys, nothing when fewer keys are golds. The options are drawn from the keys
    asked, so every label offered is the gold as often as any other: a label offered but never
    (or seldom) the answer can be ruled out without looking. A city's views are mostly buildings
    or open ground, and Scene Description answered "buildings" blind 9 times in 17 at 40
    landmarks while roads, trees and vehicles were offered and never the gold; a release whose
    views show fewer than four dominant features asks no Scene Description at all."""
    counts = Counter(golds)
    ranked = sorted(counts.values(), reverse=True)
    best = max(((c * (i + 1), c) for i, c in enumerate(ranked) if i + 1 >= MAX_OPTIONS), default=(0, 0))[1]
    seen: Counter[str] = Counter()
    out = []
    for key in golds:
        seen[key] += 1
        out.append(best > 0 and counts[key] >= best and seen[key] <= best)
    return out


def fair(question: str, labels: Sequence[str]) -> bool:
    """A set a text-only reader cannot tell the gold in by its form: four distinct options (the
    source's A-D, which its own QC requires), no option standing apart in its words
    (``options.singled_out``), no two more alike than ``MAX_SIMILARITY``. Decided from the set
    alone, never from which member is the gold."""
    if len(labels) != len(LETTERS) or len(set(labels)) != len(labels):
        return False
    if singled_out(question, labels) is not None:
        return False
    return all(similarity(a, b) <= MAX_SIMILARITY for a, b in itertools.combinations(labels, 2))


FAMILY = AirCop()
