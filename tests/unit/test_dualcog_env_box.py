"""The environment rows' box check: the rendered landmark box must lie inside the projection of
the landmark's 3D box, which the fused points leave short below (a tree's crown without its
trunk), so the check reads the box from the ground the landmark stands on."""

from __future__ import annotations

import numpy as np
import pytest
from partial_models import partial_model
from rows import image_row
from skyqa.contracts import Bbox3D, ValidInstance
from skyqa.contracts.qa import EnvRequest, Option
from skyqa.families.dualcog_image.checks import _recheck_env
from skyqa.families.structure import Verdict
from skyqa.sim import Intrinsics, Pose, project_box

pytestmark = pytest.mark.unit

OUTSIDE = "landmark box falls outside its projected 3D box"
W, H, FOV = 320, 240, 72.0
POSE = [0.0, -30.0, 3.0, 90.0, 0.0, 0.0]  # 30 m south of the tree, looking north
CROWN = ([-2.0, -2.0, 4.0], [2.0, 2.0, 6.0])  # what the LiDAR fused: no trunk
STANDING = ([-2.0, -2.0, 0.0], [2.0, 2.0, 6.0])


def _check(mask_box: tuple[list[float], list[float]], extent: list[float]) -> str | None:
    """The reason the environment re-check fails a row whose mask fills ``mask_box``."""
    k = Intrinsics.from_fov(W, H, FOV)
    px, _ = project_box(np.array(mask_box[0]), np.array(mask_box[1]), Pose(*POSE), k)
    x0, y0, x1, y1 = (round(float(v)) for v in px)
    mask = np.zeros((H, W), np.uint32)
    mask[y0 + 1 : y1 - 1, x0 + 1 : x1 - 1] = 5
    ys, xs = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    box = [xs[0] / W, ys[0] / H, (xs[-1] + 1) / W, (ys[-1] + 1) / H]
    lm = partial_model(
        ValidInstance,
        instance_id="18_1",
        valid_view_ids=["v"],
        bbox_3d=partial_model(Bbox3D, min=CROWN[0], max=CROWN[1], extent=extent),
    )
    req = partial_model(
        EnvRequest,
        request_id="env0",
        source_view_id="v",
        fov_deg=FOV,
        pose=POSE,
        # where the mask is, so the answer agrees with it and only the box check can fail
        target_center_3d=[(a + b) / 2 for a, b in zip(*mask_box, strict=True)],
        target_aabb=[CROWN[0], CROWN[1]],
    )
    options = [
        Option(option_id=x, label=lab)
        for x, lab in zip("ABCD", ("Front", "Left", "Right", "Back"), strict=True)
    ]
    row = image_row(
        landmark_id="18_1",
        label_options=options,
        answer_option_id="A",
        answer_label="Front",
        answer_bbox_xyxy_norm=box,
    )
    v = Verdict()
    _recheck_env(row, lm, req, {"env0": mask}, v)
    return v.reasons.get(row.sample_id)


def test_a_tree_whose_trunk_the_fusion_missed_passes_from_the_ground_it_stands_on() -> None:
    assert _check(STANDING, extent=[4.0, 4.0, 6.0]) is None
    # without the height above the ground, the crown's box is all the check has
    assert _check(STANDING, extent=[]) == OUTSIDE


def test_a_box_wider_than_the_landmark_or_above_it_still_fails() -> None:
    assert _check(([-6.0, -2.0, 0.0], [6.0, 2.0, 6.0]), extent=[4.0, 4.0, 6.0]) == OUTSIDE
    assert _check(([-2.0, -2.0, 4.0], [2.0, 2.0, 9.0]), extent=[4.0, 4.0, 6.0]) == OUTSIDE
