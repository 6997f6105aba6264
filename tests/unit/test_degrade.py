"""Recorded degradations: the same record gives the same pixels, and the quality levels follow
what each transform measurably did (heavier noise, blur, darkness or loss never grades higher)."""

from __future__ import annotations

import numpy as np
import pytest
from skyqa import degrade as D
from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def clean() -> np.ndarray:
    sim = BuiltinSimulator(load_scene("tiny_town"))
    rgb: np.ndarray = sim.render(Pose(0.0, -60.0, 35.0, 90.0, -35.0), CameraSpec(320, 240, 90.0)).rgb
    return rgb


@pytest.mark.parametrize("kind", D.KINDS)
def test_a_recorded_degradation_gives_the_same_pixels_again(kind: D.Kind, clean: np.ndarray) -> None:
    d = D.draw(kind, 0.6, seed=11)
    again = D.Degradation.model_validate_json(d.model_dump_json())
    assert np.array_equal(D.apply(clean, d), D.apply(clean, again))
    if kind == "none":
        assert np.array_equal(D.apply(clean, d), clean) and D.measure(clean, clean, d).quality == 4


@pytest.mark.parametrize(("kind", "limited_by"), [("noise", "fidelity"), ("blur", "sharpness"),
                                                  ("low_light", "brightness"), ("masking", "lost")])  # fmt: skip
def test_heavier_degradation_never_grades_higher_and_the_heaviest_grades_lower(
    kind: D.Kind, limited_by: str, clean: np.ndarray
) -> None:
    grades = []
    for s in (0.0, 0.25, 0.5, 0.75, 1.0):
        d = D.draw(kind, s, seed=3)
        grades.append(D.measure(clean, D.apply(clean, d), d))
    levels = [m.quality for m in grades]
    assert levels == sorted(levels, reverse=True), levels
    assert levels[0] > levels[-1]
    assert grades[-1].limited_by == limited_by


def test_noise_lowers_the_level_the_measures_say_it_should(clean: np.ndarray) -> None:
    light, heavy = D.draw("noise", 0.05, seed=1), D.draw("noise", 1.0, seed=1)
    m1, m2 = D.measure(clean, D.apply(clean, light), light), D.measure(clean, D.apply(clean, heavy), heavy)
    assert m1.fidelity_db > 32.0 > m2.fidelity_db and m1.quality > m2.quality
    assert m2.sharpness > 1.0  # noise adds high frequencies; only blur counts against sharpness


def test_masking_records_its_lost_rectangle_and_loses_exactly_it(clean: np.ndarray) -> None:
    d = D.draw("masking", 0.5, seed=5)
    x0, y0, x1, y1 = d.region
    assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1 and abs((x1 - x0) * (y1 - y0) - 0.35) < 0.05
    out = D.apply(clean, d)
    lost = D.lost_mask(d, 320, 240)
    assert (out[lost] == 0).all() and np.array_equal(out[~lost], clean[~lost])
    assert D.measure(clean, out, d).lost == pytest.approx(lost.mean(), abs=1e-4)


def test_a_strength_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match=r"strength must be 0\.\.1"):
        D.draw("blur", 1.5, seed=0)


def test_the_shipped_view_is_the_same_bytes_each_time_and_is_what_was_measured(clean: np.ndarray) -> None:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(clean).save(buf, "JPEG", quality=85)
    d = D.draw("noise", 0.7, seed=9)
    first, measured = D.degraded_jpeg(buf.getvalue(), d)
    again, _ = D.degraded_jpeg(buf.getvalue(), d)
    assert first == again
    decoded = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    shipped = np.asarray(Image.open(io.BytesIO(first)).convert("RGB"))
    assert measured == D.measure(decoded, shipped, d) and measured.quality < 4
