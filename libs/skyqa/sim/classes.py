"""Semantic classes of the built-in simulator and their landmark categories.

The categories are the closed 8-class list of the UAV-DualCog auto-label prompt. ``stuff``
classes (ground, road) carry no instance id, as in Cityscapes-style panoptic labels.
"""

from __future__ import annotations

from dataclasses import dataclass

CATEGORIES = (
    "building",
    "vehicle",
    "public_facility",
    "urban_landscape",
    "transport_infrastructure",
    "industrial_infrastructure",
    "vegetation",
    "other",
)


@dataclass(frozen=True)
class SemanticClass:
    id: int
    name: str
    category: str
    stuff: bool = False


CLASSES: tuple[SemanticClass, ...] = (
    SemanticClass(1, "ground", "other", stuff=True),
    SemanticClass(2, "road", "transport_infrastructure", stuff=True),
    SemanticClass(10, "residential_building", "building"),
    SemanticClass(11, "office_tower", "building"),
    SemanticClass(12, "house", "building"),
    SemanticClass(20, "car", "vehicle"),
    SemanticClass(21, "truck", "vehicle"),
    SemanticClass(22, "bus", "vehicle"),
    SemanticClass(30, "street_lamp", "public_facility"),
    SemanticClass(31, "bus_shelter", "public_facility"),
    SemanticClass(40, "fountain", "urban_landscape"),
    SemanticClass(41, "statue", "urban_landscape"),
    SemanticClass(50, "bridge", "transport_infrastructure"),
    SemanticClass(51, "traffic_sign", "transport_infrastructure"),
    SemanticClass(60, "storage_tank", "industrial_infrastructure"),
    SemanticClass(61, "shipping_container", "industrial_infrastructure"),
    SemanticClass(62, "chimney", "industrial_infrastructure"),
    SemanticClass(70, "tree", "vegetation"),
    SemanticClass(80, "billboard", "other"),
    SemanticClass(81, "water_tower", "other"),
)

BY_ID = {c.id: c for c in CLASSES}
BY_NAME = {c.name: c for c in CLASSES}


def by_name(name: str) -> SemanticClass:
    try:
        return BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(BY_NAME))
        raise KeyError(f"unknown semantic class {name!r}; known: {known}") from None


# Named colours used for object attributes; the name is ground truth for labelling tasks.
COLOURS: dict[str, tuple[float, float, float]] = {
    "white": (0.92, 0.92, 0.90),
    "light gray": (0.72, 0.72, 0.72),
    "gray": (0.50, 0.50, 0.52),
    "dark gray": (0.28, 0.28, 0.30),
    "black": (0.08, 0.08, 0.09),
    "red": (0.78, 0.14, 0.12),
    "dark red": (0.48, 0.10, 0.10),
    "orange": (0.92, 0.50, 0.12),
    "yellow": (0.93, 0.80, 0.18),
    "beige": (0.86, 0.78, 0.62),
    "brown": (0.45, 0.30, 0.18),
    "green": (0.20, 0.55, 0.22),
    "dark green": (0.10, 0.34, 0.14),
    "blue": (0.16, 0.32, 0.72),
    "light blue": (0.55, 0.72, 0.88),
    "teal": (0.10, 0.52, 0.52),
    "silver": (0.78, 0.80, 0.82),
}
