"""UrbanVideo-Bench-style navigation questions: 16 types over the run's navigation missions,
each answered from recorded geometry (see :mod:`skyqa.families.urbanvideo.questions`).

Per mission and type the family keeps the scan's ``navigation.per_type`` questions (of the
``navigation.types`` asked, all 16 unless listed), choosing among the candidates
the ones whose gold answer the release has least of so far (so no answer of a type dominates:
what a text-only solver would exploit). Options are shuffled onto letters by a seeded draw. A
question asked "now" shows the mission video cut at that frame (a clip the QA stage encodes
from the mission's frames). Rows release one by one: a failed row costs only itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from skyqa import keys
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance, load_json
from skyqa.contracts.navigation import NavigationTask
from skyqa.contracts.qa import ClipRequest, Funnel, Option, ReasoningStep
from skyqa.contracts.urbanvideo import DISPLAY, GROUPS, NAV_TASKS, NavRow, group_of
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import mcq
from skyqa.families.base import CardPart, Checked, Item, Mark, MediaRef, PlanInputs, Planned, Rendered
from skyqa.families.urbanvideo import evaluation
from skyqa.families.urbanvideo.checks import check_rows
from skyqa.families.urbanvideo.export import urbanvideo_table
from skyqa.families.urbanvideo.questions import BUILDERS, Mission, Question

LETTERS = "ABCDEFGH"
OVER = "navigation answer over-represented"


class UrbanVideo:
    name = "urbanvideo_nav"
    noun = "navigation"
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
        out = Planned[NavRow](rows=[])
        used: Counter[tuple[str, str]] = Counter()
        # per type, the gold's letter cycles through the options (each type starting elsewhere,
        # so the release's letters balance too): no letter is a type's habit
        placed: Counter[str] = Counter()
        bitrate = int(inputs.scan.video.bitrate) or 2_000_000
        settings = inputs.scan.navigation
        per_type = settings.per_type if settings.HasField("per_type") else 1
        asked = [t for t in NAV_TASKS if not settings.types or t in settings.types]
        for n, nav in enumerate(inputs.missions.navigation):
            task = load_json(NavigationTask, inputs.store.get(nav.task), "navigation task")
            m = Mission(task)
            final = inputs.rel(keys.final_task(inputs.run_id, nav.traj_id))
            for t, kind in enumerate(NAV_TASKS):
                if kind not in asked:
                    continue
                # one stream per mission and type: the types asked never change another's draw
                rng = np.random.default_rng([inputs.seed, n, t])
                found = list(BUILDERS[kind](m))
                order = [found[i] for i in rng.permutation(len(found))]
                for k, q in enumerate(self._pick(order, used, per_type)):
                    slot = (placed[kind] + NAV_TASKS.index(kind)) % len(q.options)
                    placed[kind] += 1
                    row = self._row(
                        inputs, f"{nav.traj_id}_{kind}_{k}", nav.traj_id, task, q, rng, final, slot
                    )
                    out.rows.append(row)
                    if q.end_frame < m.last:
                        out.clips.append(
                            ClipRequest(
                                output_video=row.video_path,
                                frames_prefix=final,
                                end_frame=q.end_frame,
                                fps=task.fps,
                                width=task.video.width,
                                height=task.video.height,
                                bitrate=bitrate,
                            )
                        )
            out.missions[nav.traj_id] = nav.traj_id
        return out

    def _pick(self, found: list[Question], used: Counter[tuple[str, str]], per_type: int) -> list[Question]:
        picked: list[Question] = []
        for _ in range(per_type):
            left = [q for q in found if q not in picked]
            if not left:
                break
            q = min(left, key=lambda c: used[(c.task, c.key)])  # stable: ties keep the drawn order
            used[(q.task, q.key)] += 1
            picked.append(q)
        return picked

    def _row(
        self,
        inputs: PlanInputs,
        sample_id: str,
        traj_id: str,
        task: NavigationTask,
        q: Question,
        rng: np.random.Generator,
        final: str,
        slot: int,
    ) -> NavRow:
        others = [q.options[1:][i] for i in rng.permutation(len(q.options) - 1)]
        labels = [*others[:slot], q.options[0], *others[slot:]]
        options = [Option(option_id=LETTERS[k], label=lab) for k, lab in enumerate(labels)]
        answer = LETTERS[labels.index(q.options[0])]
        whole = q.end_frame >= task.frame_count - 1
        video = (
            f"{final}/{task.video.path}"
            if whole
            else f"video_tasks/clips/{traj_id}/until_{q.end_frame:06d}.mp4"
        )
        user = mcq.user_prompt(q.question, options)
        seconds = (q.end_frame + 1) / task.fps
        return NavRow(
            sample_id=sample_id,
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
            answer_option_id=answer,
            answer_label=q.options[0],
            evidence=q.evidence,
            difficulty="easy" if seconds < 20 else "medium" if seconds < 45 else "hard",
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
        options = tuple((o.option_id, o.label) for o in row.options)
        return Item(
            row.sample_id,
            row.task,
            row.mission_id,
            row.difficulty,
            "choice",
            row.prompt_text,
            options,
            frozenset([row.answer_option_id]),
            description=row.instruction,
            category=row.group,
            family=self.name,
            texts=tuple(label for _, label in options),
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
        )


FAMILY = UrbanVideo()
