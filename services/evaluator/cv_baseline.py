"""Classical-CV grounding baseline: SIFT matching of the reference crop into the target image.

What it sees is what a model sees: image 1 with the landmark marked (it reads the same box as
numbers, ``reference_bbox_xyxy_norm``, and cuts it from the unmarked reference so the red frame
makes no features), the other images of the row, and the camera's field of view from the run's
render_requests sidecar (a UAV knows its own camera). It never reads gold fields.

- Box: SIFT keypoints of the crop (10 % margin, upscaled to >= 128 px) matched into the target
  with Lowe's ratio test (0.75); a RANSAC homography (4 px) with >= 8 inliers that maps the box
  to a convex quadrilateral of 1/9 to 9 times its area gives the answer box. Flat-shaded
  renders often leave too few features, so the fallback is colour: hue-saturation ratio-
  histogram back-projection (Swain & Ballard) of the crop into the target, threshold at 0.3 of
  the peak, closing, and the blob with the most support. Neither: the ``text_prior`` box.
- Decisions: for ``env_where`` and ``env_how`` the box centre becomes horizontal and vertical
  angles through the pinhole model and the benchmark's documented label rules
  (``skyqa.vocab.directions.env_direction`` / ``env_action``) pick the option.
- ``self_where`` and ``self_what`` ask which facade or future view, which matching alone does
  not decide: the option comes from ``text_prior`` (the box is still matched), as do video rows.
  Per-task numbers in the report show where matching helps and where it defers.
- AirCopBench-style Quality Assessment: a no-reference estimate of the asked UAV's image against
  the group's other views (:mod:`services.evaluator.quality_cv`); the other collaboration
  types defer to ``text_prior``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import cv2
import numpy as np
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts.collab import CollabRow
from skyqa.contracts.qa import ImageRow
from skyqa.degrade import LEVELS
from skyqa.families import release_files
from skyqa.vocab import directions as L

from services.evaluator.baselines import TextPrior
from services.evaluator.quality_cv import estimate_quality
from services.evaluator.questions import Question

RATIO = 0.75
MIN_HOMOGRAPHY = 8
MIN_INLIERS = 8
MIN_CROP_SIDE = 128
HS_CHANNELS, HS_BINS, HS_RANGE = [0, 1], [30, 16], [0, 180, 0, 256]
BP_THRESHOLD = 0.3


def _decode(data: bytes) -> np.ndarray:
    img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ValueError("not a decodable image")
    return img


def locate(
    ref: np.ndarray, box: list[float], target: np.ndarray
) -> tuple[list[float] | None, dict[str, Any]]:
    """The reference box's landmark in ``target`` (BGR images): SIFT first, then colour."""
    found, stats = match_features(
        cv2.cvtColor(ref, cv2.COLOR_BGR2GRAY), box, cv2.cvtColor(target, cv2.COLOR_BGR2GRAY)
    )
    if found is None:
        found = backproject(ref, box, target)
        if found is not None:
            stats["cv_method"] = "backprojection"
    return found, stats


def backproject(ref: np.ndarray, box: list[float], target: np.ndarray) -> list[float] | None:
    """Swain-Ballard ratio-histogram back-projection of the crop's hue-saturation into the
    target; the connected blob with the most support is the landmark."""
    h, w = ref.shape[:2]
    x0, y0 = int(box[0] * w), int(box[1] * h)
    x1, y1 = int(box[2] * w) + 1, int(box[3] * h) + 1
    ref_hsv = cv2.cvtColor(ref, cv2.COLOR_BGR2HSV)
    tgt_hsv = cv2.cvtColor(target, cv2.COLOR_BGR2HSV)
    obj = cv2.calcHist([ref_hsv[y0:y1, x0:x1]], HS_CHANNELS, None, HS_BINS, HS_RANGE)
    scene = cv2.calcHist([tgt_hsv], HS_CHANNELS, None, HS_BINS, HS_RANGE)
    if obj.sum() == 0:
        return None
    # colours common in the whole target (ground, sky) are down-weighted by the ratio
    ratio = np.minimum(obj / obj.sum() / np.maximum(scene / scene.sum(), 1e-6), 50.0)
    ratio = (ratio / max(float(ratio.max()), 1e-9) * 255).astype(np.float32)
    support = cv2.GaussianBlur(cv2.calcBackProject([tgt_hsv], HS_CHANNELS, ratio, HS_RANGE, 1), (9, 9), 0)
    if support.max() == 0:
        return None
    _, mask = cv2.threshold(support, BP_THRESHOLD * float(support.max()), 255, cv2.THRESH_BINARY)
    mask = cv2.morphologyEx(mask.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((15, 15), np.uint8))
    n, lab, st, _ = cv2.connectedComponentsWithStats(mask)
    if n <= 1:
        return None
    best = 1 + int(np.argmax([float(support[lab == i].sum()) for i in range(1, n)]))
    x, y, bw, bh, _ = st[best]
    th, tw = target.shape[:2]
    return [round(x / tw, 4), round(y / th, 4), round((x + bw) / tw, 4), round((y + bh) / th, 4)]


def match_features(
    ref: np.ndarray, box: list[float], target: np.ndarray
) -> tuple[list[float] | None, dict[str, Any]]:
    """SIFT + RANSAC homography of the crop into ``target`` (grayscale), when it is trusted."""
    h, w = ref.shape
    x0, y0, x1, y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
    mx, my = 0.1 * (x1 - x0), 0.1 * (y1 - y0)
    cx0, cy0 = int(max(0, x0 - mx)), int(max(0, y0 - my))
    cx1, cy1 = int(min(w, x1 + mx + 1)), int(min(h, y1 + my + 1))
    crop = ref[cy0:cy1, cx0:cx1]
    stats: dict[str, Any] = {"cv_matches": 0, "cv_inliers": 0, "cv_method": "none"}
    if crop.size == 0:
        return None, stats
    scale = max(1.0, MIN_CROP_SIDE / max(1, min(crop.shape)))
    if scale > 1:
        crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_CUBIC)
    sift = cv2.SIFT.create()
    kp1, d1 = sift.detectAndCompute(crop, None)
    kp2, d2 = sift.detectAndCompute(target, None)
    if d1 is None or d2 is None or len(kp1) < 2 or len(kp2) < 2:
        return None, stats
    pairs = cv2.BFMatcher(cv2.NORM_L2).knnMatch(d1, d2, k=2)
    good = [p[0] for p in pairs if len(p) == 2 and p[0].distance < RATIO * p[1].distance]
    stats["cv_matches"] = len(good)
    if len(good) < MIN_HOMOGRAPHY:
        return None, stats
    src = np.array([kp1[m.queryIdx].pt for m in good], dtype=np.float32) / scale + np.array(
        [cx0, cy0], dtype=np.float32
    )
    dst = np.array([kp2[m.trainIdx].pt for m in good], dtype=np.float32)
    th, tw = target.shape
    # RANSAC samples from OpenCV's per-thread RNG, whose state depends on every earlier call in
    # the thread: without a reseed a resumed run (other items cached) answers differently
    cv2.setRNGSeed(0)
    hom, mask = cv2.findHomography(src, dst, cv2.RANSAC, 4.0)
    inliers = int(mask.sum()) if hom is not None else 0
    stats["cv_inliers"] = inliers
    if hom is None or inliers < MIN_INLIERS:
        return None, stats
    corners = np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], dtype=np.float32).reshape(-1, 1, 2)
    pts = cv2.perspectiveTransform(corners, hom).reshape(-1, 2) / (tw, th)
    (bx0, by0), (bx1, by1) = pts.min(axis=0), pts.max(axis=0)
    ratio = (bx1 - bx0) * (by1 - by0) / max(1e-9, (box[2] - box[0]) * (box[3] - box[1]))
    # a homography that folds or blows the box up is a wrong fit, not a far-away landmark
    if not cv2.isContourConvex(pts.astype(np.float32).reshape(-1, 1, 2)) or not 1 / 9 <= ratio <= 9:
        return None, stats
    stats["cv_method"] = "homography"
    return [round(float(np.clip(v, 0, 1)), 4) for v in (bx0, by0, bx1, by1)], stats


class CVBaseline:
    """Classical grounding with the text prior for the decisions matching cannot make."""

    def __init__(self, questions: list[Question], store: BlobStore, run_id: str, scene_id: str) -> None:
        self.name = "cv_grounding"
        # part of the cache key: bump ``implementation`` whenever this code's answers change
        self.params = {"implementation": 3, "ratio": RATIO, "min_inliers": MIN_INLIERS}
        self.conditions = frozenset({"full", "circular"})
        self.store = store
        self.root = keys.run_prefix(run_id)
        self.prior = TextPrior(questions)
        sidecar = json.loads(store.get(release_files(run_id, scene_id)["render_requests"]))
        self.fov = {r["request_id"]: float(r["fov_deg"]) for r in sidecar["env_requests"]}
        # CircularEval asks the same images once per rotation: match them once
        self._found: dict[tuple[str, str, str], tuple[list[float] | None, dict[str, Any]]] = {}

    def _quality(self, row: CollabRow, prior_text: str) -> tuple[str, dict[str, Any]]:
        """The no-reference estimate of the asked UAV's image, against the group's other views."""
        k = row.image_labels.index(row.uav)
        images = [self._image(p) for p in row.images]
        level = LEVELS[estimate_quality(images[k], images[:k] + images[k + 1 :])]
        by_label = {o.label: o.option_id for o in row.options}
        if level not in by_label:
            return prior_text, {"status": "ok", "cv_method": "quality_estimate_not_an_option"}
        return json.dumps({"answer_option_id": by_label[level]}), {
            "status": "ok",
            "cv_method": "quality_estimate",
        }

    def _image(self, path: str) -> np.ndarray:
        return _decode(self.store.get(f"{self.root}/{path}"))

    async def answer(self, q: Question, condition: str = "full") -> tuple[str, dict[str, Any]]:
        prior_text, _ = await self.prior.answer(q, condition)
        row = q.row
        if isinstance(row, CollabRow) and row.task == "quality_assessment":
            return self._quality(row, prior_text)
        if not isinstance(row, ImageRow):
            return prior_text, {"status": "ok", "cv_method": "deferred"}
        body = json.loads(prior_text)
        by_label = {o.label: o.option_id for o in row.label_options}
        by_id = {o.option_id: o.label for o in row.label_options}
        if row.task_type == "self_what":
            # options name candidates "Image k": the k-th image of the row
            target_path = row.images[int(by_id[body["answer_option_id"]].split()[-1]) - 1]
        else:
            target_path = row.images[1]
        key = (row.reference_image, json.dumps(row.reference_bbox_xyxy_norm), target_path)
        target = self._image(target_path)
        if key not in self._found:
            ref = self._image(row.reference_image)
            self._found[key] = await asyncio.to_thread(locate, ref, row.reference_bbox_xyxy_norm, target)
        box, found = self._found[key]
        stats = dict(found)
        if box is not None:
            body["bbox_xyxy_norm"] = box
            if row.task_type in ("env_where", "env_how"):
                fov = self.fov[str(row.metadata["env_request_id"])]
                b = L.box_bearing(box, fov, target.shape[1], target.shape[0])
                # the bare rules: the margins keep golds fair, an estimate answers regardless
                if row.task_type == "env_where":
                    label = L.env_direction(b, row.difficulty, margin=0.0)
                else:
                    label = L.env_action(b, row.difficulty, margin=0.0, dominance_margin=1.0)
                if label in by_label:
                    body["answer_option_id"] = by_label[label]
                    stats["cv_decided"] = True
        return json.dumps(body), {"status": "ok", **stats}
