"""The labeller's colour words: a perceptual margin decides between a shade, its family word and
no word; the drawn box is found among red objects; two-tone objects get no single word."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageDraw
from skyqa.models._colour import figure_and_ring, measure_colour, red_box
from skyqa.sim.classes import COLOURS
from skyqa.sim.daylight import AMBIENT, SUNLIGHT
from skyqa.vocab.colours import NAMING_MARGIN_DE, call_colour, call_from_costs, family_of, srgb_to_lab

from services.labeller.prompt import annotate

pytestmark = pytest.mark.unit

GRASS = (70, 120, 50)


def test_lab_of_known_colours() -> None:
    assert np.allclose(srgb_to_lab(np.array([1.0, 1.0, 1.0])), [100.0, 0.0, 0.0], atol=0.05)
    assert np.allclose(srgb_to_lab(np.array([0.0, 0.0, 0.0])), [0.0, 0.0, 0.0], atol=0.05)
    red = srgb_to_lab(np.array([1.0, 0.0, 0.0]))
    assert np.allclose(red, [53.24, 80.09, 67.20], atol=0.1)


def test_clear_lead_names_the_shade() -> None:
    call = call_from_costs({"dark gray": 3.0, "gray": 3.0 + NAMING_MARGIN_DE + 0.1, "teal": 20.0})
    assert call.word == "dark gray" and not call.coarse


def test_close_shades_fall_back_to_their_family_word() -> None:
    # silver and light gray are a hair apart, every other family far: "gray" is still sure
    call = call_from_costs({"silver": 4.0, "light gray": 4.5, "gray": 5.0, "white": 12.0, "blue": 30.0})
    assert call.word == "gray" and call.coarse and call.best == "silver"
    assert call.margin == pytest.approx(0.5) and call.family_margin == pytest.approx(8.0)


def test_close_families_abstain() -> None:
    # dark green against dark gray: not even the hue is sure, so no word at all
    call = call_from_costs({"dark green": 6.0, "dark gray": 6.0 + NAMING_MARGIN_DE / 2, "red": 30.0})
    assert call.word is None and call.best == "dark green"


def test_margin_is_the_threshold() -> None:
    costs = {"red": 2.0, "dark red": 4.0, "orange": 9.0}
    assert call_from_costs(costs, margin=1.9).word == "red"
    assert call_from_costs(costs, margin=2.1).word == "red"  # family word: dark red is a red
    assert call_from_costs(costs, margin=2.1).best == "red"
    assert call_from_costs(costs, margin=7.1).word is None
    with pytest.raises(ValueError, match="no colour names"):
        call_from_costs({})


def test_palette_colours_name_themselves_and_families() -> None:
    for name, rgb in COLOURS.items():
        call = call_colour(np.asarray(rgb))
        assert call.best == name and call.word in (name, family_of(name))
    assert family_of("silver") == "gray" and family_of("light blue") == "blue" and family_of("teal") == "teal"
    # halfway between white and silver (a gray): neither the shade nor the family is sure
    assert call_colour((np.asarray(COLOURS["white"]) + np.asarray(COLOURS["silver"])) / 2).word is None


def _annotated(draw_fn: object, box: list[int], size: tuple[int, int] = (320, 240)) -> np.ndarray:
    img = Image.new("RGB", size, GRASS)
    assert callable(draw_fn)
    draw_fn(ImageDraw.Draw(img))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return np.asarray(Image.open(io.BytesIO(annotate(buf.getvalue(), box, "front"))).convert("RGB"))


def test_red_box_ignores_red_objects_elsewhere() -> None:
    def red_car_elsewhere(d: ImageDraw.ImageDraw) -> None:
        d.rectangle([10, 150, 70, 190], fill=(214, 38, 33))
        d.rectangle([120, 80, 200, 180], fill=(90, 90, 95))

    x0, y0, x1, y1 = red_box(_annotated(red_car_elsewhere, [100, 60, 220, 200])) or (0, 0, 0, 0)
    assert 100 < x0 < 110 and 210 < x1 < 220 and 60 < y0 < 70 and 190 < y1 < 200


def test_red_box_around_a_red_object_and_a_thin_one() -> None:
    def red_inside(d: ImageDraw.ImageDraw) -> None:
        d.rectangle([104, 64, 216, 196], fill=(214, 38, 33))
        d.rectangle([10, 150, 40, 170], fill=(214, 38, 33))

    box = red_box(_annotated(red_inside, [100, 60, 220, 200]))
    assert box is not None and box[0] > 100 and box[2] < 220
    # a lamp post's box is all line: found, with nothing inside, and no colour read from it

    def red_car(d: ImageDraw.ImageDraw) -> None:
        d.rectangle([10, 150, 70, 190], fill=(214, 38, 33))

    thin = _annotated(red_car, [150, 60, 156, 200])
    box = red_box(thin)
    assert box is not None and box[2] - box[0] < 4
    inside, _, ratio = figure_and_ring(thin)
    assert len(inside) == 0 and ratio > 5


def _object(parts: list[tuple[str, float, float]]) -> np.ndarray:
    """An object of vertical bands (albedo, share of the width, sun ``lam``) on grass, boxed."""

    def draw(d: ImageDraw.ImageDraw) -> None:
        x = 110
        for name, share, lam in parts:
            rgb = np.asarray(COLOURS[name]) * (AMBIENT + SUNLIGHT * lam) * 255
            w = round(100 * share)
            d.rectangle([x, 70, x + w - 1, 190], fill=tuple(int(v) for v in rgb))
            x += w

    return _annotated(draw, [106, 66, 214, 194])


@pytest.mark.parametrize(
    ("albedo", "lams", "words"),
    [
        ("dark red", [0.0, 0.57], {"dark red", "red"}),
        ("teal", [0.0, 0.57], {"teal"}),
        ("white", [0.3, 0.8], {"white"}),
        ("blue", [0.2, 0.82], {"blue"}),
    ],
)
def test_one_coloured_object_is_named_under_shading(albedo: str, lams: list[float], words: set[str]) -> None:
    arr = _object([(albedo, 1 / len(lams), lam) for lam in lams])
    inside, ring, _ = figure_and_ring(arr)
    measured = measure_colour([(inside, ring)])
    assert measured is not None and measured.call().word in words


def test_two_tone_object_gets_no_single_word() -> None:
    # a red cab before a silver box: either word would send a person to the wrong part
    arr = _object([("red", 0.4, 0.57), ("silver", 0.6, 0.57)])
    inside, ring, _ = figure_and_ring(arr)
    measured = measure_colour([(inside, ring)])
    assert measured is not None and measured.two_tone and measured.call().word is None
    assert measure_colour([]) is None
