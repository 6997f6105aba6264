"""Reasoning-Structured Videos: action trajectories that are exact instances of Inverse, Loop and
Equivalence, released in the card's layout for world-model evaluation.

The mission planner builds and places the trajectories and the renderer moves the body through
the scene (:mod:`skyqa.actions`); here each is validated on two layers (:mod:`.validate`), a
relation that fails going to ``random_walk/`` with the reason, and released as
``<split>/run_<ts>__traj_<id>.mp4`` with its ``_meta.json`` (:mod:`.meta`), the lossless frames
the relations name under ``<split>/keyframes/``, and an index ``datasets`` loads. Its rows ask no
question: the blind gate does not see them, and its own gate (:mod:`.checks`) drops relations a
copy of the first frame or a commuting shortcut already satisfies. Rows release one by one,
except that an equivalence pair releases both halves or neither.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from skyqa import keys
from skyqa.contracts import ValidInstance, load_json
from skyqa.contracts.qa import Funnel
from skyqa.contracts.rsv import RANDOM_WALK, SPLITS, Execution, TrajectoryPlan, TrajectoryRow
from skyqa.errors import BlobNotFound, InvalidInput, InvalidKey
from skyqa.families.base import CardPart, Checked, Item, Mark, MediaRef, PlanInputs, Planned, Rendered, Stored
from skyqa.families.reasoning.checks import check_row
from skyqa.families.reasoning.export import index_parquet
from skyqa.families.reasoning.layout import FOLDER, META, layout, meta_path, video_path
from skyqa.families.reasoning.meta import card_meta
from skyqa.families.reasoning.validate import Layers, validate

if TYPE_CHECKING:
    from skyqa.blob import BlobStore

METRICS = ("gt_psnr", "gt_ssim", "sc_psnr", "sc_ssim")


def kind_of(split: str) -> str:
    return split.split("_")[0] if split != RANDOM_WALK else RANDOM_WALK


def stem_of(run_id: str, plan: TrajectoryPlan, split: str) -> str:
    if plan.role and split != RANDOM_WALK:
        pid = plan.number if plan.role == "path_A" else plan.partner_number
        return f"run_{run_id}__pair_{pid}_{plan.role[-1]}_traj_{plan.number}"
    return f"run_{run_id}__traj_{plan.number}"


class ReasoningVideos:
    name = "reasoning_videos"
    noun = "action trajectory"
    manifest = "reasoning_trajectories"
    files: Mapping[str, str] = MappingProxyType(
        {
            "reasoning_trajectories": f"{FOLDER}/trajectories.jsonl",
            "reasoning_index": f"{FOLDER}/index.parquet",
            "reasoning_layout": FOLDER,
        }
    )
    row_model = TrajectoryRow
    unit_kind = "trajectory"
    unit_rows: int | None = None
    rows_field: str | None = None
    funnel: Mapping[str, str] = MappingProxyType({})
    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({s: METRICS for s in (*SPLITS, RANDOM_WALK)})

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {}  # its units are action trajectories, not landmarks

    def plan(self, inputs: PlanInputs) -> Planned[TrajectoryRow]:
        out = Planned[TrajectoryRow](rows=[])
        store, run = inputs.store, inputs.run_id
        plans = {
            e.traj_id: load_json(TrajectoryPlan, store.get(e.plan), "trajectory plan")
            for e in inputs.missions.trajectories
        }
        records = {e.traj_id: _record(store, e.execution) for e in inputs.missions.trajectories}
        checked = {}
        for traj_id, plan in plans.items():
            record = records[traj_id]
            why = "the renderer's execution record is missing or unreadable" if record is None else None
            why = why or (record_mismatch(plan, record) if record is not None else None)
            if why:
                out.skipped[traj_id] = why
                records[traj_id] = None
                continue
            assert record is not None
            partner = records.get(plan.partner) if plan.partner else None
            frames = _kept(store, run, traj_id, record)
            if partner is not None:
                frames |= {
                    (True, f): data for (_, f), data in _kept(store, run, plan.partner, partner).items()
                }
            checked[traj_id] = validate(record, partner, plan.identities, plan.space, frames)
        for traj_id, plan in plans.items():
            layers = checked.get(traj_id)
            record = records[traj_id]
            if layers is None or record is None:
                continue
            failure = layers.failure
            if plan.partner and not failure:
                other = checked.get(plan.partner)
                if other is None or other.failure:
                    failure = "its paired path failed validation"
            split = RANDOM_WALK if failure or plan.split == RANDOM_WALK else plan.split
            row = self._row(inputs, plan, record, split, failure, layers)
            store.put(
                f"{keys.final_task(run, traj_id)}/{META}", card_meta(row, plan, record), "application/json"
            )
            out.rows.append(row)
            out.missions[traj_id] = row.pair_id or traj_id
        return out

    def _row(
        self,
        inputs: PlanInputs,
        plan: TrajectoryPlan,
        record: Execution,
        split: str,
        failure: str,
        layers: Layers,
    ) -> TrajectoryRow:
        stem = stem_of(inputs.run_id, plan, split)
        hard = plan.split.endswith("_hard")
        return TrajectoryRow(
            sample_id=plan.traj_id,
            traj_id=plan.traj_id,
            number=plan.number,
            split=split,
            built_as=plan.split,
            trajectory_type=kind_of(split),
            construction=plan.construction,
            difficulty="none" if split == RANDOM_WALK else "hard" if hard else "easy",
            pair_id=plan.pair_id,
            role=plan.role,
            partner_number=plan.partner_number,
            stem=stem,
            video=video_path(split, stem),
            meta=meta_path(split, stem),
            keyframes=sorted(record.kept_frames),
            actions=plan.actions,
            root=plan.root,
            width=plan.width,
            height=plan.height,
            fps=plan.fps,
            frames=plan.space.frames,
            frames_per_action=plan.space.frames_per_action,
            identities=plan.identities,
            anchors=plan.anchors,
            witness=plan.witness,
            closure_residual_m=plan.closure_residual_m,
            collisions=layers.collisions,
            pose_error_max_m=layers.pose_error_max_m,
            identity_error_max_m=layers.identity_error_max_m,
            pixel_mse=layers.pixel_mse,
            failure=failure,
        )

    def check(self, rows: list[TrajectoryRow], rendered: Rendered) -> Checked[TrajectoryRow]:
        store, run = rendered.store, rendered.run_id
        records = {
            r.traj_id: _record(store, f"{keys.final_task(run, r.traj_id)}/{keys.EXECUTION}") for r in rows
        }
        by_number = {r.number: r for r in rows}
        failed: dict[str, str] = {}
        for r in rows:
            plan = _plan(store, run, r.traj_id)
            partner_row = by_number.get(r.partner_number) if r.role else None
            partner = records.get(partner_row.traj_id) if partner_row else None
            pixels = {}
            record = records[r.traj_id]
            if record is not None:
                pixels = _kept(store, run, r.traj_id, record)
                if partner_row is not None and partner is not None:
                    pixels |= {
                        (True, f): d for (_, f), d in _kept(store, run, partner_row.traj_id, partner).items()
                    }
            if plan is None:
                failed[r.sample_id] = "trajectory plan missing"
                continue
            why = row_mismatch(r, plan, run)
            if why is None and record is not None:
                why = record_mismatch(plan, record)
                if why is None and not set(r.keyframes) <= set(record.kept_frames):
                    why = "the row names frames the renderer did not keep"
            if why:
                failed[r.sample_id] = why
                continue
            space = plan.space
            why = check_row(r, record, partner, pixels, space.translation_m, space.yaw_deg, space.pitch_deg)
            if why:
                failed[r.sample_id] = why
        # an equivalence pair releases both halves or neither
        for r in rows:
            if r.role and r.split != RANDOM_WALK and r.sample_id not in failed:
                other = by_number.get(r.partner_number)
                if other is None or other.sample_id in failed:
                    failed[r.sample_id] = "its paired path was dropped"
        return Checked(rows, failed)

    def balance(self, rows: list[TrajectoryRow]) -> dict[str, str]:
        return {}

    def item(self, row: TrajectoryRow) -> Item:
        return Item(
            row.sample_id,
            row.split,
            row.pair_id or row.traj_id,
            row.difficulty,
            "trajectory",
            "",
            (),
            frozenset(),
            category=row.trajectory_type,
            family=self.name,
        )

    def media(self, row: TrajectoryRow) -> list[MediaRef]:
        return [MediaRef("video", row.video, row.fps)]

    def marks(self, row: TrajectoryRow) -> list[Mark]:
        return []

    def exports(self, rows: list[TrajectoryRow]) -> dict[str, bytes | Stored]:
        out: dict[str, bytes | Stored] = {"reasoning_index": index_parquet(rows)}
        for r in rows:
            for path, source in layout(r).items():
                kind = (
                    "video/mp4"
                    if path.endswith(".mp4")
                    else "image/png"
                    if path.endswith(".png")
                    else "application/json"
                )
                out[f"reasoning_layout/{path.removeprefix(FOLDER + '/')}"] = Stored(source, kind)
        return out

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        n = funnel.family_rows.get(self.name, 0)
        return CardPart(
            funnel=[f"| action trajectories (Reasoning-Structured Videos style) | {n} |"],
            drops=[],
            files=[
                (
                    "reasoning_layout",
                    f"- `{rel['reasoning_layout']}/`: action-conditioned videos in the Reasoning-Structured "
                    "Videos layout, one folder per split\n  (`inverse_easy`, `inverse_hard`, `loop_easy`, "
                    "`loop_hard`, `equivalence_easy`, `equivalence_hard`, `random_walk`):\n  "
                    "`run_<ts>__traj_<id>.mp4` with its "
                    "`_meta.json` (actions, root state, per-step start/expected/actual poses, collisions, "
                    "the relation), and\n  the lossless frames the relations name under `keyframes/`.",
                ),
                (
                    "reasoning_trajectories",
                    f"- `{rel['reasoning_trajectories']}`: one row per trajectory: split, construction, "
                    "identity frame pairs,\n  anchor frames, both validation layers' numbers, and why a "
                    "relation went to `random_walk/`.",
                ),
                (
                    "reasoning_index",
                    f"- `{rel['reasoning_index']}`: the same as a Parquet table "
                    '(`datasets.load_dataset("parquet", data_files=...)`).',
                ),
            ],
            notes=(
                " Action trajectories: 9 discrete actions, each rendered as a fixed number of frames "
                "from its start state to its end state, encoded H.264 at constant quality at the "
                "scan's `reasoning` size and frame rate (each `_meta.json` states its "
                "`video_encoding`); an identity holds to the pixel on the lossless frames (a "
                "discrete-return loop within its recorded residual). `equivalence_hard` is skyqa's: "
                "the card holds its Hard-tier Equivalence back unpublished, so its pairs follow the "
                "card's hard-tier rule instead (one path side-steps where the other turns a quarter, "
                "moves forward and turns back, so a commuting model puts the two ends apart)."
            ),
        )


def record_mismatch(plan: TrajectoryPlan, record: Execution) -> str | None:
    """What makes an execution record not the execution of its plan, or None."""
    if record.traj_id != plan.traj_id or record.frame_count != plan.space.frames:
        return "the execution record belongs to another trajectory or frame count"
    if [s.action for s in record.steps] != plan.actions or [s.step for s in record.steps] != list(
        range(len(plan.actions))
    ):
        return "the execution record's actions are not the plan's"
    if record.steps and tuple(record.steps[0].start) != tuple(plan.root):
        return "the execution record does not start at the plan's root"
    return None


def row_mismatch(row: TrajectoryRow, plan: TrajectoryPlan, run_id: str) -> str | None:
    """What makes a stored row disagree with its plan or its own release paths, or None."""
    if row.sample_id != row.traj_id or row.traj_id != plan.traj_id or row.number != plan.number:
        return "the row is not its plan's trajectory"
    if row.actions != plan.actions or tuple(row.root) != tuple(plan.root) or row.built_as != plan.split:
        return "the row's actions or root are not its plan's"
    if row.stem != stem_of(run_id, plan, row.split):
        return "the row's file name does not follow from its split and number"
    if row.video != video_path(row.split, row.stem) or row.meta != meta_path(row.split, row.stem):
        return "the row's release paths do not follow from its split and name"
    if row.identities != plan.identities or row.anchors != plan.anchors:
        return "the row's identities or anchors are not its plan's"
    return None


def _record(store: BlobStore, key: str) -> Execution | None:
    try:
        return load_json(Execution, store.get(key), "execution record")
    except (BlobNotFound, InvalidInput):
        return None


def _plan(store: BlobStore, run_id: str, traj_id: str) -> TrajectoryPlan | None:
    try:
        return load_json(TrajectoryPlan, store.get(keys.mission_file(run_id, traj_id, keys.TRAJECTORY_PLAN)))
    except (BlobNotFound, InvalidInput):
        return None


def _kept(store: BlobStore, run_id: str, traj_id: str, record: Execution) -> dict[tuple[bool, int], bytes]:
    out = {}
    for frame in record.kept_frames:
        try:
            out[(False, frame)] = store.get(f"{keys.final_task(run_id, traj_id)}/{keys.key_frame(frame)}")
        except (BlobNotFound, InvalidKey):
            continue
    return out


FAMILY = ReasoningVideos()
