"""Polygon orbits in words a person watching the video would use (skyqa issue #43): the options
read "square orbit counterclockwise, 7 sides", an edge count a person reads as the shape's
sides (a square has 4). UAV-DualCog walks its square or triangle for ``edge_count`` edges, one
edge per step; the options say how many edges and how far around that is."""

from __future__ import annotations

import numpy as np
import pytest
from partial_models import partial_model
from skyqa.contracts.qa import Option, VideoRow
from skyqa.families.dualcog_video import checks
from skyqa.vocab.behaviors import element_label, laps, load_library

pytestmark = pytest.mark.unit


def square(edges: int, mode: str = "landmark_track") -> str:
    return element_label("square_orbit", mode, {"edge_count": edges, "direction": "ccw"})


def test_a_square_flown_for_seven_edges_is_one_and_three_quarter_laps() -> None:
    label = square(7)
    assert label.startswith("square orbit counterclockwise along 7 edges (1¾ times around)")
    assert "sides" not in label and "legs" not in label
    assert square(4).startswith("square orbit counterclockwise along 4 edges (once around)")
    assert square(2).startswith("square orbit counterclockwise along 2 edges (½ of the way around)")
    tri = element_label("triangular_orbit", "look_forward", {"edge_count": 5, "direction": "cw"})
    assert tri.startswith("triangle orbit clockwise along 5 edges (1⅔ times around)")


@pytest.mark.parametrize(
    ("edges", "sides", "words"), [(8, 4, "2 times around"), (3, 4, "¾ of the way around")]
)
def test_laps_are_edges_over_the_polygons_sides(edges: int, sides: int, words: str) -> None:
    assert laps(edges, sides) == words
    with pytest.raises(ValueError, match="0 edges"):
        laps(0, 4)


def test_every_polygon_orbit_the_library_samples_states_its_laps_truly() -> None:
    lib = load_library()
    rng = np.random.default_rng(3)
    for name in lib.set_names("atomic") + lib.set_names("composite"):
        for step in lib.sets[name].steps:
            for _ in range(20):
                label = element_label(step.element, step.camera_mode, lib.sample_step(step, rng))
                assert checks.polygon_laps_agree(label), label


def test_qc_refuses_a_polygon_orbit_worded_as_sides_or_with_wrong_laps() -> None:
    camera = "with the camera locked on the landmark"
    bad = [
        f"square orbit counterclockwise, 7 sides {camera}",
        f"square orbit counterclockwise, 7 legs {camera}",
        f"square orbit counterclockwise along 7 edges (2 times around) {camera}",
        f"triangle orbit clockwise along 4 edges (1¼ times around) {camera}",
    ]
    assert not any(checks.polygon_laps_agree(b) for b in bad)
    assert checks.polygon_laps_agree(f"circle clockwise 180° {camera}")  # not a polygon orbit
    for label, fails in ((square(7), False), (bad[0], True)):
        row = partial_model(
            VideoRow,
            sample_id="j",
            form="self_instance_recognition_joint",
            video_path="m.mp4",
            prompt_text="Which behaviors does the drone perform?",
            frame_count=10,
            duration_sec=1.0,
            choice_options=[Option(option_id="A", label=label), Option(option_id="B", label="comet loop")],
            answer_option_ids=["A"],
            behavior_intervals_sec=[{"start_sec": 0.0, "end_sec": 1.0}],
        )
        verdict, _ = checks.check_video_rows([row], {})
        assert (verdict.reasons.get("j") == checks.MISCOUNTED) is fails, verdict.reasons
