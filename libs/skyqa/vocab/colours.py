"""Colour words a viewer would use for a measured colour (shared by the families that name
objects by colour)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from skyqa.sim.classes import COLOURS

ACHROMATIC = 0.2  # (max - min) / max of an rgb below this is a grey
# palette colours a viewer tells apart only by shade, named by their family
HUE_FAMILY = {"dark red": "red", "dark green": "green", "light blue": "blue", "beige": "yellow"}


def coarse_colour(rgb: NDArray[np.float64]) -> str:
    """The greys collapse to white, gray or black by brightness; other colours take the hue
    family of the simulator's palette nearest in chromaticity (``rgb`` in 0..1, sunlit)."""
    top = float(rgb.max())
    if top <= 0.0 or (top - float(rgb.min())) < ACHROMATIC * top:
        return "white" if top >= 0.6 else "gray" if top >= 0.25 else "black"
    hue = rgb / top
    chromatic = {n: np.asarray(c) for n, c in COLOURS.items() if max(c) - min(c) >= ACHROMATIC * max(c)}
    name = min(chromatic, key=lambda n: float(np.sum((chromatic[n] / chromatic[n].max() - hue) ** 2)))
    return HUE_FAMILY.get(name, name)


COLOUR_MARGIN = 0.05  # how far from a word's edge a colour must be to be named without doubt


def hue_distances(rgb: NDArray[np.float64]) -> dict[str, float]:
    """Each hue family's distance in chromaticity from ``rgb`` (its nearest palette colour)."""
    hue = rgb / float(rgb.max())
    best: dict[str, float] = {}
    for n, c in COLOURS.items():
        if max(c) - min(c) < ACHROMATIC * max(c):
            continue
        word = HUE_FAMILY.get(n, n)
        d = float(np.sqrt(np.sum((np.asarray(c) / max(c) - hue) ** 2)))
        best[word] = min(best.get(word, d), d)
    return best


def clear_colour(rgb: NDArray[np.float64]) -> str | None:
    """:func:`coarse_colour`'s word when the colour is clear of every edge between words by
    ``COLOUR_MARGIN`` (greyness, the grey brightness cut-offs, the nearest hue against the next
    hue family), else None: two viewers could name it differently."""
    top = float(rgb.max())
    if top <= 0.0:
        return "black"
    chroma = (top - float(rgb.min())) / top
    if abs(chroma - ACHROMATIC) < COLOUR_MARGIN:
        return None
    if chroma < ACHROMATIC:
        if min(abs(top - 0.6), abs(top - 0.25)) < COLOUR_MARGIN:
            return None
        return coarse_colour(rgb)
    ranked = sorted(hue_distances(rgb).values())
    if len(ranked) > 1 and ranked[1] - ranked[0] < COLOUR_MARGIN:
        return None
    return coarse_colour(rgb)


# --- naming a colour with a perceptual confidence (the labeller's colour words) -------------

# A palette word and the coarser word a viewer would still accept for it: shades of one hue
# (light/dark, silver among the greys) are where viewers and the labeller disagree, the hue is
# not. White, black, beige, brown, orange, yellow and teal have no coarser word that stays true.
SHADE_OF = {
    "light gray": "gray",
    "dark gray": "gray",
    "silver": "gray",
    "dark red": "red",
    "dark green": "green",
    "light blue": "blue",
}
# a lead of the best colour name over the next below this (CIELAB ΔE, averaged over the
# object's pixels) is too small to stake a word on: about one just-noticeable difference
# (ΔE ≈ 2.3), less than what JPEG, haze and shading move a pixel
NAMING_MARGIN_DE = 2.0


def family_of(name: str) -> str:
    """The coarser word for a palette name (itself when it has none)."""
    return SHADE_OF.get(name, name)


def srgb_to_lab(rgb: NDArray[np.floating]) -> NDArray[np.float64]:
    """CIE L*a*b* (D65) of display colours ``rgb`` in 0..1 (shape ``(..., 3)``), the space in
    which equal distances look about equally different to a person."""
    c = np.clip(np.asarray(rgb, dtype=np.float64), 0.0, 1.0)
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    m = np.array(
        [
            [0.4124564, 0.3575761, 0.1804375],
            [0.2126729, 0.7151522, 0.0721750],
            [0.0193339, 0.1191920, 0.9503041],
        ]
    )
    xyz = lin @ m.T / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    lab: NDArray[np.float64] = np.stack(
        [116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1
    )
    return lab


@dataclass(frozen=True)
class ColourCall:
    """A colour word and how sure it is. ``word`` is the palette name when it beats every other
    name by ``margin``; the coarser family word when only the family is that clear; None when
    not even the family is (the description then names no colour)."""

    word: str | None
    best: str  # the palette name that fits best, used or not
    margin: float  # ΔE by which ``best`` beats the runner-up name
    family_margin: float  # ΔE by which ``best`` beats the best name of another family

    @property
    def coarse(self) -> bool:
        return self.word is not None and self.word != self.best


def call_from_costs(costs: dict[str, float], margin: float = NAMING_MARGIN_DE) -> ColourCall:
    """The word for per-name costs (lower fits better, in ΔE): the exact name, its family's
    word, or no word, by how far the best name is ahead of the next one (:class:`ColourCall`)."""
    if not costs:
        raise ValueError("no colour names to choose from")
    ranked = sorted(costs, key=lambda n: costs[n])
    best = ranked[0]
    fam = family_of(best)
    others = [costs[n] for n in ranked[1:]]
    foreign = [costs[n] for n in ranked[1:] if family_of(n) != fam]
    lead = (min(others) if others else np.inf) - costs[best]
    family_lead = (min(foreign) if foreign else np.inf) - costs[best]
    word = best if lead >= margin else fam if family_lead >= margin else None
    return ColourCall(word, best, float(lead), float(family_lead))


def call_colour(rgb: NDArray[np.floating], margin: float = NAMING_MARGIN_DE) -> ColourCall:
    """:func:`call_from_costs` for one displayed colour against the palette, by CIELAB distance."""
    lab = srgb_to_lab(np.asarray(rgb, dtype=np.float64))
    costs = {n: float(np.linalg.norm(lab - srgb_to_lab(np.asarray(c)))) for n, c in COLOURS.items()}
    return call_from_costs(costs, margin)
