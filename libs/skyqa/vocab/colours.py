"""Colour words a viewer would use for a measured colour (shared by the families that name
objects by colour)."""

from __future__ import annotations

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
