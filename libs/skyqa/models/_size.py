"""What an object is likely to be from its measured size: nearest typical urban object.

Typical real-world dimensions (length >= width, height, in metres) of the objects aerial
landmark benchmarks ask about. Distance is taken between logarithms, so a car twice too long
is as far from "car" as a bus half too long is from "bus". Green objects lean towards
vegetation. This is a weak prior: a labeller with eyes does better; the bench reports how often
it is right.
"""

from __future__ import annotations

import math
import re

SIZE = re.compile(
    r"about\s+([0-9.]+)\s*m\s+long,\s*([0-9.]+)\s*m\s+wide\s+and\s+([0-9.]+)\s*m\s+tall", re.IGNORECASE
)
# (category, subcategory, (length, width, height))
TYPICAL: tuple[tuple[str, str, tuple[float, float, float]], ...] = (
    ("building", "office tower", (24.0, 20.0, 60.0)),
    ("building", "residential building", (20.0, 16.0, 22.0)),
    ("building", "house", (10.0, 8.0, 8.0)),
    ("vehicle", "car", (4.5, 1.8, 1.5)),
    ("vehicle", "truck", (7.6, 2.5, 3.4)),
    ("vehicle", "bus", (11.0, 2.6, 3.2)),
    ("public_facility", "street lamp", (2.6, 0.4, 7.0)),
    ("public_facility", "bus shelter", (4.0, 1.8, 2.8)),
    ("urban_landscape", "fountain", (10.0, 10.0, 2.8)),
    ("urban_landscape", "statue", (3.0, 3.0, 5.0)),
    ("transport_infrastructure", "bridge", (30.0, 4.0, 8.0)),
    ("transport_infrastructure", "traffic sign", (1.4, 0.3, 3.6)),
    ("industrial_infrastructure", "storage tank", (11.0, 11.0, 13.0)),
    ("industrial_infrastructure", "shipping container", (6.1, 2.4, 2.6)),
    ("industrial_infrastructure", "shipping container", (12.2, 2.4, 2.6)),
    ("industrial_infrastructure", "chimney", (3.2, 3.2, 30.0)),
    ("vegetation", "tree", (5.5, 5.5, 6.5)),
    ("other", "billboard", (7.0, 0.5, 8.5)),
    ("other", "water tower", (8.0, 8.0, 28.0)),
)
GREEN = {"green", "dark green"}
GREEN_PULL = 0.6  # log-distance taken off vegetation for a green object
MIN_DIMENSION_M = 0.2  # a LiDAR-thin side (a sign's board) is at least this


def parse_size(prompt: str) -> tuple[float, float, float] | None:
    m = SIZE.search(prompt)
    if not m:
        return None
    try:
        dims = tuple(float(g) for g in m.groups())
    except ValueError:
        return None
    if not all(0 < d < 1000 for d in dims):
        return None
    length, width = max(dims[0], dims[1]), min(dims[0], dims[1])
    return (length, width, dims[2])


def _log(dims: tuple[float, float, float]) -> tuple[float, float, float]:
    l, w, h = (math.log(max(MIN_DIMENSION_M, d)) for d in dims)  # noqa: E741
    return (l, w, h)


def likely_object(size: tuple[float, float, float], colour: str) -> tuple[str, str, float]:
    """Category, subcategory, and the margin by which the nearest type beats the next other
    category (log units; small means unsure)."""
    x = _log(size)
    scored = []
    for category, sub, dims in TYPICAL:
        d = math.dist(x, _log(dims))
        if category == "vegetation" and colour in GREEN:
            d = max(0.0, d - GREEN_PULL)
        scored.append((d, category, sub))
    scored.sort()
    best_d, category, sub = scored[0]
    runner_up = next((d for d, c, _ in scored[1:] if c != category), best_d + 1.0)
    return category, sub, runner_up - best_d
