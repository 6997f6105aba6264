"""Reviewed landmarks no release can include: known from the review alone, the same before and
after the views are measured at the shipped size, and skipped by every later stage; and twins
(one description, two landmarks), which are not held but looked for in each row's media."""

from __future__ import annotations

import numpy as np
import pytest
from partial_models import partial_model
from skyqa.contracts import RgbView, ValidInstance
from skyqa.families import RELEASED
from skyqa.families.held import held_landmarks
from skyqa.families.twins import shows, twins
from skyqa.v1 import render_pb2

from services.qa_generator.views import measured

pytestmark = pytest.mark.unit

RING = ["front", "front_right", "right", "back_right", "back", "back_left", "left", "front_left"]


def view(direction: str, valid: bool = True, box: list[int] | None = None) -> RgbView:
    return partial_model(
        RgbView,
        view_id=f"view_{direction}",
        mode="orbit",
        view_direction=direction,
        is_valid=valid,
        bbox_2d_valid=valid,
        bbox_2d_xyxy=box or [10, 10, 50, 50],
        bbox_2d_image_size=[320, 240],
        visible_pixels=1600,
        rendered_instance_id=7,
    )


def landmark(instance_id: str, description: str, directions: list[str]) -> ValidInstance:
    views = [view(d) for d in directions]
    return partial_model(
        ValidInstance,
        instance_id=instance_id,
        class_name="building",
        landmark_description=description,
        rgb_views=views,
        main_view=views[0].view_id,
        valid_view_ids=[v.view_id for v in views],
    )


def test_a_shared_description_holds_nothing_and_names_each_landmarks_twins() -> None:
    """The reference box says which landmark a row means; each twin's rendered id is what its
    checks look for in the row's media."""
    a = landmark("1_1", "Red tower,  about 20 m tall", RING)
    b = landmark("1_2", "red tower, about 20 m tall", RING)
    c = landmark("1_3", "blue hall", RING)
    b.rgb_views = [v.model_copy(update={"rendered_instance_id": 9}) for v in b.rgb_views]
    assert held_landmarks([a, b, c], RELEASED) == {}
    assert twins([a, b, c]) == {"1_1": frozenset({9}), "1_2": frozenset({7})}


def test_an_image_shows_a_twin_from_a_share_the_sighting_margin_could_call_visible() -> None:
    instance = np.zeros((100, 100), np.uint32)
    instance[50:70, 50:70] = 7  # the landmark: 4 %
    instance[:1, :14] = 9  # 14 px of 10,000: 0.14 %, above 0.2 % / 1.5
    assert shows(instance, {9}, 7) and not shows(instance, {8}, 7) and not shows(instance, set(), 7)
    instance[:1, 7:] = 0  # 0.07 %
    assert not shows(instance, {9}, 7)
    # or as large as the landmark, both small
    instance[50:70, 50:70] = 0
    instance[50:52, 50:53] = 7
    assert shows(instance, {9}, 7)
    instance[50:52, 50:54] = 7
    assert not shows(instance, {9}, 7)


def test_the_image_family_holds_landmarks_it_can_never_plan() -> None:
    few = landmark("2_1", "a", ["front", "right", "back", "left"])
    # five usable views but only one of them cardinal: no 4-way reference and target pair
    no_pair = landmark("2_2", "b", ["front", "front_right", "back_right", "back_left", "front_left"])
    fine = landmark("2_3", "c", ["front", "right", "back", "left", "front_left"])
    invalid = landmark("2_4", "d", RING)
    invalid.rgb_views = [view(d, valid=d in ("front", "back")) for d in RING]
    assert held_landmarks([few, no_pair, fine, invalid], RELEASED) == {
        "2_1": "4 usable orbit views; self_what needs at least 5",
        "2_2": "no reference and target pair in the 4way label space",
        "2_4": "2 usable orbit views; self_what needs at least 5",
    }


def test_measuring_the_views_at_the_shipped_size_changes_nothing() -> None:
    """The mission planner decides before the QA stage's views step measures the views again at
    the shipped size, the QA stage after it: both must hold the same landmarks."""
    lms = [
        landmark("3_1", "a", ["front", "right", "back", "left"]),
        landmark("3_2", "b", RING),
        landmark("3_3", "b", RING),
        landmark("3_4", "c", RING),
    ]
    before = held_landmarks(lms, RELEASED)
    for lm in lms:
        shipped = []
        for v in lm.rgb_views:
            result = render_pb2.ViewResult(view_id=v.view_id)
            result.instances.add(instance_id=v.rendered_instance_id, pixels=1, x0=0, y0=0, x1=1, y1=1)
            shipped.append(measured(v, result, 640, 480))
        lm.rgb_views = shipped
    assert [v.bbox_2d_image_size for v in lms[0].rgb_views] == [[640, 480]] * 4
    assert held_landmarks(lms, RELEASED) == before and set(before) == {"3_1"}
