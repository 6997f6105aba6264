"""UAV-DualCog's video family: 2 rows per completed mission, 2 missions per landmark (flight
behavior recognition with temporal localization; landmark visibility counting with intervals).

A landmark one of whose missions never shows it (the renderer counted no sighting) is not
asked about: that mission failed, and its unit needs the rows of both missions. A visibility
row whose video also shows another reviewed landmark of its description (:mod:`..twins`) fails
its check, which costs the landmark its video rows (a person could count either). The mission
planner re-plans a mission whose camera would never frame its landmark before it is rendered
(``services.mission_planner.camera_plan``); after the render nothing is planned again (the QA
stage reads rendered media only), so the failed missions are listed in
``video_tasks/failed_missions.json`` and their landmarks counted on the card. Released
visibility counts are evened out per mission kind over the counts every kind shows
(:func:`.balance.count_surplus`), so neither the most frequent count nor the median of the
other rows answers one. A landmark's 4 rows are released together or not at all (the source's
4 per landmark): a row left out by the balance, the sighting-rule margin or the blind gate
takes its landmark's other video rows along (``Item.together``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from skyqa import keys
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance, load_json
from skyqa.contracts.missions import (
    ComposedSegments,
    ConstraintReport,
    FailedMissions,
    MissionIndexRow,
    TaskData,
)
from skyqa.contracts.qa import Funnel, ReasoningStep, VideoRow
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families.base import (
    TOGETHER,
    CardPart,
    Checked,
    Item,
    Mark,
    MediaRef,
    PlanInputs,
    Planned,
    Rendered,
)
from skyqa.families.dualcog_video import evaluation
from skyqa.families.dualcog_video.balance import ONE_COUNT, OUTSIDE, SURPLUS, count_surplus
from skyqa.families.dualcog_video.checks import NEVER_SEEN, check_video_rows, pixel_shares
from skyqa.families.dualcog_video.export import dualcog_manifest
from skyqa.families.dualcog_video.tasks import joint_row, visibility_row
from skyqa.families.twins import twins
from skyqa.families.views import reference_overlay
from skyqa.media_policy import Frames, MediaPolicy
from skyqa.vocab.behaviors import element_label, load_library

AMBIGUOUS = "visible count within the margin of the sighting rule"
NOT_SEEN = "a mission never shows the landmark (visible count 0): the mission failed"
FAILED_FILE = "video_tasks/failed_missions.json"  # under the run: mission id -> its landmark


class DualCogVideo:
    name = "dualcog_video"
    noun = "video"
    # UAV-DualCog sends the released 10 FPS MP4 itself and the reference image as stored: every
    # frame at the video's rate, the frame cap spreading a longer mission evenly
    media_policy = MediaPolicy(
        frames=Frames(fps=10.0),
        source="UAV-DualCog video tasks: the 10 FPS video whole, the reference image as stored",
    )
    manifest = "video_qa"
    files: Mapping[str, str] = MappingProxyType(
        {
            "video_qa": "video_tasks/manifests/{scene}.video_qa.jsonl",
            # UAV-DualCog's Stage 3 names: the latest manifest, and one its listing finds
            "video_dualcog_latest": "video_tasks/datasets/{scene}.latest_manifest.json",
            "video_dualcog_listed": "video_tasks/datasets/{scene}_release.json",
        }
    )
    row_model = VideoRow
    unit_kind = "landmark"
    unit_rows: int | None = 4
    rows_field: str | None = "video_rows"
    funnel: Mapping[str, str] = MappingProxyType(
        {
            AMBIGUOUS: "count_margin_dropped",
            # a unit's reasons (the plan's, the QC's): they count landmarks
            NOT_SEEN: "failed_mission_landmarks",
            NEVER_SEEN: "failed_mission_landmarks",
            TOGETHER: "video_share_dropped",
            SURPLUS: "count_balance_dropped",
            OUTSIDE: "count_balance_dropped",
            ONE_COUNT: "count_balance_dropped",
        }
    )

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}  # its rows need only the landmark's missions, which are planned after the review

    def plan(self, inputs: PlanInputs) -> Planned[VideoRow]:
        store, run_id = inputs.store, inputs.run_id
        lib = load_library()
        by_id = {v.instance_id: v for v in inputs.landmarks}
        composed_all = {
            m.traj_id: load_json(
                ComposedSegments, store.get(keys.mission_file(run_id, m.traj_id, keys.COMPOSED_SEGMENTS))
            )
            for m in inputs.missions.missions
        }
        universe = sorted(
            {
                element_label(s.element_class, s.mode_key, s.params)
                for c in composed_all.values()
                for s in c.segments
            }
        )
        out = Planned[VideoRow](rows=[])
        tasks = {
            m.traj_id: load_json(TaskData, store.get(m.task_data), "task data")
            for m in inputs.missions.missions
        }
        failed = failed_missions(inputs.missions.missions, tasks)
        out.skipped.update(dict.fromkeys(sorted(set(failed.values())), NOT_SEEN))
        listed = FailedMissions(reason=NOT_SEEN, missions=failed)
        out.files[FAILED_FILE] = json.dumps(listed.model_dump(), indent=2).encode()
        for n, m in enumerate(inputs.missions.missions):
            if m.instance_id not in by_id or m.instance_id in inputs.excluded or m.instance_id in out.skipped:
                continue
            vi = by_id[m.instance_id]
            composed = composed_all[m.traj_id]
            task = tasks[m.traj_id]
            report = load_json(
                ConstraintReport,
                store.get(keys.mission_file(run_id, m.traj_id, keys.CONSTRAINT_REPORT)),
                "constraint report",
            )
            track = task.task_tracks.self_state_awareness
            main = next((v for v in vi.rgb_views if v.view_id == vi.main_view), vi.rgb_views[0])
            ref = reference_overlay(vi.instance_id, main, inputs.rel(main.path))
            out.overlays.append(ref)
            common: dict[str, object] = {
                "scene_id": inputs.scene_id,
                "engine": inputs.engine,
                "mission_id": m.traj_id,
                "mission_kind": composed.mission_kind,
                "set_id": composed.task_subtype,
                "set_name": composed.task_type,
                "landmark_id": vi.instance_id,
                "landmark_category": vi.landmark_category or vi.class_name,
                "landmark_description": vi.landmark_description or vi.class_name,
                "reference_image_with_bbox": ref.output_image,
                "reference_bbox_xyxy_norm": ref.bbox_xyxy_norm,
                "video_path": inputs.rel(m.video),
                "fps": task.video.fps,
                "frame_count": task.video.frame_count,
                "duration_sec": task.video.duration_sec,
                "video_width": task.video.width,
                "video_height": task.video.height,
                "set_class": composed.set_class,
                "set_instance": composed.set_instance,
                "element_instances": composed.element_instances,
                "element_sequence": [e.element_class for e in composed.element_instances],
                "mode_sequence": composed.mode_sequence,
                "event_sequence": composed.event_sequence,
                "low_level_sequence": composed.behavior_sequence,
                "flight_description": report.flight_description,
                "keyframe_gt_dense": task.target_presence.keyframe_gt_dense,
                "self_state_keyframe_gt_dense": track.keyframe_gt_dense,
            }
            rng = np.random.default_rng(inputs.seed + n * 1009 + 29)
            mine = {element_label(s.element_class, s.mode_key, s.params) for s in composed.segments}
            others = [u for u in universe if u not in mine]
            others = [others[k] for k in rng.permutation(len(others))]
            out.rows.append(joint_row(lib, composed, task, others, common, rng))
            out.rows.append(visibility_row(composed, task, common))
            out.missions[m.traj_id] = vi.instance_id
        return out

    def check(self, rows: list[VideoRow], rendered: Rendered) -> Checked[VideoRow]:
        of = twins(rendered.landmarks.values())
        shares = {
            r.mission_id: pixel_shares(
                rendered.store,
                rendered.run_id,
                r.mission_id,
                r.frame_count,
                _rendered_instance(rendered, r.mission_id),
                of.get(r.landmark_id, frozenset()),
            )
            for r in rows
            if r.form == "env_visibility_reasoning"
        }
        verdict, ambiguous = check_video_rows(rows, shares)
        return Checked(rows, verdict.reasons, {s: AMBIGUOUS for s in ambiguous.reasons})

    def balance(self, rows: list[VideoRow]) -> dict[str, str]:
        counts: list[tuple[str, str, str, int]] = [
            (r.sample_id, r.landmark_id, r.mission_kind, _visible_count(r))
            for r in rows
            if r.form == "env_visibility_reasoning"
        ]
        return count_surplus(counts)

    def item(self, row: VideoRow) -> Item:
        options = tuple((o.option_id, o.label) for o in row.choice_options)  # none for counts
        if row.form == "env_visibility_reasoning":
            kind, gold = "count", frozenset([str(row.gold_environment_answer.get("visible_count", ""))])
        else:
            kind, gold = "multi", frozenset(row.answer_option_ids)
        return Item(
            row.sample_id,
            row.form,
            row.landmark_id,
            row.mission_kind,
            kind,
            row.prompt_text,
            options,
            gold,
            # no description: the reference image's box marks the landmark, and a row whose media
            # show another of its description fails its check (skyqa.families.twins)
            category=row.landmark_category,
            family=self.name,
            texts=tuple(label for _, label in options),
            # a landmark's 4 rows are UAV-DualCog's unit: a row left out takes the others along
            together=f"{self.name}:{row.landmark_id}",
        )

    def exports(self, rows: list[VideoRow]) -> dict[str, bytes]:
        manifest = dualcog_manifest(rows)
        return {"video_dualcog_latest": manifest, "video_dualcog_listed": manifest}

    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType(
        {evaluation.JOINT: evaluation.JOINT_METRICS, evaluation.VISIBILITY: evaluation.VISIBILITY_METRICS}
    )
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType({})

    def difficulty(self, row: VideoRow) -> str:
        return row.difficulty_band

    def prompts(self, row: VideoRow) -> tuple[str, str]:
        return row.system_prompt, row.user_prompt

    def media(self, row: VideoRow) -> list[MediaRef]:
        return evaluation.media(row)

    def marks(self, row: VideoRow) -> list[Mark]:
        return []

    def steps(self, row: VideoRow) -> list[ReasoningStep]:
        return []

    def parse(self, row: VideoRow, text: str) -> Parsed:
        return evaluation.parse(row, text)

    def score(self, row: VideoRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        return evaluation.score(row, parsed)

    def rotations(self, row: VideoRow) -> list[VideoRow]:
        return []  # a multi-select answer set with intervals has no single gold letter to move

    def with_steps(self, row: VideoRow) -> VideoRow | None:
        return None

    def guess(self, row: VideoRow, rng: np.random.Generator) -> dict[str, Any]:
        return evaluation.guess(row, rng)

    def prior(self, row: VideoRow, rows: Sequence[VideoRow]) -> dict[str, Any]:
        return evaluation.prior(row, rows)

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| video rows (4 per released landmark, or none of them) | {funnel.video_rows} |"],
            drops=[
                "| visibility rows of an over-represented count, or of a count not every mission "
                "kind shows (dropped) | "
                f"{funnel.count_balance_dropped} |",
                "| visibility rows whose count changes within the sighting rule's margin (dropped) | "
                f"{funnel.count_margin_dropped} |",
                "| video rows left out with another video row of their landmark (a landmark's 4 "
                f"rows are released together) | {funnel.video_share_dropped} |",
                "| landmarks one of whose missions never shows them (the mission failed after its "
                f"render; none of their rows asked) | {funnel.failed_mission_landmarks} |",
            ],
            files=[
                (
                    "video_qa",
                    f"- `{rel['video_qa']}`: video rows: Flight Behavior Recognition and Temporal "
                    "Localization\n  (`answers[].intervals_sec`) and Landmark Visibility Counting and "
                    "Interval Reasoning\n  (`visible_count`, `visible_intervals_sec`).",
                ),
                (
                    "video_dualcog_latest",
                    f"- `{rel['video_dualcog_latest']}` (and `{rel['video_dualcog_listed']}`): the video "
                    "rows as\n  UAV-DualCog's Stage 3 manifest (intervals as `{start_sec, end_sec}` "
                    "objects); `skyqa_conventions`\n  says where a row deliberately differs from it.",
                ),
                (
                    "failed_missions",
                    f"- `{FAILED_FILE}`: the missions whose video never shows their landmark\n"
                    "  (mission id -> landmark); those landmarks are not asked about.",
                ),
            ],
        )


def failed_missions(missions: Sequence[MissionIndexRow], tasks: Mapping[str, TaskData]) -> dict[str, str]:
    """The missions that never show their landmark (no sighting in the renderer's count), each
    with its landmark: the mission failed, and the landmark's unit needs the rows of both of its
    missions, so the landmark is not asked about at all (QC re-derives the count and refuses a
    gold of 0 too)."""
    return {
        m.traj_id: m.instance_id
        for m in missions
        if tasks[m.traj_id].task_tracks.environmental_awareness.visible_count < 1
    }


def _visible_count(row: VideoRow) -> int:
    """A visibility row's gold count (the answer's other entry is its intervals)."""
    count = row.gold_environment_answer.get("visible_count", 0)
    assert isinstance(count, int), row.sample_id
    return count


def _rendered_instance(rendered: Rendered, mission_id: str) -> int | None:
    """The instance id the mission's segmentation frames label the landmark with."""
    key = keys.mission_file(rendered.run_id, mission_id, keys.COMPOSED_SEGMENTS)
    try:
        return load_json(ComposedSegments, rendered.store.get(key)).rendered_instance_id
    except (BlobNotFound, InvalidInput):
        return None


FAMILY = DualCogVideo()
