"""What a survey view shows of its small objects, as UltraVR's RS split annotates DOTA: a box,
a class, a colour, an orientation label and the quadrant holding the box centre, each with
what would make a question about it ambiguous.

An object is *clear* when a viewer can count it without doubt: at least ``FLOOR_PX`` pixels, at
least ``MIN_IN_FRAME`` of it inside the image, at most ``MAX_OCCLUDED`` of its camera-facing
surface hidden, and measured in 3D (one of the survey's targets: on the builtin backend every
small object of the scene, on AirSim those of the fused map). Its quadrant is the one holding its box
centre; a centre within ``BOUNDARY`` of the image's size from a split line belongs to every
quadrant it is that close to (near-boundary). Its orientation label (vehicles and containers)
reads the long axis of its pixels: ``horizontal`` within 22.5 degrees of the image's x axis,
``vertical`` of its y axis, ``diagonal`` otherwise; none when its pixels are too round
(elongation below ``MIN_ELONGATION``) or the axis lies within ``ORIENTATION_MARGIN_DEG`` of a
label's edge. Its colour is the coarse word of its sunlit pixels, none when the colour lies
within a margin of the edge between two words (:func:`skyqa.vocab.colours.clear_colour`); the
words either side of such an edge are what a viewer could call it (:func:`colour_words`), so a
car between black and gray is not a red car for anyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.ultra import MeasuredObject
from skyqa.sim.classes import by_name
from skyqa.vocab.colours import ACHROMATIC, COLOUR_MARGIN, clear_colour, hue_distances

REGIONS = ("upper-left", "upper-right", "lower-left", "lower-right")
NOUNS: dict[str, tuple[str, str]] = {
    "car": ("car", "cars"),
    "truck": ("truck", "trucks"),
    "bus": ("bus", "buses"),
    "shipping_container": ("shipping container", "shipping containers"),
    "street_lamp": ("street lamp", "street lamps"),
    "tree": ("tree", "trees"),
    "storage_tank": ("storage tank", "storage tanks"),
}
VEHICLES = ("car", "truck", "bus")
ORIENTED = ("car", "truck", "bus", "shipping_container")
ORIENTATIONS = ("horizontal", "vertical", "diagonal")
FLOOR_PX = 48
MIN_IN_FRAME = 0.98
MAX_OCCLUDED = 0.25
BOUNDARY = 0.02
MIN_ELONGATION = 1.4
ORIENTATION_MARGIN_DEG = 7.5

# why an object cannot be counted without doubt
BELOW_FLOOR = "object below the visibility floor"
CUT = "object cut by the image edge"
OCCLUDED = "object mostly hidden"
UNMAPPED = "object not measured in 3D"  # not a survey target (AirSim: not in the fused map)
NEAR_BOUNDARY = "object near a region boundary"
AMBIGUOUS_ORIENTATION = "ambiguous orientation"
AMBIGUOUS_COLOUR = "ambiguous colour"
NEAR_DOUBT = "object at the edge of a landmark's surroundings"
# why a reviewed landmark cannot condition a count
LANDMARK_SMALL = "landmark too small to find"
LANDMARK_CUT = "landmark cut by the image edge"
LANDMARK_SPLIT = "landmark not within one region"
# a landmark conditions a count (UltraVR RS: "cars in the upper-left region near the red-roofed
# building"): its whole box lies in one region, clear of the split lines and the image edge, and
# covers at least LANDMARK_SHARE of the image. An object is near it when its box centre lies
# within NEAR of the image's larger side from the landmark's box; one between NEAR and FAR is
# neither near nor clearly away (a viewer could count it either way), so a count it could join
# is not asked; the SYSTEM prompt states NEAR
LANDMARK_SHARE = 1e-4
NEAR, FAR = 0.05, 0.10


def kind_of(class_name: str) -> str:
    """The super-category a class is compared within (the simulator's landmark categories:
    cars, trucks and buses are vehicles). UltraVR pairs bundles of one kind (CCTV: groups of
    people; RS: one object type in two regions): "trucks against trees" is no comparison a
    benchmark author asks."""
    return by_name(class_name).category


@dataclass(frozen=True)
class Obj:
    instance_id: int
    class_name: str
    box: tuple[int, int, int, int]  # pixels
    pixels: int
    colour: str | None
    orientation: str | None
    regions: frozenset[str]  # one when its centre is clear of the split lines
    problem: str | None  # why it cannot be counted without doubt; None: clear
    # every colour word a viewer could give it (its colour's word, or the words either side of
    # the edge it lies near); empty when its colour was not measured
    shades: frozenset[str] = frozenset()

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2.0, (y0 + y1) / 2.0


def orientation_of(axis_deg: float, elongation: float) -> str | None:
    if elongation < MIN_ELONGATION:
        return None
    a = axis_deg % 180.0
    edges = (22.5, 67.5, 112.5, 157.5)
    if min(abs(a - e) for e in edges) < ORIENTATION_MARGIN_DEG:
        return None
    if a < 22.5 or a >= 157.5:
        return "horizontal"
    return "vertical" if 67.5 <= a < 112.5 else "diagonal"


def colour_words(rgb: NDArray[np.float64]) -> frozenset[str]:
    """The words :func:`skyqa.vocab.colours.clear_colour` gives a clear colour, one; for a colour
    it leaves unnamed, every word two viewers could use, widely: the grey words whose
    brightness band it is within twice ``COLOUR_MARGIN`` of (when it is that close to the
    greyness cut, or below it), and the hue families within twice the margin of the nearest
    (when it is that close to the cut, or above it), every hue family when it is that dark
    (a dark colour's hue moves with a little light)."""
    word = clear_colour(rgb)
    if word is not None:
        return frozenset({word})
    top = float(rgb.max())
    margin = 2.0 * COLOUR_MARGIN
    chroma = (top - float(rgb.min())) / top
    out = set()
    if chroma < ACHROMATIC + margin:
        if top >= 0.6 - margin:
            out.add("white")
        if 0.25 - margin <= top < 0.6 + margin:
            out.add("gray")
        if top < 0.25 + margin:
            out.add("black")
    if chroma >= ACHROMATIC - margin:
        best = hue_distances(rgb)
        nearest = min(best.values())
        out |= {w for w, d in best.items() if d - nearest < margin or top < 0.25 + margin}
    return frozenset(out)


def regions_of(cx: float, cy: float, width: int, height: int) -> frozenset[str]:
    cols = {"left"} if cx < width / 2 else {"right"}
    if abs(cx - width / 2) < BOUNDARY * width:
        cols = {"left", "right"}
    rows = {"upper"} if cy < height / 2 else {"lower"}
    if abs(cy - height / 2) < BOUNDARY * height:
        rows = {"upper", "lower"}
    return frozenset(f"{r}-{c}" for r in rows for c in cols)


def problem_of(m: MeasuredObject) -> str | None:
    if m.in_frame < 0:
        return UNMAPPED
    if m.pixels < FLOOR_PX:
        return BELOW_FLOOR
    if m.in_frame < MIN_IN_FRAME:
        return CUT
    if m.occluded > MAX_OCCLUDED:
        return OCCLUDED
    return None


def objects_of(measured: list[MeasuredObject], width: int, height: int) -> list[Obj]:
    """The view's small objects (the classes the questions count), by instance id."""
    out = []
    for m in measured:
        if m.class_name not in NOUNS or m.pixels <= 0:
            continue
        x0, y0, x1, y1 = m.box
        lit = np.asarray(m.lit_rgb, dtype=np.float64)
        colour = clear_colour(lit) if len(m.lit_rgb) == 3 else None
        shades = colour_words(lit) if len(m.lit_rgb) == 3 else frozenset()
        orient = orientation_of(m.axis_deg, m.elongation) if m.class_name in ORIENTED else None
        out.append(
            Obj(
                instance_id=m.instance_id,
                class_name=m.class_name,
                box=(x0, y0, x1, y1),
                pixels=m.pixels,
                colour=colour,
                orientation=orient,
                regions=regions_of((x0 + x1) / 2.0, (y0 + y1) / 2.0, width, height),
                problem=problem_of(m),
                shades=shades,
            )
        )
    return sorted(out, key=lambda o: o.instance_id)


def norm_box(o: Obj, width: int, height: int) -> list[float]:
    x0, y0, x1, y1 = o.box
    return [round(x0 / width, 4), round(y0 / height, 4), round(x1 / width, 4), round(y1 / height, 4)]


@dataclass(frozen=True)
class Bundle:
    """A set of objects a question names: classes, optionally of one colour or orientation."""

    classes: tuple[str, ...]
    noun: str  # plural
    colour: str | None = None
    orientation: str | None = None

    @property
    def words(self) -> str:
        if self.colour:
            return f"{self.colour} {self.noun}"
        if self.orientation:
            return f"{self.orientation}ly oriented {self.noun}"
        return self.noun

    def key(self) -> str:
        return f"{'+'.join(self.classes)}:{self.colour or ''}:{self.orientation or ''}"

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(kind_of(c) for c in self.classes)


def comparable(a: Bundle, b: Bundle) -> bool:
    """Whether two bundles may be compared or added up: both of one super-category."""
    return len(a.kinds | b.kinds) == 1


@dataclass(frozen=True)
class Tally:
    members: tuple[Obj, ...]  # the bundle's objects in the region, clear and counted
    problem: str | None  # why the region's count is not certain

    @property
    def count(self) -> int:
        return len(self.members)


def ruled_out(o: Obj, bundle: Bundle) -> bool:
    """Whether what the view shows of ``o`` rules it out of ``bundle`` whichever region holds
    it: a colour no viewer would call the bundle's (read off its own pixels, so also of an
    object partly hidden or cut, when it has at least ``FLOOR_PX`` of them), or, for an object
    shown whole, a clear orientation other than the bundle's."""
    if bundle.colour and o.shades and bundle.colour not in o.shades:
        return o.problem in (None, OCCLUDED, CUT)
    if bundle.orientation and o.orientation is not None and o.orientation != bundle.orientation:
        return o.problem is None
    return False


def tally(objects: list[Obj], bundle: Bundle, region: str, by: Bundle | None = None) -> Tally:
    """The bundle's objects in ``region``; a problem when any object of the bundle's classes
    that may lie there is not clear, is near the boundary, or lacks the attribute the bundle
    restricts by, unless what it shows rules it out of ``by`` (the bundle by default): such an
    object counts nowhere, so its doubts do not touch the count. ``by`` is a narrower bundle
    when the whole class is listed on the way to it (a presence question's trace), whose list
    then leaves the ruled-out objects out."""
    rule = by or bundle
    members = []
    for o in objects:
        if o.class_name not in bundle.classes or region not in o.regions:
            continue
        if (o.problem is not None or len(o.regions) > 1) and ruled_out(o, rule):
            continue
        if o.problem is not None:
            return Tally((), o.problem)
        if len(o.regions) > 1:
            return Tally((), NEAR_BOUNDARY)
        if bundle.orientation and o.orientation is None:
            return Tally((), AMBIGUOUS_ORIENTATION)
        if bundle.colour and o.colour is None:
            if ruled_out(o, bundle):  # between two words, neither of them the bundle's
                continue
            return Tally((), AMBIGUOUS_COLOUR)
        if bundle.colour and o.colour != bundle.colour:
            continue
        if bundle.orientation and o.orientation != bundle.orientation:
            continue
        members.append(o)
    return Tally(tuple(members), None)


@dataclass(frozen=True)
class Landmark:
    """A reviewed landmark the view shows, named as the review describes it."""

    instance_id: int
    class_name: str
    name: str
    box: tuple[int, int, int, int]
    region: str | None  # the one region holding its whole box; None when it has a problem
    problem: str | None


def landmarks_of(
    measured: list[MeasuredObject], names: Mapping[int, str], width: int, height: int
) -> list[Landmark]:
    """The reviewed landmarks (by rendered instance id) the view measured, each with the one
    region it lies wholly in or why it cannot condition a count."""
    out = []
    for m in measured:
        name = names.get(m.instance_id)
        if name is None or m.pixels <= 0:
            continue
        x0, y0, x1, y1 = m.box
        corners = {regions_of(x, y, width, height) for x in (x0, x1 - 1) for y in (y0, y1 - 1)}
        held = frozenset.intersection(*corners)
        problem = None
        if m.pixels < LANDMARK_SHARE * width * height:
            problem = LANDMARK_SMALL
        elif x0 <= 0 or y0 <= 0 or x1 >= width or y1 >= height:
            problem = LANDMARK_CUT
        elif len(held) != 1 or any(len(c) > 1 for c in corners):
            problem = LANDMARK_SPLIT
        region = next(iter(held)) if problem is None else None
        out.append(Landmark(m.instance_id, m.class_name, name, (x0, y0, x1, y1), region, problem))
    return sorted(out, key=lambda x: x.instance_id)


def gap(o: Obj, landmark: Landmark) -> float:
    """Pixels from the object's box centre to the landmark's box (0 inside it)."""
    cx, cy = o.centre
    x0, y0, x1, y1 = landmark.box
    return float(np.hypot(max(x0 - cx, 0.0, cx - x1), max(y0 - cy, 0.0, cy - y1)))


def near_tally(
    objects: list[Obj], bundle: Bundle, region: str, landmark: Landmark, width: int, height: int
) -> Tally:
    """The bundle's objects in ``region`` near ``landmark`` (:func:`tally` over the objects that
    could be near it: one further than FAR is away for certain, whatever its doubts); a problem
    when one of them lies between NEAR and FAR."""
    size = max(width, height)
    close = [o for o in objects if o.instance_id != landmark.instance_id and gap(o, landmark) <= FAR * size]
    t = tally(close, bundle, region)
    if t.problem:
        return t
    if any(gap(o, landmark) > NEAR * size for o in t.members):
        return Tally((), NEAR_DOUBT)
    return t


def norm_landmark(lm: Landmark, width: int, height: int) -> list[float]:
    x0, y0, x1, y1 = lm.box
    return [round(x0 / width, 4), round(y0 / height, 4), round(x1 / width, 4), round(y1 / height, 4)]
