"""QC of the image rows: structure, then every answer re-derived from scene geometry by a code
path the planner does not use: world-frame angles instead of camera-frame ones, ring order from
camera yaw instead of labels, the 3D box projection around the rendered box; and every
reasoning step against its row's answers and the paired row's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from skyqa.contracts import RgbView, ValidInstance
from skyqa.contracts.qa import EnvRequest, ImageRow
from skyqa.families.structure import Verdict, check_options
from skyqa.sim import Intrinsics, Pose, project_box
from skyqa.vocab import directions as L

BOX_SLACK = 0.04


def world_bearing(center: list[float], pose: list[float]) -> tuple[float, float]:
    """Horizontal (left positive) and vertical angles of the centre, from world-frame vectors.

    The horizontal angle is the heading difference in the ground plane; the vertical one is the
    elevation of the centre seen along that heading minus the camera pitch. Near the optical
    axis these agree with the camera-frame angles the generator uses to within a degree or two.
    """
    x, y, z, yaw, pitch = pose[:5]
    dx, dy, dz = center[0] - x, center[1] - y, center[2] - z
    heading = math.degrees(math.atan2(dy, dx))
    h = (heading - yaw + 180.0) % 360.0 - 180.0
    along = math.hypot(dx, dy) * math.cos(math.radians(h))
    v = math.degrees(math.atan2(dz, along)) - pitch
    return h, v


def check_image_rows(
    rows: list[ImageRow],
    landmarks: Mapping[str, ValidInstance],
    requests: Mapping[str, EnvRequest],
    instance_masks: Mapping[str, np.ndarray],
) -> Verdict:
    v = Verdict()
    seen: dict[tuple[str, str, tuple[str, ...]], str] = {}
    for r in rows:
        required = [
            r.sample_id,
            r.landmark_id,
            r.reference_image_with_bbox,
            r.target_image,
            r.prompt_text,
            r.answer_option_id,
        ]
        if not all(required) or len(r.answer_bbox_xyxy_norm) != 4 or not r.reasoning_steps:
            v.fail(r.sample_id, "missing required field")
        ids = [o.option_id for o in r.label_options]
        labels = [o.label for o in r.label_options]
        if not 3 <= len(ids) <= 4:
            v.fail(r.sample_id, "image rows need 3 or 4 options")
        if r.task_type != "self_what" and not _possible(r, labels):
            v.fail(r.sample_id, "an option the row's own evidence rules out")
        # self_what's options name candidate images ("Image 2"...); their views are checked below
        check_options(r.sample_id, labels, ids, [r.answer_option_id], v, text=r.task_type != "self_what")
        key = (r.task_type, r.prompt_text, tuple(r.images))
        if key in seen:
            v.fail(r.sample_id, "duplicate question")
        seen[key] = r.sample_id
        x0, y0, x1, y1 = r.answer_bbox_xyxy_norm or [0, 0, 0, 0]
        if not (0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1):
            v.fail(r.sample_id, "answer box outside the image or empty")
        lm = landmarks[r.landmark_id]
        if r.task_type.startswith("self"):
            _recheck_self(r, lm, v)
        else:
            _recheck_env(r, lm, requests[str(r.metadata["env_request_id"])], instance_masks, v)
    return v


def _possible(r: ImageRow, labels: list[str]) -> bool:
    """Every option is a label the row's evidence allows: in the task's space, and for
    self_where not the reference's own facade (the target is another view)."""
    space = set(L.label_space(r.task_type, r.difficulty))
    if r.task_type == "self_where":
        space.discard(r.reference_object_view)
    return set(labels) <= space


def _views(lm: ValidInstance) -> dict[str, RgbView]:
    return {x.view_id: x for x in lm.rgb_views}


def _recheck_self(r: ImageRow, lm: ValidInstance, v: Verdict) -> None:
    views = _views(lm)
    ref, target = views[str(r.metadata["reference_view_id"])], views[str(r.metadata["target_view_id"])]
    if not (ref.is_valid and target.is_valid and target.view_id in lm.valid_view_ids):
        v.fail(r.sample_id, "uses a view the review marked invalid")
        return
    # labels may be re-anchored by a reviewer, but they must follow the ring the cameras are on
    geo = {x.view_id: L.geometric_ring_index(x.yaw_deg, lm.bbox_3d.yaw_deg) for x in (ref, target)}
    shift = {(L.ring_index(x.view_direction) - geo[x.view_id]) % 8 for x in (ref, target)}
    if len(shift) != 1:
        v.fail(r.sample_id, "view labels disagree with the camera ring")
    if r.task_type == "self_where":
        if r.answer_label != L.object_label(target.view_direction):
            v.fail(r.sample_id, "answer is not the target view's facade")
        return
    # the turn from the labels' ring positions (the generator used camera yaw)
    # ring order (front, front_right, right, ...) goes clockwise seen from above
    steps = (L.ring_index(target.view_direction) - L.ring_index(ref.view_direction)) % 8
    cw = steps * 45
    expected = (cw, "clockwise") if cw <= 180 else (360 - cw, "counterclockwise")
    if (int(r.metadata["turn_degrees"]), str(r.metadata["turn_direction"])) != expected:
        v.fail(r.sample_id, "orbit turn disagrees with the ring labels")
    chosen = next(c for c in r.candidates if c.option_id == r.answer_option_id)
    if chosen.image != r.target_image or len({c.view_under_definition for c in r.candidates}) != 4:
        v.fail(r.sample_id, "candidates are not distinct or the answer is not the target view")


def _recheck_env(
    r: ImageRow, lm: ValidInstance, req: EnvRequest, masks: Mapping[str, np.ndarray], v: Verdict
) -> None:
    if req.source_view_id not in lm.valid_view_ids:
        v.fail(r.sample_id, "uses a view the review marked invalid")
    h, vert = world_bearing(req.target_center_3d, req.pose)
    if r.task_type == "env_where":
        side = "Left" if h > 0 else "Right"
        expected = "Front" if abs(h) < L.FRONT_DEG else side if r.difficulty == "4way" else f"Front-{side}"
        if r.answer_label != expected:
            v.fail(r.sample_id, f"direction re-check gives {expected}")
    else:
        parts = r.answer_label.lower()
        if ("left" in parts and h <= 0) or ("right" in parts and h >= 0):
            v.fail(r.sample_id, "turn direction disagrees with the world-frame bearing")
        if ("climb" in parts and vert <= 0) or ("descend" in parts and vert >= 0):
            v.fail(r.sample_id, "climb direction disagrees with the world-frame bearing")
    mask = masks.get(req.request_id)
    if mask is None:
        v.fail(r.sample_id, "environment observation missing")
        return
    hgt, wid = mask.shape
    k = Intrinsics.from_fov(wid, hgt, req.fov_deg)
    x, y, z, yaw, pitch, roll = req.pose
    pose = Pose(x, y, z, yaw, pitch, roll)
    # robust gold: clear of every decision boundary by the documented margin, and the same
    # answer when the landmark's centre is taken as the centre of what is visible of it
    where = r.task_type == "env_where"
    rule = L.env_direction if where else L.env_action
    if rule(L.bearing(np.array(req.target_center_3d), pose), r.difficulty) != r.answer_label:
        v.fail(r.sample_id, "answer within the margin of a decision boundary")
    elif r.answer_bbox_xyxy_norm:
        seen = L.box_bearing(r.answer_bbox_xyxy_norm, req.fov_deg, wid, hgt)
        bare = (
            L.env_direction(seen, r.difficulty, margin=0.0)
            if where
            else L.env_action(seen, r.difficulty, margin=0.0, dominance_margin=1.0)
        )
        if bare != r.answer_label:
            v.fail(r.sample_id, "answer changes with the visible centre of the landmark")
    # the rendered box must lie inside the projection of the 3D box (a different code path)
    proj, inside = project_box(np.array(req.target_aabb[0]), np.array(req.target_aabb[1]), pose, k)
    # its ground may be out of frame or behind the camera: the bottom edge only ever goes down
    standing, ahead = project_box(*_standing_box(req, lm), pose, k, margin_px=-math.inf)
    if ahead:
        proj[3] = max(proj[3], standing[3])
    box = np.array(r.answer_bbox_xyxy_norm) * [wid, hgt, wid, hgt]
    # the fused box misses unscanned parts
    slack = np.array([wid, hgt, wid, hgt]) * BOX_SLACK + 2
    if not inside or np.any(box[:2] < proj[:2] - slack[:2]) or np.any(box[2:] > proj[2:] + slack[2:]):
        v.fail(r.sample_id, "landmark box falls outside its projected 3D box")


def _standing_box(req: EnvRequest, lm: ValidInstance) -> tuple[np.ndarray, np.ndarray]:
    """The landmark's 3D box from the ground it stands on: the fused points miss what the LiDAR
    hardly hits below an object (a tree's trunk under its crown, a billboard's posts, a shelter's
    legs, and the ground cut), and its rendered mask shows them. The height above the ground
    (``Bbox3D.extent``: the scan's ground, the street under a landmark on a roof, whose bottom
    edge is then checked loosely) says where that ground is; sides and top stay as fused, and
    the check takes only the bottom edge of its projection."""
    lo, hi = np.array(req.target_aabb[0], dtype=float), np.array(req.target_aabb[1], dtype=float)
    if len(lm.bbox_3d.extent) == 3:
        lo[2] = min(lo[2], hi[2] - lm.bbox_3d.extent[2])
    return lo, hi


def check_reasoning(rows: list[ImageRow]) -> Verdict:
    """Every reasoning step against its row's answers and the paired row's: a self_what row
    and the self_where row of the same reference and target must name the same facades, and an
    environment row's region and horizontal offset must lie on its answer's side."""
    v = Verdict()

    def pair(r: ImageRow) -> tuple[str, ...]:
        m = r.metadata
        return (r.landmark_id, r.difficulty, str(m.get("reference_view_id")), str(m.get("target_view_id")))

    where_of = {pair(r): r for r in rows if r.task_type == "self_where"}
    for r in rows:
        steps: dict[str, list[str]] = {}
        for st in r.reasoning_steps:
            steps.setdefault(st.operation, []).append(st.answer)
        grounded = [_box_of(a) for a in steps.get("GND", [])]
        if not grounded or any(
            b is None or np.abs(np.subtract(b, r.answer_bbox_xyxy_norm)).max() > 1e-3 for b in grounded
        ):
            v.fail(r.sample_id, "reasoning step grounds another box than the answer")
        if steps.get("INF", [""])[-1] != r.answer_label:
            v.fail(r.sample_id, "reasoning steps infer another answer")
        if r.task_type.startswith("self"):
            where = where_of.get(pair(r))
            if where is None:
                v.fail(r.sample_id, "reasoning steps have no paired self_where row")
                continue
            facades = steps.get("PER", []) + steps.get("INT", [])
            if facades != [where.reference_object_view, where.answer_label]:
                v.fail(r.sample_id, "reasoning steps name other facades than the paired self_where row")
            continue
        side = r.answer_label.lower()
        told = set(" ".join(steps.get("PER", []) + steps.get("QUA", [])).split())
        for a, b in (("left", "right"), ("right", "left")):
            if a in side and b in told:
                v.fail(r.sample_id, f"reasoning steps place a {a} answer on the {b}")
    return v


def _box_of(answer: str) -> list[float] | None:
    try:
        box = [float(x) for x in answer.strip("[]").split(",")]
    except ValueError:
        return None
    return box if len(box) == 4 else None
