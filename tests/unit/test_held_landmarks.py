"""Reviewed landmarks no release can include: known from the review alone, the same before and
after the views are measured at the shipped size, and skipped by every later stage."""

from __future__ import annotations

import pytest
from partial_models import partial_model
from skyqa.contracts import RgbView, ValidInstance
from skyqa.families import RELEASED
from skyqa.families.held import held_landmarks
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
        valid_view_ids=[v.view_id for v in views],
    )


def test_a_shared_description_holds_every_landmark_it_fits() -> None:
    a = landmark("1_1", "Red tower,  about 20 m tall", RING)
    b = landmark("1_2", "red tower, about 20 m tall", RING)
    c = landmark("1_3", "blue hall", RING)
    held = held_landmarks([a, b, c], RELEASED)
    assert held == {
        "1_1": "description shared with 1 other landmark(s): 'red tower, about 20 m tall'",
        "1_2": "description shared with 1 other landmark(s): 'red tower, about 20 m tall'",
    }


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
    assert held_landmarks(lms, RELEASED) == before and set(before) == {"3_1", "3_2", "3_3"}
