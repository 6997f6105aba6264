"""UrbanVideo-Bench-style navigation questions: 16 types over the run's navigation missions,
each answered from recorded geometry (see :mod:`skyqa.families.urbanvideo.questions`).

Per mission and type the family keeps up to the scan's ``navigation.per_type`` questions (of
the ``navigation.types`` asked, all 16 unless listed), chosen over all missions together so a
text-only solver learns nothing from the answers: a type of fixed vocabulary makes every label
it offers the answer equally often (per stratum, :meth:`Mission.stratum`), the others take the
answer the type has least of so far; a fact of the scene is asked once and an instruction
quoted by one mission. The gold's letter cycles per type and difficulty over the rows that
remain. A question asked "now" shows the mission video cut at that frame (a clip the QA stage
encodes from the mission's frames). Rows release one by one: a failed row costs only itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from types import MappingProxyType
from typing import Any

import numpy as np

from skyqa import keys
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance, load_json
from skyqa.contracts.missions import NavigationIndexRow
from skyqa.contracts.navigation import NavigationTask
from skyqa.contracts.qa import ClipRequest, Funnel, Option, ReasoningStep
from skyqa.contracts.urbanvideo import DISPLAY, GROUPS, NAV_TASKS, NavRow, NavTask, group_of
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import mcq, options as O
from skyqa.families.base import CardPart, Checked, Item, Mark, MediaRef, PlanInputs, Planned, Rendered
from skyqa.families.urbanvideo import evaluation
from skyqa.families.urbanvideo.checks import check_rows
from skyqa.families.urbanvideo.export import urbanvideo_table
from skyqa.families.urbanvideo.questions import (
    BUILDERS,
    OPTIONS,
    VOCABULARY,
    Mission,
    Question,
    alike,
    difficulty,
    fewest_options,
    lone_hint,
    mentions,
    scene_boxes,
)
from skyqa.media_policy import Frames, MediaPolicy

LETTERS = "ABCDEFGH"
OVER = "navigation answer over-represented"


class UrbanVideo:
    name = "urbanvideo_nav"
    noun = "navigation"
    # UrbanVideo-Bench's run.py sends at most 32 uniformly strided frames of each clip (its
    # frame-list models; those that take a rate get 1 fps: an endpoint's video_sample_fps)
    media_policy = MediaPolicy(
        frames=Frames(count=32),
        source="UrbanVideo-Bench: 32 frames spread over the clip (1 fps for rate-taking models)",
    )
    manifest = "navigation_qa"
    files: Mapping[str, str] = MappingProxyType(
        {
            "navigation_qa": "video_tasks/manifests/{scene}.navigation_qa.jsonl",
            # UrbanVideo-Bench's own table: Question_id, video_id, question_category, question, answer
            "navigation_urbanvideo": "video_tasks/manifests/{scene}.urbanvideo_mcq.parquet",
        }
    )
    row_model = NavRow
    unit_kind = "navigation_mission"
    unit_rows: int | None = None
    rows_field: str | None = None
    funnel: Mapping[str, str] = MappingProxyType({})  # its drops are counted in drop_reasons
    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({t: evaluation.METRICS for t in NAV_TASKS})
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType(GROUPS)  # UrbanVideo-Bench's four

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}  # its units are navigation missions, not landmarks

    def plan(self, inputs: PlanInputs) -> Planned[NavRow]:
        """Every mission's candidates per type (a fixed vocabulary's again with only the labels
        enough missions can answer with), then per type, fewest candidates first (a fact two
        types can ask goes to the one with fewer other questions): a fixed vocabulary's rows
        by :meth:`_balanced`, the others' by :func:`_pick` (the answer the type has least of
        first, a stratified wording's answers in equal numbers); a scene fact never twice, an
        instruction quoted by one mission. Then the rows the release's balance would drop are
        left out, and only then are the options put on letters, so each type's gold letters
        cycle over the rows that remain (per difficulty, as the release tests them)."""
        out = Planned[NavRow](rows=[])
        bitrate = int(inputs.scan.video.bitrate) or 2_000_000
        settings = inputs.scan.navigation
        per_type = settings.per_type if settings.HasField("per_type") else 1
        asked = [t for t in NAV_TASKS if not settings.types or t in settings.types]
        missions: Missions = []
        for nav in inputs.missions.navigation:
            task = load_json(NavigationTask, inputs.store.get(nav.task), "navigation task")
            missions.append((nav, task, Mission(task)))
            out.missions[nav.traj_id] = nav.traj_id
        # the landmarks some mission flies to, by a description no other of them has
        where = {lm.landmark_id: lm.description for _, task, _ in missions for lm in task.landmarks}
        named = Counter(
            " ".join(where[lid].lower().split()) for lid in {x for _, t, _ in missions for x in t.route}
        )
        routed = frozenset(
            where[lid]
            for _, task, _ in missions
            for lid in task.route
            if named[" ".join(where[lid].lower().split())] == 1
        )
        scene = scene_boxes(task for _, task, _ in missions)
        for _, _, m in missions:
            m.routed, m.scene = routed, scene
        # every mission's candidates per type, then, for a type of fixed vocabulary, again with
        # only the labels enough missions can give as answers (so each is the answer about as
        # often as it is offered)
        found: dict[NavTask, list[list[Question]]] = {}
        vocab: dict[NavTask, dict[str, set[str]]] = {}  # per type and stratum, the labels offered
        for kind in asked:
            found[kind] = _fillable(self._candidates(inputs, missions, kind))
            if kind in VOCABULARY:
                vocab[kind] = _vocabularies(found[kind], missions, kind, per_type)
                for level, kept in vocab[kind].items():
                    for _, _, m in missions:
                        m.allowed[(kind, level)] = frozenset(kept)
                found[kind] = self._candidates(inputs, missions, kind)
        log = Asked()  # scene facts and wordings asked so far, across missions and types
        chosen: list[tuple[int, int, Question]] = []  # (mission, index within its type, question)
        # the types with fewest candidates pick first: a fact two types can ask (the goal's
        # nearest landmark) goes to the one with fewer other questions
        for kind in sorted(found, key=lambda k: (sum(map(len, found[k])), NAV_TASKS.index(k))):
            if kind in VOCABULARY:
                picks = self._balanced(inputs, missions, kind, found[kind], vocab[kind], per_type, log)
            else:
                quota = _quotas(found[kind])
                used: Counter[tuple[str, str]] = Counter()
                picks = [
                    (n, q)
                    for n, order in enumerate(found[kind])
                    for q in _pick(n, order, used, quota, log, per_type)
                ]
            made: Counter[int] = Counter()
            for n, q in sorted(picks, key=lambda p: p[0]):
                chosen.append((n, made[n], q))
                made[n] += 1
        chosen.sort(key=lambda c: (c[0], NAV_TASKS.index(c[2].task), c[1]))  # the manifest's order
        chosen = _fill(chosen, np.random.default_rng([inputs.seed, len(missions), 99, inputs.draw]))
        drafts = [
            self._row(inputs, missions[n], k, q, [q.options[0], *q.options[1:]], 0) for n, k, q in chosen
        ]
        over = self.balance(drafts)
        placed: Counter[tuple[str, str]] = Counter()
        for (n, k, q), draft in zip(chosen, drafts, strict=True):
            if draft.sample_id in over:
                continue
            # per type and difficulty, the gold's slot cycles through the options (each type
            # starting elsewhere, so the release's letters balance too): no letter is a habit
            slot = (placed[(q.task, draft.difficulty)] + NAV_TASKS.index(q.task) + inputs.draw) % len(
                q.options
            )
            placed[(q.task, draft.difficulty)] += 1
            rng = np.random.default_rng([inputs.seed, n, NAV_TASKS.index(q.task), k, 1, inputs.draw])
            labels, _ = O.lettered(q.options, slot, LETTERS, rng)
            row = self._row(inputs, missions[n], k, q, [o.label for o in labels], slot)
            out.rows.append(row)
            nav, task, m = missions[n]
            if q.end_frame < m.last:
                out.clips.append(
                    ClipRequest(
                        output_video=row.video_path,
                        frames_prefix=_final(inputs, nav.traj_id),
                        end_frame=q.end_frame,
                        fps=task.fps,
                        width=task.video.width,
                        height=task.video.height,
                        bitrate=bitrate,
                    )
                )
        return out

    def _balanced(
        self,
        inputs: PlanInputs,
        missions: Missions,
        kind: NavTask,
        found: list[list[Question]],
        vocab: dict[str, set[str]],
        per_type: int,
        log: Asked,
    ) -> list[tuple[int, Question]]:
        """A fixed-vocabulary type's rows (:func:`_assign`); a stratum where an offered label
        found no mission offers the labels that did, options drawn again, until every label
        offered is an answer too (or fewer than two are left, and the stratum asks nothing)."""
        while True:
            rng = np.random.default_rng([inputs.seed, len(missions), NAV_TASKS.index(kind), inputs.draw])
            trial = log.copy()
            picks, short = _assign(found, missions, per_type, trial, rng, vocab)
            if not short:
                log.facts, log.wordings = trial.facts, trial.wordings
                return picks
            for level, labels in short.items():
                left = vocab[level] - labels
                vocab[level] = left if len(left) >= fewest_options(kind) else set()
                for _, _, m in missions:
                    m.allowed[(kind, level)] = frozenset(vocab[level])
            found = self._candidates(inputs, missions, kind)

    def _candidates(
        self,
        inputs: PlanInputs,
        missions: Missions,
        kind: NavTask,
    ) -> list[list[Question]]:
        """Each mission's candidates of one type, in a drawn order."""
        out = []
        t = NAV_TASKS.index(kind)
        for n, (_, _, m) in enumerate(missions):
            # one stream per mission and type: the types asked never change another's draw
            rng = np.random.default_rng([inputs.seed, n, t, inputs.draw])
            cands = list(BUILDERS[kind](m, rng))
            out.append([cands[i] for i in rng.permutation(len(cands))])
        return out

    def _row(
        self,
        inputs: PlanInputs,
        mission: tuple[NavigationIndexRow, NavigationTask, Mission],
        k: int,
        q: Question,
        labels: list[str],
        slot: int,
    ) -> NavRow:
        nav, task, _ = mission
        traj_id = nav.traj_id
        options = [Option(option_id=LETTERS[i], label=lab) for i, lab in enumerate(labels)]
        whole = q.end_frame >= task.frame_count - 1
        video = (
            f"{_final(inputs, traj_id)}/{task.video.path}"
            if whole
            else f"video_tasks/clips/{traj_id}/until_{q.end_frame:06d}.mp4"
        )
        user = mcq.user_prompt(q.question, options)
        evidence = {**q.evidence, **({"fact": q.fact} if q.fact else {})}
        return NavRow(
            sample_id=f"{traj_id}_{q.task}_{k}",
            scene_id=inputs.scene_id,
            engine=inputs.engine,
            task=q.task,
            task_display_name=DISPLAY[q.task],
            group=group_of(q.task),
            mission_id=traj_id,
            mission_kind=task.kind,
            instruction=task.instruction,
            video_path=video,
            fps=task.fps,
            clip_end_frame=q.end_frame,
            frame_count=task.frame_count,
            question=q.question,
            options=options,
            answer_option_id=LETTERS[labels.index(q.options[0])],
            answer_label=q.options[0],
            evidence=evidence,
            difficulty=difficulty(q.end_frame, task.fps),
            prompt_text=user,
            user_prompt=user,
            system_prompt=evaluation.SYSTEM,
        )

    def check(self, rows: list[NavRow], rendered: Rendered) -> Checked[NavRow]:
        tasks: dict[str, NavigationTask | None] = {}
        for mission in sorted({r.mission_id for r in rows}):
            key = f"{keys.final_task(rendered.run_id, mission)}/{keys.NAVIGATION_TASK}"
            try:
                tasks[mission] = load_json(NavigationTask, rendered.store.get(key), "navigation task")
            except (BlobNotFound, InvalidInput):
                tasks[mission] = None
        verdict = check_rows(rows, tasks, rendered.store, rendered.run_id)
        return Checked(rows, verdict.reasons)

    def balance(self, rows: list[NavRow]) -> dict[str, str]:
        return mcq.balance(rows, self.difficulty, OVER)

    def item(self, row: NavRow) -> Item:
        """The row as the release sees it. A navigation mission is named by its video, not in
        words: two missions may share an instruction (two flights to one goal) and still ask
        about different videos, so no description stands for the unit. A row whose answer is a
        fact of the scene's geometry carries it as ``fact`` (scene-qualified)."""
        options = tuple((o.option_id, o.label) for o in row.options)
        fact = row.evidence.get("fact")
        return Item(
            row.sample_id,
            row.task,
            row.mission_id,
            row.difficulty,
            "choice",
            row.prompt_text,
            options,
            frozenset([row.answer_option_id]),
            category=row.group,
            family=self.name,
            texts=tuple(label for _, label in options),
            fact=f"{row.scene_id}:{fact}" if isinstance(fact, str) and fact else "",
        )

    def exports(self, rows: list[NavRow]) -> dict[str, bytes]:
        return {"navigation_urbanvideo": urbanvideo_table(rows)}

    def difficulty(self, row: NavRow) -> str:
        return row.difficulty

    def prompts(self, row: NavRow) -> tuple[str, str]:
        return row.system_prompt, row.user_prompt

    def media(self, row: NavRow) -> list[MediaRef]:
        return evaluation.media(row)

    def marks(self, row: NavRow) -> list[Mark]:
        return []

    def steps(self, row: NavRow) -> list[ReasoningStep]:
        return []

    def parse(self, row: NavRow, text: str) -> Parsed:
        return mcq.parse(row, text)

    def score(self, row: NavRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        return mcq.score(row, parsed)

    def rotations(self, row: NavRow) -> list[NavRow]:
        return mcq.rotations(row)

    def with_steps(self, row: NavRow) -> NavRow | None:
        return None

    def guess(self, row: NavRow, rng: np.random.Generator) -> dict[str, Any]:
        return mcq.guess(row, rng)

    def prior(self, row: NavRow, rows: Sequence[NavRow]) -> dict[str, Any]:
        return evaluation.prior(row, rows)

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| navigation rows (UrbanVideo-Bench style) | {funnel.family_rows.get(self.name, 0)} |"],
            drops=[],
            files=[
                (
                    "navigation_qa",
                    f"- `{rel['navigation_qa']}`: navigation rows, 16 UrbanVideo-Bench question types "
                    "over the\n  navigation missions' videos (or their cuts at the question's moment, under "
                    "`video_tasks/clips/`);\n  `evidence` holds what each answer was derived from.",
                ),
                (
                    "navigation_urbanvideo",
                    f"- `{rel['navigation_urbanvideo']}`: the same rows as UrbanVideo-Bench's table "
                    "(`Question_id`, `video_id`,\n  `question_category`, `question` with its choices, "
                    "`answer`).",
                ),
            ],
            # continues the media paragraph's last line
            notes=NOTES,
        )


NOTES = """ Navigation rows name every moment they ask about by the move
made there ("right after it climbed to get above the red brick hall"), or, for Causal, by the
move's action and count ("the first time it flew upward"), never by a time, and have
UrbanVideo-Bench's number of options per task (five; three for Proximity, Duration and
Counterfactual; the source's seven actions for Action Generation; Progress Evaluation every step
of the quoted route); QC refuses a row otherwise. Causal reasons, Sequence Recall moves, caption
landmarks and the landmarks Scene Recall, Start/End Position and Association offer are drawn
over the release, so each is offered about as often as the option count times it is right;
options naming a landmark of the instruction are drawn first, and no row has the gold as the
only option naming one (QC refuses it). A landmark option is wrong for every landmark the
missions record under its words: out of the camera's view during the move (Scene Recall; QC
counts its pixels in the segmentation frames), clearly farther from where the drone set off
(Start/End) or from the goal (Association). Where the drone stopped is the instruction's goal,
so Start/End Position says it and asks where the flight set off. Source elements not built
here: free- text options written per question by a model and refined by people (options here
are geometric sentences, landmarks and fixed vocabularies); Object and Scene Recall over urban
objects other than the scene's landmarks (the navigation task records landmarks only: no cars,
signs or trees), and Scene Recall options listing several objects each; text on shop signs
(real footage); a hover as an Action Generation answer (not among the source's seven actions);
Progress Evaluation steps that are not the quoted route's (they would be ruled out without
looking); the source's blind filtering by several Video-LLMs (here a balanced design and the
release's no-pixel gate). Causal and Trajectory Captioning are asked of route missions only (a
goal mission's every move is about the goal its instruction names, and its one-leg caption
names nothing else); a leg around a structure without a label is captioned by its turn and
where it led. Association is asked only where five landmarks can be offered each as often as
the option count times it is right (a scene of few distinct landmark descriptions may have
none)."""


def _final(inputs: PlanInputs, traj_id: str) -> str:
    return inputs.rel(keys.final_task(inputs.run_id, traj_id))


Missions = list[tuple[NavigationIndexRow, NavigationTask, Mission]]


def _level(q: Question, missions: Missions, n: int) -> str:
    return missions[n][2].stratum(q.task, q.end_frame, q.stratum)


def _vocabularies(
    found: list[list[Question]], missions: Missions, kind: NavTask, per_type: int
) -> dict[str, set[str]]:
    """Per stratum (:meth:`Mission.stratum`), the labels of a fixed vocabulary to offer: the
    ``j`` that most missions can give as answers, ``j`` making the most rows that balance over
    them (``j`` times the fewest missions offering one, at most the rows the missions can
    have; where a row offers every label, :data:`OPTIONS` 0, weighed by what a guesser gets
    wrong), :func:`fewest_options` at least (a stratum with fewer asks nothing). A label few
    missions can answer with would otherwise be offered everywhere and seldom be right (ruled
    out without looking, as would one answering only in some stratum). Decided from every
    mission's candidates together, never from a row's gold."""
    out, labels, options = {}, VOCABULARY[kind], OPTIONS[kind]
    for level in sorted({_level(q, missions, n) for n, order in enumerate(found) for q in order}):
        offered = Counter(
            key
            for n, order in enumerate(found)
            for key in {q.key for q in order if _level(q, missions, n) == level}
        )
        ranked = sorted(labels, key=lambda x: (-offered[x], labels.index(x)))
        most = sum(1 for n, order in enumerate(found) if any(_level(q, missions, n) == level for q in order))
        most *= per_type
        best, size = len(ranked), -1.0
        # at least the type's options (the source's count): fewer would leave rows short
        for j in range(fewest_options(kind), len(ranked) + 1):
            rows = float(min(most, j * offered[ranked[j - 1]] * per_type))
            # what a guesser gets wrong: a row offering every label (options 0) is worth more
            # the more labels it offers (two steps of a route are a coin toss)
            value = rows * (1 - 1 / (options or j))
            if value >= size:  # ties: more labels, a lower chance level
                best, size = j, value
        out[level] = set(ranked[:best])
    return out


def _assign(
    found: list[list[Question]],
    missions: Missions,
    per_type: int,
    asked: Asked,
    rng: np.random.Generator,
    vocab: Mapping[str, set[str]],
) -> tuple[list[tuple[int, Question]], dict[str, set[str]]]:
    """The rows of a fixed-vocabulary type: per stratum, the offered labels take turns, the
    one with fewest rows next, each with the mission (of those with room: ``per_type`` rows
    each) that offers fewest other labels, a scene fact never twice; once a label finds no
    mission, the others stop one row ahead of it. So no label is the answer more than once
    more often than another of its stratum; a stratum where an offered label finds no mission
    is not asked (the label would be offered and never right). Ties go by a seeded draw:
    missions alike (two flights to one goal, quoting one instruction) get their labels in no
    fixed pattern."""
    room = Counter({n: per_type for n in range(len(found))})
    lot = {n: float(x) for n, x in enumerate(rng.random(len(found)))}
    picks: list[tuple[int, Question]] = []
    short: dict[str, set[str]] = {}  # per stratum, the offered labels no mission could answer with
    by_level: dict[str, dict[str, dict[int, list[Question]]]] = {}
    for n, order in enumerate(found):
        for q in order:
            by_level.setdefault(_level(q, missions, n), {}).setdefault(q.key, {}).setdefault(n, []).append(q)
    # the strata fewest missions can answer in first: the others have missions to spare
    for level in sorted(by_level, key=lambda x: (len({n for by in by_level[x].values() for n in by}), x)):
        offers = by_level[level]
        width = {n: sum(n in by for by in offers.values()) for n in range(len(found))}
        got: Counter[str] = Counter({key: 0 for key in sorted(vocab.get(level, set(offers)))})
        rank = {key: float(rng.random()) for key in sorted(got)}
        mine: list[tuple[int, Question]] = []
        done: set[str] = set()  # labels no mission left can answer
        while True:
            least = min(got.values())
            # round robin: the label with fewest rows next (a drawn order on ties), never more
            # than one row ahead of the fewest
            open_ = [k for k in offers if k not in done and got[k] <= least]
            if not open_:
                break
            key = min(open_, key=lambda k: (got[k], rank[k]))
            taken = None
            for n in sorted(offers.get(key, {}), key=lambda n: (width[n], lot[n])):
                first = next((q for q in offers[key][n] if asked.free(n, q)), None)
                if room[n] > 0 and first is not None:
                    taken = (n, first)
                    break
            if taken is None:
                done.add(key)
                continue
            n, q = taken
            room[n] -= 1
            got[key] += 1
            mine.append((n, q))
            asked.add(n, q)
        if min(got.values()) == 0:  # a label offered but never the answer: the stratum is not asked
            short[level] = {k for k, v in got.items() if not v}
            for n, q in mine:
                room[n] += 1
                asked.remove(n, q)
            continue
        picks += mine
    return picks, short


def _fillable(found: list[list[Question]]) -> list[list[Question]]:
    """The candidates of a type whose options are drawn over the release (:attr:`Question.pool`)
    that could have their option count from the golds of the candidates kept, and one naming a
    landmark of the instruction (:func:`lone_hint`) another option that does (the others would
    be asked and then dropped by :func:`_fill`): dropped until none is left short."""
    while True:
        golds: dict[str, set[str]] = {}
        for order in found:
            for q in order:
                if q.pool:
                    golds.setdefault(q.pool, set()).add(q.options[0])

        def enough(q: Question, golds: dict[str, set[str]] = golds) -> bool:
            free = golds[q.pool] - q.barred - {q.options[0]}
            free = free if q.within is None else free & q.within
            # a gold naming a landmark of the instruction needs another option that does
            hinted = not mentions(q.options[0], q.instructed) or any(mentions(x, q.instructed) for x in free)
            return len(free) >= OPTIONS[q.task] - 1 and hinted

        kept = [[q for q in order if not q.pool or enough(q)] for order in found]
        if kept == found:
            return found
        found = kept


def _fill(
    chosen: list[tuple[int, int, Question]], rng: np.random.Generator
) -> list[tuple[int, int, Question]]:
    """The distractors of the rows whose options are drawn over the release
    (:attr:`Question.pool`): per pool, the texts are the golds of its rows, and each row takes
    the ones offered least so far against the option count times their golds (ties by a drawn
    order) that make a set alike in form (:func:`alike`), none barred for it. So across the release a text is
    offered about ``k`` times as often as it is the answer: no text is ruled out (never right)
    or picked (often right) without looking. A row that cannot have ``k`` options is left out,
    and the pool drawn again without its gold, until every row has them."""
    rows = list(chosen)
    while True:
        golds: dict[str, Counter[str]] = {}
        for _, _, q in rows:
            if q.pool:
                golds.setdefault(q.pool, Counter())[q.options[0]] += 1
        offered = {pool: Counter(g) for pool, g in golds.items()}
        out, short, kept = [], False, set()
        for n, j, q in rows:
            if not q.pool:
                out.append((n, j, q))
                continue
            k, gold, mine = OPTIONS[q.task], q.options[0], golds[q.pool]
            lot = {x: float(rng.random()) for x in sorted(mine)}
            # texts naming a landmark of the mission's instruction first (the row is released
            # beside it: they must not single the gold out), then the mission's own (:attr:`first`)
            cands = sorted(
                (x for x in mine if x != gold and x not in q.barred and (q.within is None or x in q.within)),
                key=lambda x: (
                    not mentions(x, q.instructed),
                    x not in q.first,
                    offered[q.pool][x] - k * mine[x],
                    lot[x],
                ),
            )
            # the first alike set, the texts most owed an offer first (sets differ late), where
            # the gold is not the only option naming a landmark of the instruction
            picked = next(
                (
                    [gold, *c]
                    for c in combinations(cands[: k + 6], k - 1)
                    if alike(q.question, [gold, *c]) and not lone_hint([gold, *c], gold, q.instructed)
                ),
                None,
            )
            if picked is None:
                short = True
                continue
            offered[q.pool].update(picked[1:])
            kept.add((n, j, q.task))
            out.append((n, j, replace(q, options=tuple(picked))))
        if not short:
            return out
        rows = [r for r in rows if not r[2].pool or (r[0], r[1], r[2].task) in kept]


class Asked:
    """What a plan has asked so far: scene facts (each once) and wordings (each by one mission;
    see :attr:`Question.wording`)."""

    def __init__(self) -> None:
        self.facts: set[str] = set()
        self.wordings: dict[str, tuple[int, int]] = {}  # wording -> (its mission, rows)

    def free(self, n: int, q: Question) -> bool:
        """Whether mission ``n`` may ask ``q``."""
        owner = self.wordings.get(q.wording, (n, 0))[0] if q.wording else n
        return (not q.fact or q.fact not in self.facts) and owner == n

    def add(self, n: int, q: Question) -> None:
        if q.fact:
            self.facts.add(q.fact)
        if q.wording:
            self.wordings[q.wording] = (n, self.wordings.get(q.wording, (n, 0))[1] + 1)

    def copy(self) -> Asked:
        out = Asked()
        out.facts, out.wordings = set(self.facts), dict(self.wordings)
        return out

    def remove(self, n: int, q: Question) -> None:
        self.facts.discard(q.fact)
        if q.wording in self.wordings:
            rows = self.wordings[q.wording][1] - 1
            if rows:
                self.wordings[q.wording] = (n, rows)
            else:
                del self.wordings[q.wording]


def _quotas(found: list[list[Question]]) -> dict[str, int]:
    """Per wording stratum, how many rows each answer may have: the fewest missions offering
    any one of the stratum's answers (a stratum offering one answer only is not asked)."""
    offered: dict[str, Counter[str]] = {}
    answers: dict[str, set[str]] = {}
    for order in found:
        for q in order:
            if q.stratum:
                answers.setdefault(q.stratum, set()).update(q.options)
        for stratum, key in {(q.stratum, q.key) for q in order if q.stratum}:
            offered.setdefault(stratum, Counter())[key] += 1
    return {s: min(offered[s].get(a, 0) for a in answers[s]) for s in offered}


def _pick(
    n: int,
    found: list[Question],
    used: Counter[tuple[str, str]],
    quota: dict[str, int],
    asked: Asked,
    per_type: int,
) -> list[Question]:
    """Up to ``per_type`` of one mission's candidates (in their drawn order): the gold class the
    type has least of first, no fact asked before, no stratum's answer beyond its quota."""
    picked: list[Question] = []
    for _ in range(per_type):
        left = [
            q
            for q in found
            if q not in picked
            and asked.free(n, q)
            and (not q.stratum or used[(q.stratum, q.key)] < quota.get(q.stratum, 0))
        ]
        if not left:
            break
        q = min(left, key=lambda c: used[(c.stratum, c.key)])  # stable: ties keep the drawn order
        used[(q.stratum, q.key)] += 1
        asked.add(n, q)
        picked.append(q)
    return picked


FAMILY = UrbanVideo()
