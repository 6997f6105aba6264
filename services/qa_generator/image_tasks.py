"""Image QA: 8 rows per landmark (2 difficulty slots x self_where, self_what, env_where, env_how).

Per slot, a *self pair* (where + what) shares the reference (main) view and the target view,
and an *env pair* (where + how) shares one newly rendered environment observation. Only views
the review kept valid are used. The difficulty plan is 4-way + 8-way whenever the landmark has
a valid diagonal view (else 4-way twice). Where the gold answer sits among the options comes
from :mod:`placement` (balanced and seeded per task and difficulty). Environment rows get their
box after rendering (:func:`finish_env_row`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from skyqa.contracts import RgbView, ValidInstance
from skyqa.contracts.landmarks import DIAGONALS, RING
from skyqa.contracts.qa import Candidate, EnvRequest, ImageRow, Option, OverlayRequest
from skyqa.sim import Intrinsics, Pose

from services.qa_generator import labels as L, prompts
from services.qa_generator.placement import LETTERS, Placement
from services.qa_generator.reasoning import steps_for

YAW_BASES = (30.0, 0.0, -30.0)
YAW_OFFSETS = (0.0, 8.0, -8.0, 15.0, -15.0, 22.0, -22.0, 30.0, -30.0)
PITCH_BASES = (12.0, 0.0, -12.0)
PITCH_DELTAS = (0.0, -4.0, 4.0)
SEED_STRIDE = 1009


class LandmarkSkipped(Exception):
    """The landmark cannot give a complete set of rows; the message says why."""


@dataclass(frozen=True)
class StillSpec:
    width: int
    height: int
    fov_deg: float


@dataclass
class LandmarkPlan:
    rows: list[ImageRow]
    env_requests: list[EnvRequest]
    overlays: list[OverlayRequest]


def usable_views(vi: ValidInstance) -> list[RgbView]:
    valid = set(vi.valid_view_ids)
    return [
        v
        for v in vi.rgb_views
        if v.mode == "orbit"
        and v.is_valid
        and v.bbox_2d_valid
        and v.view_id in valid
        and v.view_direction in RING
    ]


def difficulty_plan(views: list[RgbView]) -> list[str]:
    return ["4way", "8way"] if any(v.view_direction in DIAGONALS for v in views) else ["4way", "4way"]


def norm_box(v: RgbView) -> list[float]:
    w, h = v.bbox_2d_image_size
    x0, y0, x1, y1 = v.bbox_2d_xyxy
    return [round(x0 / w, 4), round(y0 / h, 4), round(x1 / w, 4), round(y1 / h, 4)]


def _options(gold: str, space: list[str], position: int, rng: np.random.Generator) -> list[Option]:
    others = [x for x in space if x != gold]
    picked = [others[i] for i in rng.permutation(len(others))[:3]]
    picked.insert(position, gold)
    return [Option(option_id=LETTERS[i], label=lab) for i, lab in enumerate(picked)]


def _pose_list(p: Pose) -> list[float]:
    return [round(v, 6) for v in (p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg)]


def env_observation(
    source: RgbView, vi: ValidInstance, difficulty: str, rng: np.random.Generator, still: StillSpec
) -> tuple[Pose, float, float, str, str, L.Bearing]:
    """Perturb the source view's camera until the whole box is in frame and both labels are clear.

    UAV-DualCog turns the yaw by a random base of +30, 0 or -30 degrees plus growing offsets;
    skyqa also tilts the pitch by a random base of +12, 0 or -12 degrees, so that env_how's
    climb/descend answers occur.
    """
    lo, hi = np.array(vi.bbox_3d.min), np.array(vi.bbox_3d.max)
    center = (lo + hi) / 2
    k = Intrinsics.from_fov(still.width, still.height, still.fov_deg)
    c = source.camera
    base = float(YAW_BASES[int(rng.integers(len(YAW_BASES)))])
    # a pitch base too, so the landmark also sits above or below the centre (env_how climbs)
    pitch_base = float(PITCH_BASES[int(rng.integers(len(PITCH_BASES)))])
    for offset in YAW_OFFSETS:
        for dp in (pitch_base + d for d in PITCH_DELTAS):
            pose = Pose(c.x, c.y, c.z, c.yaw_deg + base + offset, c.pitch_deg + dp, 0.0)
            _, inside = L.projected_box(lo, hi, pose, k)
            if not inside:
                continue
            b = L.bearing(center, pose)
            where, how = L.env_direction(b, difficulty), L.env_action(b, difficulty)
            if where and how:
                return pose, base + offset, dp, where, how, b
    raise LandmarkSkipped("no unambiguous environment observation with the whole landmark in frame")


def plan_landmark(
    vi: ValidInstance,
    index: int,
    scene_id: str,
    engine: str,
    run_root: str,
    seed: int,
    still: StillSpec,
    placement: Placement,
) -> LandmarkPlan:
    """All 8 rows of one landmark (environment boxes pending) plus what must be rendered;
    ``placement`` says where each row's gold answer goes among its options."""
    views = usable_views(vi)
    if len(views) < 5:
        raise LandmarkSkipped(f"{len(views)} usable orbit views; self_what needs at least 5")
    desc = vi.landmark_description or vi.class_name
    category = vi.landmark_category or vi.class_name
    main = next((v for v in views if v.view_id == vi.main_view), None)
    rows: list[ImageRow] = []
    env_requests: list[EnvRequest] = []
    overlays: dict[str, OverlayRequest] = {}
    lm = vi.instance_id

    def rel(key: str) -> str:
        return key.removeprefix(run_root + "/")

    def overlay(v: RgbView) -> str:
        out = f"image_tasks/assets/reference_bbox/{lm}/{v.view_id}_ref.jpg"
        overlays[out] = OverlayRequest(output_image=out, source_image=rel(v.path), bbox_xyxy_norm=norm_box(v))
        return out

    used_targets: set[str] = set()
    for slot, difficulty in enumerate(difficulty_plan(views)):
        rng = np.random.default_rng(seed + (index * 2 + slot) * SEED_STRIDE + 17)
        eligible = [v for v in views if difficulty == "8way" or v.view_direction in L.CARDINAL]
        ref = main if main is not None and main in eligible else next((v for v in eligible), None)
        pool = [v for v in eligible if ref is not None and v.view_id != ref.view_id]
        if ref is None or not pool:
            raise LandmarkSkipped(f"no reference and target pair in the {difficulty} label space")
        # an 8-way slot asks about a diagonal facade when there is one; slots differ when they can
        diagonal = [v for v in pool if v.view_direction in DIAGONALS] if difficulty == "8way" else []
        fresh = [v for v in (diagonal or pool) if v.view_id not in used_targets] or diagonal or pool
        target = fresh[int(rng.integers(len(fresh)))]
        used_targets.add(target.view_id)
        ref_label = L.object_label(ref.view_direction)
        ref_img = overlay(ref)
        common = {
            "scene_id": scene_id,
            "engine": engine,
            "landmark_id": lm,
            "landmark_category": category,
            "landmark_description": desc,
            "difficulty": difficulty,
            "reference_image": rel(ref.path),
            "reference_image_with_bbox": ref_img,
            "reference_bbox_xyxy_norm": norm_box(ref),
            "reference_object_view": ref_label,
            "system_prompt": prompts.IMAGE_SYSTEM,
        }
        self_prefix = f"{scene_id}_{lm}_self_shared_{difficulty}_{index * 2 + slot:06d}"
        gold = L.object_label(target.view_direction)
        opts = _options(gold, L.label_space(difficulty), placement.position(index, slot, "self_where"), rng)
        rows.append(
            _row(
                common,
                f"{self_prefix}_where",
                "self_where",
                rel(target.path),
                opts,
                gold,
                norm_box(target),
                {"reference_view_id": ref.view_id, "target_view_id": target.view_id, "query_label": gold},
            )
        )
        others = [v for v in views if v.view_id not in (ref.view_id, target.view_id)]
        picks = [others[i] for i in rng.permutation(len(others))[:3]]
        position = placement.position(index, slot, "self_what")
        cand_views = picks[:position] + [target] + picks[position:]
        degrees, turn = L.orbit_turn(ref.yaw_deg, target.yaw_deg)
        behavior = f"a {degrees}-degree {turn} turn around the landmark"
        candidates = [
            Candidate(
                option_id=LETTERS[i],
                image=rel(v.path),
                view_under_definition=L.observer_label(v.view_direction),
                bbox_xyxy_norm=norm_box(v),
            )
            for i, v in enumerate(cand_views)
        ]
        what_opts = [Option(option_id=LETTERS[i], label=f"Image {i + 2}") for i in range(4)]
        rows.append(
            _row(
                common,
                f"{self_prefix}_what",
                "self_what",
                rel(target.path),
                what_opts,
                f"Image {position + 2}",
                norm_box(target),
                {
                    "reference_view_id": ref.view_id,
                    "target_view_id": target.view_id,
                    "turn_degrees": degrees,
                    "turn_direction": turn,
                    "query_label": L.observer_label(target.view_direction),
                },
                candidates=candidates,
                behavior=behavior,
            )
        )
        # env pair: a perturbed camera at another valid view's eye
        sources = [v for v in views if v.view_id != ref.view_id]
        source = sources[int(rng.integers(len(sources)))]
        pose, yaw_delta, pitch_delta, where, how, b = env_observation(source, vi, difficulty, rng, still)
        env_prefix = f"{scene_id}_{lm}_env_shared_{difficulty}_{index * 2 + slot:06d}"
        out = f"{run_root}/image_tasks/assets/env_observations/{lm}"
        request = EnvRequest(
            request_id=env_prefix,
            landmark_id=lm,
            rendered_instance_id=source.rendered_instance_id,
            output_image=rel(f"{out}/{env_prefix}.rgb.jpg"),
            output_segmentation=rel(f"{out}/{env_prefix}.seg.png"),
            width=still.width,
            height=still.height,
            fov_deg=still.fov_deg,
            pose=_pose_list(pose),
            source_view_id=source.view_id,
            yaw_delta_deg=yaw_delta,
            pitch_delta_deg=pitch_delta,
            target_center_3d=[
                round(float(x), 4) for x in (np.array(vi.bbox_3d.min) + np.array(vi.bbox_3d.max)) / 2
            ],
            target_aabb=[list(vi.bbox_3d.min), list(vi.bbox_3d.max)],
        )
        env_requests.append(request)
        meta: dict[str, str | float | int | bool] = {
            "env_request_id": env_prefix,
            "source_view_id": source.view_id,
            "horizontal_deg": round(b.horizontal_deg, 3),
            "vertical_deg": round(b.vertical_deg, 3),
        }
        for task, gold_env, space in (
            ("env_where", where, L.ENV_8 if difficulty == "8way" else L.ENV_4),
            ("env_how", how, L.ACTION_8 if difficulty == "8way" else L.ACTION_4),
        ):
            env_opts = _options(gold_env, space, placement.position(index, slot, task), rng)
            suffix = task.split("_")[1]
            rows.append(
                _row(
                    common, f"{env_prefix}_{suffix}", task, request.output_image, env_opts, gold_env, [], meta
                )
            )
    return LandmarkPlan(rows, env_requests, list(overlays.values()))


def _row(
    common: dict[str, str | list[float]],
    sample_id: str,
    task: str,
    target_image: str,
    options: list[Option],
    gold: str,
    bbox: list[float],
    metadata: dict[str, str | float | int | bool],
    candidates: list[Candidate] | None = None,
    behavior: str = "",
) -> ImageRow:
    answer = next(o.option_id for o in options if o.label == gold)
    text = prompts.image_prompt(
        task,
        str(common["reference_object_view"]),
        str(common["landmark_description"]),
        [(o.option_id, o.label) for o in options],
        behavior,
    )
    images = [str(common["reference_image_with_bbox"])]
    images += [c.image for c in candidates] if candidates else [target_image]
    self_task = task.startswith("self")
    row = ImageRow.model_validate(
        {
            **common,
            "sample_id": sample_id,
            "task_group": "self-aware" if self_task else "environment-aware",
            "view_definition": "Self-Aware" if self_task else "Environment-Aware",
            "task_type": task,
            "task_display_name": prompts.DISPLAY[task],
            "target_image": target_image,
            "images": images,
            "label_options": options,
            "answer_option_id": answer,
            "answer_label": gold,
            "answer_bbox_xyxy_norm": bbox,
            "candidates": candidates or [],
            "behavior_instance": behavior,
            "metadata": metadata,
            "reasoning_steps": [],
            "prompt_text": text,
            "user_prompt": text,
        }
    )
    if bbox:
        row.reasoning_steps = steps_for(row)
    return row


def finish_env_row(row: ImageRow, request: EnvRequest, instance: np.ndarray) -> ImageRow:
    """Fill an environment row's box from the rendered instance mask of its observation."""
    mask = instance == request.rendered_instance_id
    if not mask.any():
        raise LandmarkSkipped(
            f"{request.request_id}: the landmark is not visible in the rendered observation"
        )
    ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    h, w = mask.shape
    out = row.model_copy(deep=True)
    out.answer_bbox_xyxy_norm = [
        round(xs[0] / w, 4),
        round(ys[0] / h, 4),
        round((xs[-1] + 1) / w, 4),
        round((ys[-1] + 1) / h, 4),
    ]
    out.reasoning_steps = steps_for(out)
    return out
