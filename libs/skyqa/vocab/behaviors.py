"""The behavior library (``behaviors.yaml``) as validated models, and seeded parameter sampling.

Sampling follows UAV-DualCog's ``random`` auto method: a numeric parameter is drawn uniformly
in [min, max] and snapped to ``min + k*step``; a choice parameter is drawn uniformly from its
choices. A set step's ``auto_rules`` narrow the range for automatic generation and win over the
step's fixed ``params``, which win over the element's own range.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

CameraMode = Literal["look_forward", "landmark_track"]
Value = float | str
LIBRARY_PATH = Path(__file__).with_name("behaviors.yaml")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ParamSpec(_Model):
    min: float | None = None
    max: float | None = None
    default: Value
    step: float | None = None
    choices: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> ParamSpec:
        if self.choices:
            if self.default not in self.choices:
                raise ValueError(f"default {self.default!r} is not among the choices {self.choices}")
            return self
        if self.min is None or self.max is None or self.step is None or self.step <= 0:
            raise ValueError("a numeric parameter needs min, max and a positive step")
        if not self.min <= float(self.default) <= self.max:
            raise ValueError(f"default {self.default} is outside [{self.min}, {self.max}]")
        return self

    def sample(self, rng: np.random.Generator) -> Value:
        if self.choices:
            return self.choices[int(rng.integers(len(self.choices)))]
        assert self.min is not None
        assert self.max is not None
        assert self.step is not None
        steps = int(np.floor((self.max - self.min) / self.step + 1e-9))
        k = int(np.clip(np.round(rng.uniform(0.0, steps)), 0, steps))
        return round(self.min + k * self.step, 6)


class ElementSpec(_Model):
    display_name: str
    description: str
    family: Literal["inspection", "orbit", "vertical", "transition", "survey"]
    camera_mode_default: CameraMode
    params: dict[str, ParamSpec]


class RuleSpec(_Model):
    min: float
    max: float
    step: float


class StepSpec(_Model):
    element: str
    camera_mode: CameraMode
    params: dict[str, Value] = Field(default_factory=dict)
    auto_rules: dict[str, RuleSpec] = Field(default_factory=dict)


class SetSpec(_Model):
    kind: Literal["atomic", "composite"]
    display_name: str = ""
    steps: list[StepSpec]


class Library(_Model):
    version: str
    shared: dict[str, float]
    elements: dict[str, ElementSpec]
    sets: dict[str, SetSpec]

    @model_validator(mode="after")
    def _check(self) -> Library:
        for name, s in self.sets.items():
            for step in s.steps:
                spec = self.elements.get(step.element)
                if spec is None:
                    raise ValueError(f"set {name} uses unknown element {step.element!r}")
                unknown = (set(step.params) | set(step.auto_rules)) - set(spec.params)
                if unknown:
                    raise ValueError(
                        f"set {name} sets unknown parameters {sorted(unknown)} of {step.element}"
                    )
        return self

    @property
    def safety_distance_m(self) -> float:
        return float(self.shared["safety_distance_m"])

    def set_names(self, kind: Literal["atomic", "composite"]) -> list[str]:
        return [n for n, s in self.sets.items() if s.kind == kind]

    def set_display(self, name: str) -> str:
        s = self.sets[name]
        if s.display_name:
            return s.display_name
        return self.elements[s.steps[0].element].display_name

    def sample_step(self, step: StepSpec, rng: np.random.Generator) -> dict[str, Value]:
        """Parameters of one step; every parameter of the element is drawn, in a fixed order."""
        spec = self.elements[step.element]
        out: dict[str, Value] = {}
        for name in sorted(spec.params):
            p = spec.params[name]
            drawn = p.sample(rng)  # always drawn, so fixing one value does not shift the others
            if name in step.auto_rules:
                r = step.auto_rules[name]
                out[name] = ParamSpec(min=r.min, max=r.max, step=r.step, default=r.min).sample(rng)
            elif name in step.params:
                out[name] = step.params[name]
            else:
                out[name] = drawn
        return out


def behavior_id(element: str, camera_mode: str) -> str:
    return f"{element}.{camera_mode}"


def behavior_label(lib: Library, element: str, camera_mode: str) -> str:
    suffix = "look forward" if camera_mode == "look_forward" else "track landmark"
    return f"{lib.elements[element].display_name} ({suffix})"


@functools.cache
def load_library(path: Path = LIBRARY_PATH) -> Library:
    return Library.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))


# -- behaviors in words (question options; the evaluator recognises composite options) --

CAMERA = {
    "look_forward": "with the camera looking ahead along the path",
    "landmark_track": "with the camera locked on the landmark",
}


def _turn(p: dict[str, float | str]) -> str:
    return "clockwise" if p.get("direction") == "cw" else "counterclockwise"


# the polygon each polygon orbit walks (UAV-DualCog: a square or a triangle around the landmark,
# flown for ``edge_count`` edges, one edge per step, so 7 edges of a square are 1 3/4 laps)
POLYGON_SIDES = {"square_orbit": 4, "triangular_orbit": 3}
_FRACTIONS = {(1, 4): "¼", (1, 2): "½", (3, 4): "¾", (1, 3): "⅓", (2, 3): "⅔"}


def laps(edges: int, sides: int) -> str:
    """How far around its polygon a walk of ``edges`` edges goes, as a person watching counts
    it: "once around", "1¾ times around", "¾ of the way around"."""
    if edges < 1 or sides < 3:
        raise ValueError(f"{edges} edges of a {sides}-sided polygon")
    whole, rest = divmod(edges, sides)
    g = math.gcd(rest, sides)
    part = _FRACTIONS[(rest // g, sides // g)] if rest else ""
    if not whole:
        return f"{part} of the way around"
    if not part:
        return "once around" if whole == 1 else f"{whole} times around"
    return f"{whole}{part} times around"


def _polygon(shape: str, element: str, p: dict[str, float | str]) -> str:
    edges = round(float(p["edge_count"]))
    return f"{shape} orbit {_turn(p)} along {edges} edges ({laps(edges, POLYGON_SIDES[element])})"


def element_label(element: str, camera_mode: str, p: dict[str, float | str]) -> str:
    """A short sentence for one behavior with its parameters; kept short so that two behaviors
    of one mission (the same orbit with another camera mode) stay below 0.85 similarity."""

    def n(name: str) -> int:
        return round(float(p[name]))

    texts: dict[str, Callable[[], str]] = {
        "gradual_approach": lambda: f"approach, descending {n('descent_m')} m",
        "gradual_depart": lambda: f"depart, rising {n('rise_m')} m",
        "circular_orbit": lambda: f"circle {_turn(p)} {n('arc_deg')}°",
        "spiral_orbit": lambda: f"spiral out {_turn(p)} {n('arc_deg')}°, rising {n('rise_m')} m",
        "square_orbit": lambda: _polygon("square", element, p),
        "triangular_orbit": lambda: _polygon("triangle", element, p),
        "figure8_orbit": lambda: f"figure-eight over the landmark, {n('cycles')} loop(s)",
        "sky_rise": lambda: f"fly over, then climb {n('rise_m')} m vertically",
        "comet": lambda: "comet loop behind the landmark and back",
        "surface_mapping": lambda: f"lawnmower scan from above, {n('lane_count')} lanes",
    }
    text = texts[element]()
    return f"{text} {CAMERA[camera_mode]}"


def composite_label(lib: Library, set_name: str) -> str:
    """The set's name only, the same form as composite distractors: a gold label that listed its
    steps named the gold atomic options too (a blind "most specific" pick reached set-F1 0.52
    against 0.35 by chance)."""
    return f"a {lib.set_display(set_name).lower()} mission"


def is_composite_label(label: str) -> bool:
    """Composite options, gold or distractor, are named "a <set> mission[: <steps>]"."""
    return label.startswith("a ") and (label.endswith(" mission") or " mission: " in label)
