"""Quality control on every manifest row, with the reason every dropped row was dropped.

Structural checks (AirCopBench / UrbanVideo-Bench style): required fields, option count and
unique ids and labels, the answer among the options, no two options more similar than 0.85
(difflib), duplicate questions; answer-letter balance per task and difficulty, and letter x
difficulty independence, are reported (chi-square).
Every answer is then re-derived from scene geometry by a code path the generator does not use:
world-frame angles instead of camera-frame ones, ring order from camera yaw instead of labels,
the 3D box projection around the rendered box, and visibility intervals from the stored
segmentation frames (not the renderer's per-frame flags).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from skyqa.contracts import RgbView, ValidInstance
from skyqa.contracts.qa import EnvRequest, ImageRow, VideoRow
from skyqa.geometry import visibility as vis
from skyqa.sim import Intrinsics, Pose, project_box
from skyqa.vocab import directions as L

from services.qa_generator.placement import LETTERS

MAX_SIMILARITY = 0.85
BOX_SLACK = 0.04


@dataclass
class Verdict:
    reasons: dict[str, str] = field(default_factory=dict)  # sample_id -> reason

    def fail(self, sample_id: str, reason: str) -> None:
        self.reasons.setdefault(sample_id, reason)


def _structure(
    sample_id: str, labels: list[str], ids: list[str], answers: list[str], v: Verdict, text: bool = True
) -> None:
    """Option structure; similarity is checked for every pair that involves a distractor (two
    correct options of a multi-select row may share wording, e.g. one orbit with two camera modes)."""
    if len(set(ids)) != len(ids) or len(set(labels)) != len(labels):
        v.fail(sample_id, "duplicate option ids or labels")
    if not answers or any(a not in ids for a in answers):
        v.fail(sample_id, "answer not among the options")
    if not text:
        return
    correct = {lab for lab, i in zip(labels, ids, strict=True) if i in answers}
    for a, b in itertools.combinations(labels, 2):
        if {a, b} <= correct:
            continue
        if L.similarity(a, b) > MAX_SIMILARITY:
            v.fail(sample_id, "two options more similar than 0.85")


def max_similarity(rows: list[list[str]]) -> float:
    best = 0.0
    for labels in rows:
        for a, b in itertools.combinations(labels, 2):
            best = max(best, L.similarity(a, b))
    return round(best, 4)


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
    landmarks: dict[str, ValidInstance],
    requests: dict[str, EnvRequest],
    instance_masks: dict[str, np.ndarray],
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
        _structure(r.sample_id, labels, ids, [r.answer_option_id], v, text=r.task_type != "self_what")
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
    r: ImageRow, lm: ValidInstance, req: EnvRequest, masks: dict[str, np.ndarray], v: Verdict
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
    box = np.array(r.answer_bbox_xyxy_norm) * [wid, hgt, wid, hgt]
    # the fused box misses the bottom of an object (the ground cut) and unscanned parts
    slack = np.array([wid, hgt, wid, hgt]) * BOX_SLACK + 2
    if not inside or np.any(box[:2] < proj[:2] - slack[:2]) or np.any(box[2:] > proj[2:] + slack[2:]):
        v.fail(r.sample_id, "landmark box falls outside its projected 3D box")


def check_video_rows(
    rows: list[VideoRow], shares: Mapping[str, list[float] | None]
) -> tuple[Verdict, Verdict]:
    """Structure, and each visible count re-derived from its mission's segmentation frames
    (``shares``: the landmark's instance-pixel share per frame, None when unreadable). The second
    verdict holds the counts a viewer could fairly answer either way (not robust under the rule's
    margin)."""
    v, ambiguous = Verdict(), Verdict()
    for r in rows:
        if not (r.sample_id and r.video_path and r.prompt_text and r.frame_count > 0):
            v.fail(r.sample_id, "missing required field")
        if r.form == "self_instance_recognition_joint":
            ids = [o.option_id for o in r.choice_options]
            _structure(r.sample_id, [o.label for o in r.choice_options], ids, r.answer_option_ids, v)
            if not 2 <= len(ids) <= 8:
                v.fail(r.sample_id, "joint rows need 2..8 options")
            spans = sorted((b["start_sec"], b["end_sec"]) for b in r.behavior_intervals_sec)
            gaps = any(abs(float(b[0]) - float(a[1])) > 1e-6 for a, b in itertools.pairwise(spans))
            if not spans or spans[0][0] != 0 or abs(float(spans[-1][1]) - r.duration_sec) > 1e-6 or gaps:
                v.fail(r.sample_id, "behavior intervals do not tile the video")
            continue
        seen = shares.get(r.mission_id)
        if not r.fps > 0:
            v.fail(r.sample_id, "frame rate must be positive")
            continue
        if seen is None or len(seen) != r.frame_count:
            v.fail(r.sample_id, "segmentation frames missing or unreadable")
            continue
        expected = [[a / r.fps, (b + 1) / r.fps] for a, b in vis.sightings(seen, r.fps)]
        gold = r.gold_environment_answer
        ivs = gold.get("visible_intervals_sec", [])
        same = (
            isinstance(ivs, list)
            and len(ivs) == len(expected)
            and all(
                isinstance(iv, list)
                and len(iv) == 2
                and all(abs(float(x) - y) <= 0.5 / r.fps for x, y in zip(iv, e, strict=True))
                for iv, e in zip(ivs, expected, strict=True)
            )
        )
        if gold.get("visible_count") != len(expected) or not same:
            v.fail(r.sample_id, "visible count disagrees with the segmentation frames")
        elif not vis.count_is_robust(seen, r.fps):
            ambiguous.fail(r.sample_id, "visible count within the margin of the sighting rule")
    return v, ambiguous


def _box_of(answer: str) -> list[float] | None:
    try:
        box = [float(x) for x in answer.strip("[]").split(",")]
    except ValueError:
        return None
    return box if len(box) == 4 else None


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


def letter_balance(rows: list[ImageRow]) -> dict[str, dict[str, float]]:
    """Per task: gold-letter counts, chi-square uniformity p-values (pooled and per difficulty,
    ``<difficulty>_chi2_p``) and letter x difficulty independence (``difficulty_independence_p``).

    Pooling alone hides a letter that depends on the difficulty (4-way always A or C, 8-way
    always B or D is uniform in total); the per-difficulty tests and the independence test
    catch it. A difficulty's letters are those its rows offer (3-option rows have no D); the
    pooled test expects each difficulty's rows spread over its own letters, and independence
    is tested only when every difficulty offers the same letters.
    """
    # imported here, as in the blind gate: scipy.stats is about 70 MB resident for tests run
    # once per release
    from scipy.stats import chisquare

    out: dict[str, dict[str, float]] = {}
    for task in sorted({r.task_type for r in rows}):
        of_task = [r for r in rows if r.task_type == task]
        counts = Counter(r.answer_option_id for r in of_task)
        report = {x: float(counts.get(x, 0)) for x in LETTERS}
        expected = np.zeros(len(LETTERS))
        table, widths = [], set()
        for d in sorted({r.difficulty for r in of_task}):
            of_d = [r for r in of_task if r.difficulty == d]
            k = max(len(r.label_options) for r in of_d)
            widths.add(k)
            by_d = Counter(r.answer_option_id for r in of_d)
            table.append([by_d.get(x, 0) for x in LETTERS[:k]])
            expected[:k] += len(of_d) / k
            report[f"{d}_chi2_p"] = _uniform_p(table[-1])
        used = expected > 0
        observed = [counts.get(x, 0) for x in LETTERS]
        report["chi2_p"] = (
            round(float(chisquare(np.array(observed)[used], expected[used]).pvalue), 4)
            if len(of_task) >= used.sum()
            else 1.0
        )
        report["difficulty_independence_p"] = _independence_p(table) if len(widths) == 1 else 1.0
        out[task] = report
    return out


def _uniform_p(observed: list[int]) -> float:
    from scipy.stats import chisquare

    return round(float(chisquare(observed).pvalue), 4) if sum(observed) >= len(observed) else 1.0


def _independence_p(table: list[list[int]]) -> float:
    """Chi-square test of independence over the letters any row uses; 1.0 with one difficulty."""
    used = [j for j in range(len(table[0])) if any(row[j] for row in table)]
    if len(table) < 2 or len(used) < 2:
        return 1.0
    from scipy.stats import chi2_contingency

    return round(float(chi2_contingency([[row[j] for j in used] for row in table]).pvalue), 6)
