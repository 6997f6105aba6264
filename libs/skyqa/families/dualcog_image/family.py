"""UAV-DualCog's image family: 8 rows per landmark (self_where, self_what, env_where, env_how at
4-way and 8-way), environment observations rendered for the env rows, VLMEvalKit MCQ TSV."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from skyqa import keys, media
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance
from skyqa.contracts.qa import IMAGE_TASKS, Funnel, ImageRow, OverlayRequest, ReasoningStep
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families.base import CardPart, Checked, Item, Mark, MediaRef, PlanInputs, Planned, Rendered, box4
from skyqa.families.dualcog_image import evaluation
from skyqa.families.dualcog_image.checks import check_image_rows, check_reasoning
from skyqa.families.dualcog_image.export import dualcog_manifest
from skyqa.families.dualcog_image.placement import LabelBalance, Placement
from skyqa.families.dualcog_image.tasks import (
    LandmarkSkipped,
    StillSpec,
    difficulty_plan,
    finish_env_row,
    option_count,
    plan_landmark,
    unplannable,
    usable_views,
)
from skyqa.families.twins import TWIN_IN_VIEW, shows, twins
from skyqa.media_policy import MediaPolicy
from skyqa.reviewed import rendered_id
from skyqa.scan import stills

STILL_FOV_DEG = 72.0
UNREADABLE = "the segmentation of a shown image is missing or unreadable"


class DualCogImage:
    name = "dualcog_image"
    noun = "image"
    # UAV-DualCog renders its image rows at 4096x3072 and exports them as JPEG 80 "to preserve
    # high-frequency spatial details for grounding": each still goes as stored (its reference
    # runner's 640x480 upload is, here, an endpoint's stated max_pixels)
    media_policy = MediaPolicy(source="UAV-DualCog image tasks: 4096x3072 stills as stored, JPEG 80")
    manifest = "image_qa"
    files: Mapping[str, str] = MappingProxyType(
        {
            "image_qa": "image_tasks/manifests/{scene}.image_qa.jsonl",
            # UAV-DualCog's Stage 4 names: the latest manifest, and one its listing finds
            "image_dualcog_latest": "image_tasks/manifests/{scene}.latest_manifest.json",
            "image_dualcog_listed": "image_tasks/manifests/{scene}_qa_manifest_release.json",
        }
    )
    row_model = ImageRow
    unit_kind = "landmark"
    unit_rows: int | None = 8
    rows_field: str | None = "image_rows"
    funnel: Mapping[str, str] = MappingProxyType({})

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        return {vi.instance_id: why for vi in landmarks if (why := unplannable(vi)) is not None}

    def plan(self, inputs: PlanInputs) -> Planned[ImageRow]:
        size = stills(inputs.scan)
        still = StillSpec(size.width, size.height, STILL_FOV_DEG)
        landmarks = inputs.landmarks
        placement = Placement(
            inputs.seed, [difficulty_plan(usable_views(vi)) for vi in landmarks], option_count
        )
        balance = LabelBalance(inputs.seed)
        out = Planned[ImageRow](rows=[])
        overlays: dict[str, OverlayRequest] = {}
        for i, vi in enumerate(landmarks):
            if vi.instance_id in inputs.excluded:
                continue
            try:
                # a skipped landmark's rows must not count towards the label balance
                trial = copy.deepcopy(balance)
                lp = plan_landmark(
                    vi, i, inputs.scene_id, inputs.engine, inputs.root, inputs.seed, still, placement, trial
                )
            except LandmarkSkipped as exc:
                out.skipped[vi.instance_id] = str(exc)
                continue
            balance = trial
            out.rows += lp.rows
            out.env_requests += lp.env_requests
            overlays.update({o.output_image: o for o in lp.overlays})
        out.overlays = list(overlays.values())
        return out

    def check(self, rows: list[ImageRow], rendered: Rendered) -> Checked[ImageRow]:
        out = Checked[ImageRow](rows=[])
        for row in rows:
            if row.task_type.startswith("env"):
                rid = str(row.metadata["env_request_id"])
                if rid not in rendered.masks:
                    out.failed[row.sample_id] = "environment observation missing"
                    out.rows.append(row)
                    continue
                try:
                    row = finish_env_row(row, rendered.requests[rid], rendered.masks[rid])
                except LandmarkSkipped as exc:
                    out.failed[row.sample_id] = str(exc)
            out.rows.append(row)
        kept = [r for r in out.rows if r.sample_id not in out.failed]
        out.failed.update(check_reasoning(kept).reasons)
        out.failed.update(
            check_image_rows(kept, rendered.landmarks, rendered.requests, rendered.masks).reasons
        )
        out.failed.update(twins_shown([r for r in kept if r.sample_id not in out.failed], rendered))
        return out

    def balance(self, rows: list[ImageRow]) -> dict[str, str]:
        return {}  # gold labels and letters are balanced when the rows are planned

    def item(self, row: ImageRow) -> Item:
        options = tuple((o.option_id, o.label) for o in row.label_options)
        return Item(
            row.sample_id,
            row.task_type,
            row.landmark_id,
            row.difficulty,
            "choice",
            row.prompt_text,
            options,
            frozenset([row.answer_option_id]),
            tuple(row.answer_bbox_xyxy_norm),
            # no description: the reference image's box marks the landmark, and a row whose media
            # show another of its description fails its check (skyqa.families.twins)
            category=row.landmark_category,
            family=self.name,
            # self_what's options name candidate images ("Image 2"), not answers
            texts=() if row.task_type == "self_what" else tuple(label for _, label in options),
        )

    def exports(self, rows: list[ImageRow]) -> dict[str, bytes]:
        manifest = dualcog_manifest(rows)
        return {"image_dualcog_latest": manifest, "image_dualcog_listed": manifest}

    metrics: Mapping[str, tuple[str, ...]] = MappingProxyType({t: evaluation.METRICS for t in IMAGE_TASKS})
    groups: Mapping[str, tuple[str, ...]] = MappingProxyType({})

    def difficulty(self, row: ImageRow) -> str:
        return row.difficulty

    def prompts(self, row: ImageRow) -> tuple[str, str]:
        return row.system_prompt, row.user_prompt

    def media(self, row: ImageRow) -> list[MediaRef]:
        return evaluation.media(row)

    def marks(self, row: ImageRow) -> list[Mark]:
        shown = set(row.images)
        out = []
        if row.target_image in shown and len(row.answer_bbox_xyxy_norm) == 4:
            out.append(Mark(row.target_image, box4(row.answer_bbox_xyxy_norm), "answer"))
        if row.reference_image_with_bbox in shown and len(row.reference_bbox_xyxy_norm) == 4:
            out.append(Mark(row.reference_image_with_bbox, box4(row.reference_bbox_xyxy_norm), "reference"))
        return out

    def steps(self, row: ImageRow) -> list[ReasoningStep]:
        return row.reasoning_steps

    def parse(self, row: ImageRow, text: str) -> Parsed:
        return evaluation.parse(row, text)

    def score(self, row: ImageRow, parsed: Parsed, steps: bool) -> dict[str, Any]:
        return evaluation.score(row, parsed, steps)

    def rotations(self, row: ImageRow) -> list[ImageRow]:
        return evaluation.rotations(row)

    def with_steps(self, row: ImageRow) -> ImageRow | None:
        return evaluation.with_steps(row)

    def guess(self, row: ImageRow, rng: np.random.Generator) -> dict[str, Any]:
        return evaluation.guess(row, rng)

    def prior(self, row: ImageRow, rows: Sequence[ImageRow]) -> dict[str, Any]:
        return evaluation.prior(row, rows)

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        return CardPart(
            funnel=[f"| image rows (8 per landmark, less blind-dropped) | {funnel.image_rows} |"],
            drops=[],
            files=[
                (
                    "image_qa",
                    f"- `{rel['image_qa']}`: image rows: `self_where` "
                    "(Landmark-Relative Position Reasoning),\n"
                    "  `self_what` (Future Observation Prediction), `env_where` (Self-Relative Position "
                    "Reasoning),\n  `env_how` (Landmark-Driven Action Decision), each at 4-way and 8-way; "
                    'answer\n  `{"answer_option_id", "bbox_xyxy_norm"}`; `reasoning_steps` give '
                    "GND/PER/QUA/INT/INF steps.",
                ),
                (
                    "image_dualcog_latest",
                    f"- `{rel['image_dualcog_latest']}` (and `{rel['image_dualcog_listed']}`, the same "
                    "file under the\n  name UAV-DualCog's manifest listing finds): the image rows as "
                    "UAV-DualCog's Stage 4\n  manifest; `skyqa_conventions` says where a row deliberately "
                    "differs from it.",
                ),
            ],
            # continues the media paragraph's last line
            notes=""" Environment
rows' `env_how` gold is the move that brings the landmark to the image centre: turn towards
its side and climb or descend towards it (4-way: the dominant axis, at least 5 degrees off and
1.5 times the other; 8-way: every axis at least 5 degrees off). `env_where` offers only the
labels a forward camera that shows the landmark allows (left of, at, or right of the forward
direction; straight ahead under 5 degrees). A row is asked only when its answer is at least 2
degrees from every angle boundary and its dominant axis at least 1.95 times the other, and
gives the same answer when the landmark's centre is taken as the centre of its visible pixels.""",
        )


def twins_shown(rows: list[ImageRow], rendered: Rendered) -> dict[str, str]:
    """The rows whose images other than the reference show a twin of their landmark
    (:mod:`skyqa.families.twins`), read from the environment observation's mask as rendered or
    a landmark view's stored segmentation; a shown image whose segmentation cannot be read
    fails its row, since nothing says the twin is not in it."""
    of = twins(rendered.landmarks.values())
    root = keys.run_prefix(rendered.run_id)
    # a view is one landmark's: its verdict is kept, not its decoded mask (50 MB at 4096x3072)
    views: dict[str, str | None] = {}

    def verdict(mask: NDArray[np.uint32] | None, ids: frozenset[int], own: int) -> str | None:
        if mask is None:
            return UNREADABLE
        return TWIN_IN_VIEW if shows(mask, ids, own) else None

    def view(path: str, ids: frozenset[int], own: int) -> str | None:
        if path not in views:
            try:
                mask = media.decode_segmentation(rendered.store.get(f"{root}/{path}"))[1]
            except (BlobNotFound, InvalidInput, ValueError):  # InvalidKey: a stored path unsafe
                mask = None
            views[path] = verdict(mask, ids, own)
        return views[path]

    out: dict[str, str] = {}
    for r in rows:
        ids = of.get(r.landmark_id)
        vi = rendered.landmarks.get(r.landmark_id)
        if not ids or vi is None:
            continue
        own = rendered_id(vi)
        segs = {v.path: v.segmentation_path for v in vi.rgb_views}
        for image in r.images:
            if image == r.reference_image_with_bbox:
                continue  # its box says which one the row asks about
            if image == r.target_image and r.task_type.startswith("env"):
                rid = str(r.metadata.get("env_request_id"))
                req = rendered.requests.get(rid)
                why = verdict(rendered.masks.get(rid), ids, req.rendered_instance_id if req else own)
            else:
                why = view(segs[image], ids, own) if image in segs else UNREADABLE
            if why is not None:
                out[r.sample_id] = why
                break
    return out


FAMILY = DualCogImage()
