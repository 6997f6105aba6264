"""Image QA: 8 rows per landmark (2 difficulty slots x self_where, self_what, env_where, env_how).

Per slot, a *self pair* (where + what) shares a reference view and the target view; each
environment row gets its own newly rendered observation from another valid view's eye. Only
views the review kept valid are used. The difficulty plan is 4-way + 8-way whenever the
landmark has a valid diagonal view (else 4-way twice). Which answer a row gets and where it
sits among the options come from :mod:`placement`: gold labels are balanced over each task's
label space, letters over the options. Options are only labels the row's own evidence leaves
possible. Environment rows get their box after rendering (:func:`finish_env_row`).

Deviations from UAV-DualCog, for validity: the reference is any valid view, not always the
main (front) one, so every facade can be the answer; env_where and env_how do not share one
observation, and the camera is aimed so that the answer is the label the balance needs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skyqa import keys
from skyqa.contracts import RgbView, ValidInstance
from skyqa.contracts.landmarks import DIAGONALS, RING
from skyqa.contracts.qa import Candidate, EnvRequest, ImageRow, Option, OverlayRequest
from skyqa.families.dualcog_image.placement import LETTERS, LabelBalance, Placement
from skyqa.families.dualcog_image.reasoning import steps_for
from skyqa.families.views import norm_box, reference_overlay
from skyqa.sim import Intrinsics, Pose, look_at, project_box
from skyqa.vocab import directions as L, prompts

ENV_TRIES = 200
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


def _eligible(views: list[RgbView], difficulty: str) -> list[RgbView]:
    """The views a slot of ``difficulty`` may take its reference and target from."""
    return [v for v in views if difficulty == "8way" or v.view_direction in L.CARDINAL]


def unplannable(vi: ValidInstance) -> str | None:
    """Why the landmark's 8 rows cannot be planned, from its reviewed views alone, or None."""
    views = usable_views(vi)
    if len(views) < 5:
        return f"{len(views)} usable orbit views; self_what needs at least 5"
    for difficulty in difficulty_plan(views):
        if len(_eligible(views, difficulty)) < 2:
            return f"no reference and target pair in the {difficulty} label space"
    return None


def option_count(task: str, difficulty: str) -> int:
    """Options per row: every label the row's evidence leaves possible, at most four.

    4-way self_where leaves out the reference facade's own label (the target is another
    view), which leaves three; env_where's space has three labels (a camera that shows the
    landmark rules out the labels behind it)."""
    if (task, difficulty) == ("self_where", "4way") or task == "env_where":
        return 3
    return 4


def _options(
    gold: str, space: list[str], position: int, count: int, rng: np.random.Generator
) -> list[Option]:
    others = [x for x in space if x != gold]
    picked = [others[i] for i in rng.permutation(len(others))[: count - 1]]
    picked.insert(position, gold)
    return [Option(option_id=LETTERS[i], label=lab) for i, lab in enumerate(picked)]


def _pose_list(p: Pose) -> list[float]:
    return [round(v, 6) for v in (p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg)]


def env_observation(
    source: RgbView,
    vi: ValidInstance,
    task: str,
    difficulty: str,
    wanted: list[str],
    rng: np.random.Generator,
    still: StillSpec,
) -> tuple[Pose, str, L.Bearing]:
    """A camera at the source view's eye, turned so the landmark's answer is the first label of
    ``wanted`` that can be framed (whole 3D box in frame, bearing clear of every margin).

    UAV-DualCog turns the yaw by a base of +30, 0 or -30 degrees plus small offsets, which
    leaves the answer to chance (mostly a side, never climb or descend); skyqa aims for the
    label the balance asks for instead, sampling turns until the landmark falls in its region.
    """
    lo, hi = np.array(vi.bbox_3d.min), np.array(vi.bbox_3d.max)
    center = (lo + hi) / 2
    k = Intrinsics.from_fov(still.width, still.height, still.fov_deg)
    c = source.camera
    eye = np.array([c.x, c.y, c.z])
    yaw0, pitch0 = look_at(eye, center)
    half_h, half_v = k.half_fov_deg()
    rule = L.env_direction if task == "env_where" else L.env_action
    for label in wanted:
        for _ in range(ENV_TRIES):
            dyaw, dpitch = rng.uniform(-half_h, half_h), rng.uniform(-half_v, half_v)
            pose = Pose(c.x, c.y, c.z, yaw0 + dyaw, pitch0 + dpitch, 0.0)
            b = L.bearing(center, pose)
            if rule(b, difficulty) == label and project_box(lo, hi, pose, k, 2.0)[1]:
                return pose, label, b
    raise LandmarkSkipped(f"no {task} observation with the whole landmark in frame and a clear answer")


def plan_landmark(
    vi: ValidInstance,
    index: int,
    scene_id: str,
    engine: str,
    run_root: str,
    seed: int,
    still: StillSpec,
    placement: Placement,
    balance: LabelBalance,
) -> LandmarkPlan:
    """All 8 rows of one landmark (environment boxes pending) plus what must be rendered.

    ``placement`` says where each row's gold answer goes among its options; ``balance`` says
    which gold labels the run needs most, so that each task's answers cover its label space
    evenly (the target facade and the environment camera are chosen for it)."""
    if (why := unplannable(vi)) is not None:
        raise LandmarkSkipped(why)
    views = usable_views(vi)
    desc = vi.landmark_description or vi.class_name
    category = vi.landmark_category or vi.class_name
    rows: list[ImageRow] = []
    env_requests: list[EnvRequest] = []
    overlays: dict[str, OverlayRequest] = {}
    lm = vi.instance_id

    def rel(key: str) -> str:
        return key.removeprefix(run_root + "/")

    def overlay(v: RgbView) -> str:
        req = reference_overlay(lm, v, rel(v.path))
        overlays[req.output_image] = req
        return req.output_image

    used_targets: set[str] = set()
    for slot, difficulty in enumerate(difficulty_plan(views)):
        first = len(rows)
        rng = np.random.default_rng(seed + (index * 2 + slot) * SEED_STRIDE + 17)
        eligible = _eligible(views, difficulty)
        by_label = {L.object_label(v.view_direction): v for v in eligible}
        # the target facade is the label the run needs most (a slot does not repeat a target);
        # the reference is any other eligible view, so its facade says nothing about the answer
        salt = f"{lm}:{slot}"
        order = balance.order("self_where", difficulty, sorted(by_label), salt)
        order.sort(key=lambda lab: by_label[lab].view_id in used_targets)
        gold = order[0]
        balance.take("self_where", difficulty, gold)
        target = by_label[gold]
        used_targets.add(target.view_id)
        refs = [v for v in eligible if v.view_id != target.view_id]
        ref = refs[int(rng.integers(len(refs)))]
        ref_label = L.object_label(ref.view_direction)
        ref_img = overlay(ref)
        common: dict[str, str | list[float]] = {
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
        space = [x for x in L.label_space("self_where", difficulty) if x != ref_label]
        opts = _options(
            gold,
            space,
            placement.position(index, slot, "self_where"),
            option_count("self_where", difficulty),
            rng,
        )
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
                    "target_object_view": gold,
                },
                candidates=candidates,
                behavior=behavior,
            )
        )
        # env rows: each its own camera at another valid view's eye, aimed for a balanced answer
        env_prefix = f"{scene_id}_{lm}_env_shared_{difficulty}_{index * 2 + slot:06d}"
        sources = [v for v in views if v.view_id != ref.view_id]
        for task in ("env_where", "env_how"):
            source = sources[int(rng.integers(len(sources)))]
            space = L.label_space(task, difficulty)
            wanted = balance.order(task, difficulty, space, salt)
            pose, gold_env, b = env_observation(source, vi, task, difficulty, wanted, rng, still)
            balance.take(task, difficulty, gold_env)
            sample_id = f"{env_prefix}_{task.split('_')[1]}"
            request = _env_request(sample_id, vi, source, pose, still)
            env_requests.append(request)
            meta: dict[str, str | float | int | bool] = {
                "env_request_id": request.request_id,
                "source_view_id": source.view_id,
                "horizontal_deg": round(b.horizontal_deg, 3),
                "vertical_deg": round(b.vertical_deg, 3),
            }
            env_opts = _options(
                gold_env,
                space,
                placement.position(index, slot, task),
                option_count(task, difficulty),
                rng,
            )
            rows.append(_row(common, sample_id, task, request.output_image, env_opts, gold_env, [], meta))
        # UAV-DualCog's reference fields: self_what names the reference in the observer's frame
        for r in rows[first:]:
            r.metadata["reference_is_main_view"] = ref.view_id == vi.main_view
            r.metadata["reference_label"] = (
                L.observer_label(ref.view_direction) if r.task_type == "self_what" else ref_label
            )
    return LandmarkPlan(rows, env_requests, list(overlays.values()))


def _env_request(
    request_id: str, vi: ValidInstance, source: RgbView, pose: Pose, still: StillSpec
) -> EnvRequest:
    out = keys.env_observations(vi.instance_id)  # relative to the release
    c = source.camera
    return EnvRequest(
        request_id=request_id,
        landmark_id=vi.instance_id,
        rendered_instance_id=source.rendered_instance_id,
        output_image=keys.still_view(out, request_id, "rgb"),
        output_segmentation=keys.still_view(out, request_id, "segmentation"),
        width=still.width,
        height=still.height,
        fov_deg=still.fov_deg,
        pose=_pose_list(pose),
        source_view_id=source.view_id,
        yaw_delta_deg=round(pose.yaw_deg - c.yaw_deg, 4),
        pitch_delta_deg=round(pose.pitch_deg - c.pitch_deg, 4),
        target_center_3d=[
            round(float(x), 4) for x in (np.array(vi.bbox_3d.min) + np.array(vi.bbox_3d.max)) / 2
        ],
        target_aabb=[list(vi.bbox_3d.min), list(vi.bbox_3d.max)],
    )


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
    """Fill an environment row's box from the rendered instance mask of its observation, and
    show the observation as it was rendered (``request``: the planned one, or the first look at
    a working size of a landmark whose observations were not rendered again where they ship)."""
    mask = instance == request.rendered_instance_id
    if not mask.any():
        raise LandmarkSkipped(
            f"{request.request_id}: the landmark is not visible in the rendered observation"
        )
    ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    h, w = mask.shape
    out = row.model_copy(deep=True)
    out.images = [request.output_image if i == row.target_image else i for i in row.images]
    out.target_image = request.output_image
    out.answer_bbox_xyxy_norm = [
        round(xs[0] / w, 4),
        round(ys[0] / h, 4),
        round((xs[-1] + 1) / w, 4),
        round((ys[-1] + 1) / h, 4),
    ]
    out.reasoning_steps = steps_for(out)
    return out
