"""UAV-DualCog's image family: 8 rows per landmark (self_where, self_what, env_where, env_how at
4-way and 8-way), environment observations rendered for the env rows, VLMEvalKit MCQ TSV."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType

from skyqa.contracts.qa import ImageRow, OverlayRequest
from skyqa.families.base import Checked, Item, PlanInputs, Planned, Rendered
from skyqa.families.dualcog_image.checks import check_image_rows, check_reasoning
from skyqa.families.dualcog_image.export import mcq_tsv
from skyqa.families.dualcog_image.placement import LabelBalance, Placement
from skyqa.families.dualcog_image.tasks import (
    LandmarkSkipped,
    StillSpec,
    difficulty_plan,
    finish_env_row,
    option_count,
    plan_landmark,
    usable_views,
)
from skyqa.scan import stills

STILL_FOV_DEG = 72.0


class DualCogImage:
    name = "dualcog_image"
    noun = "image"
    manifest = "image_qa"
    row_model = ImageRow
    unit_kind = "landmark"
    unit_rows = 8
    rows_field = "image_rows"
    funnel: Mapping[str, str] = MappingProxyType({})

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
            description=row.landmark_description,
            category=row.landmark_category,
            # self_what's options name candidate images ("Image 2"), not answers
            texts=() if row.task_type == "self_what" else tuple(label for _, label in options),
        )

    def exports(self, rows: list[ImageRow]) -> dict[str, bytes]:
        return {"image_mcq_tsv": mcq_tsv(rows)}


FAMILY = DualCogImage()
