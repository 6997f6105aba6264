"""Waypoint geometry of the 10 atomic behaviors (UAV-DualCog ``trajectory/behaviors.py``).

Each builder returns a dense polyline (about 0.25 m spacing) in the ENU world frame plus the
derived ``effective_*`` parameters; timing is applied later from the element's speed. Orbits
start at the phase of the current position, so consecutive elements join without jumps.
Deviations: the approach ends where the next element starts (UAV-DualCog tunes its end radius
to join the next orbit, then bridges); ``sky_rise`` hovers ``hover_sec`` at the top.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
SPACING_M = 0.25


@dataclass(frozen=True)
class Target:
    """The landmark an element is bound to: its axis-aligned box (centre, size)."""

    center: tuple[float, float, float]
    size: tuple[float, float, float]
    safety_m: float = 2.0

    @property
    def c(self) -> F64:
        return np.asarray(self.center, dtype=np.float64)

    @property
    def diag_xy(self) -> float:
        return math.hypot(self.size[0], self.size[1])

    @property
    def anchor_m(self) -> float:
        """UAV-DualCog's ``orbit_scale_anchor_m``: the footprint's half diagonal plus safety."""
        return 0.5 * self.diag_xy + self.safety_m

    @property
    def top_z(self) -> float:
        return self.center[2] + 0.5 * self.size[2]

    @property
    def base_z(self) -> float:
        return self.center[2] + 0.8 * self.size[2]

    def phase(self, p: F64) -> float:
        return math.atan2(p[1] - self.center[1], p[0] - self.center[0])

    def on_circle(self, phase: float, radius: float, z: float) -> F64:
        return np.array(
            [self.center[0] + radius * math.cos(phase), self.center[1] + radius * math.sin(phase), z]
        )


@dataclass
class Shape:
    points: F64  # (N, 3) dense polyline
    effective: dict[str, float] = field(default_factory=dict)
    hold_end_s: float = 0.0  # hover at the last point


@dataclass(frozen=True)
class Context:
    current: F64  # where the drone is when the element starts
    altitude: float | None = None  # inherited altitude (orbits after another element)
    join: F64 | None = None  # where the next element starts (approach ends there)


Params = Mapping[str, float | str]
Builder = Callable[[Params, Target, Context], Shape]


def _f(p: Params, name: str) -> float:
    return float(p[name])


def polyline(*vertices: F64) -> F64:
    """Straight legs through ``vertices`` at about SPACING_M."""
    out = [vertices[0][None, :]]
    for a, b in itertools.pairwise(vertices):
        n = max(1, math.ceil(float(np.linalg.norm(b - a)) / SPACING_M))
        t = np.linspace(0.0, 1.0, n + 1)[1:, None]
        out.append(a + t * (b - a))
    return np.concatenate(out)


def _sweep(length_hint: float) -> int:
    return max(16, math.ceil(length_hint / SPACING_M))


def _sign(p: Params) -> float:
    return -1.0 if p.get("direction", "ccw") == "cw" else 1.0


def _orbit_z(p: Params, t: Target, ctx: Context) -> float:
    if ctx.altitude is not None:
        return ctx.altitude
    return t.base_z + _f(p, "altitude_offset_m") if "altitude_offset_m" in p else t.base_z


def approach(p: Params, t: Target, ctx: Context) -> Shape:
    if ctx.join is not None:
        end = ctx.join.copy()
    else:
        end = t.on_circle(t.phase(ctx.current), t.anchor_m + 8.0, t.center[2] + 0.5 * t.size[2])
    heading = t.phase(end) + math.radians(_f(p, "yaw_offset_deg"))
    d = _f(p, "travel_distance_m")
    start = end + np.array([d * math.cos(heading), d * math.sin(heading), _f(p, "descent_m")])
    return Shape(polyline(start, end), {"effective_end_radius_m": float(np.linalg.norm(end[:2] - t.c[:2]))})


def depart(p: Params, t: Target, ctx: Context) -> Shape:
    heading = t.phase(ctx.current) + math.radians(_f(p, "yaw_offset_deg"))
    d = _f(p, "travel_distance_m")
    end = ctx.current + np.array([d * math.cos(heading), d * math.sin(heading), _f(p, "rise_m")])
    return Shape(polyline(ctx.current, end))


def _arc(t: Target, phase0: float, sweep: float, r0: float, r1: float, z0: float, z1: float) -> F64:
    n = _sweep(abs(sweep) * max(r0, r1) + abs(z1 - z0))
    s = np.linspace(0.0, 1.0, n + 1)
    phi = phase0 + s * sweep
    r = r0 + s * (r1 - r0)
    return np.stack(
        [t.center[0] + r * np.cos(phi), t.center[1] + r * np.sin(phi), z0 + s * (z1 - z0)], axis=1
    )


def circular(p: Params, t: Target, ctx: Context) -> Shape:
    r = t.anchor_m + _f(p, "extension_m")
    sweep = _sign(p) * math.radians(_f(p, "arc_deg"))
    z = _orbit_z(p, t, ctx)
    return Shape(_arc(t, t.phase(ctx.current), sweep, r, r, z, z), {"effective_radius_m": r})


def spiral(p: Params, t: Target, ctx: Context) -> Shape:
    r0 = t.anchor_m + _f(p, "start_extension_m")
    r1 = max(t.anchor_m + _f(p, "end_extension_m"), r0 + 2.0)
    z0 = _orbit_z(p, t, ctx)
    sweep = _sign(p) * math.radians(_f(p, "arc_deg"))
    pts = _arc(t, t.phase(ctx.current), sweep, r0, r1, z0, z0 + _f(p, "rise_m"))
    return Shape(pts, {"effective_start_radius_m": r0, "effective_end_radius_m": r1})


def _polygon(p: Params, t: Target, ctx: Context, n: int, rotation_deg: float) -> Shape:
    side = t.diag_xy + 2.0 * _f(p, "extension_m")
    radius = side / (2.0 * math.sin(math.pi / n))
    z = _orbit_z(p, t, ctx)
    step = _sign(p) * 2.0 * math.pi / n
    base = math.radians(rotation_deg)
    # roll the polygon so the walk starts at the vertex nearest the current position
    k0 = round((t.phase(ctx.current) - base) / abs(step))
    angles = [base + (k0 + i) * step for i in range(int(_f(p, "edge_count")) + 1)]
    vertices = [t.on_circle(a, radius, z) for a in angles]
    return Shape(polyline(*vertices), {"effective_side_m": side, "effective_radius_m": radius})


def square(p: Params, t: Target, ctx: Context) -> Shape:
    return _polygon(p, t, ctx, 4, 45.0)


def triangle(p: Params, t: Target, ctx: Context) -> Shape:
    return _polygon(p, t, ctx, 3, _f(p, "rotation_deg"))


def figure8(p: Params, t: Target, ctx: Context) -> Shape:
    r = t.anchor_m + _f(p, "extension_m")
    z = _orbit_z(p, t, ctx)
    axis = t.phase(ctx.current)
    u = np.array([math.cos(axis), math.sin(axis)])
    v = np.array([-u[1], u[0]])
    cycles = int(_f(p, "cycles"))
    n = _sweep(cycles * 6.0 * r)
    phi = math.pi / 2 + np.linspace(0.0, 2.0 * math.pi * cycles, n + 1)
    xy = t.c[:2] + np.outer(r * np.sin(phi), u) + np.outer(0.5 * r * np.sin(2 * phi), v)
    return Shape(np.column_stack([xy, np.full(len(xy), z)]), {"effective_radius_m": r})


def sky_rise(p: Params, t: Target, ctx: Context) -> Shape:
    over = np.array([t.center[0], t.center[1], t.top_z + t.safety_m + 1.5 + _f(p, "top_extension_m")])
    top = over + np.array([0.0, 0.0, max(t.base_z + 0.1 * t.size[2] + _f(p, "rise_m") - over[2], 1.0)])
    cur = ctx.current
    legs = [cur, over, top] if cur[2] >= over[2] else [cur, np.array([cur[0], cur[1], over[2]]), over, top]
    return Shape(polyline(*legs), {"effective_top_z_m": float(top[2])}, hold_end_s=_f(p, "hover_sec"))


def comet(p: Params, t: Target, ctx: Context) -> Shape:
    entry_r = t.anchor_m + _f(p, "extension_m")
    # the loop must reach behind the landmark, so the semi-major axis is at least the entry radius
    a = max(_f(p, "semi_major_m"), entry_r + t.anchor_m)
    b = a * math.sqrt(1.0 - _f(p, "eccentricity") ** 2)
    phase = t.phase(ctx.current)
    u = np.array([math.cos(phase), math.sin(phase)])
    v = _sign(p) * np.array([-u[1], u[0]])
    centre = t.c[:2] - u * (a - entry_r)
    z = t.base_z
    sweep = math.radians(_f(p, "arc_deg"))
    s = np.linspace(0.0, sweep, _sweep(sweep * a) + 1)
    xy = centre + np.outer(a * np.cos(s), u) + np.outer(b * np.sin(s), v)
    loop = np.column_stack([xy, np.full(len(xy), z)])
    if abs(math.remainder(sweep, 2 * math.pi)) > 1e-6:
        loop = np.concatenate([loop, polyline(loop[-1], loop[0])[1:]])
    return Shape(
        loop, {"effective_entry_radius_m": entry_r, "effective_semi_major_m": a, "effective_semi_minor_m": b}
    )


def surface(p: Params, t: Target, ctx: Context) -> Shape:
    w = t.size[0] + 2.0 * _f(p, "extension_x_m")
    h = t.size[1] + 2.0 * _f(p, "extension_y_m")
    lanes = int(_f(p, "lane_count"))
    z = t.base_z + _f(p, "altitude_offset_m")
    # start at the rectangle corner nearest the current position
    sx = 1.0 if ctx.current[0] >= t.center[0] else -1.0
    sy = 1.0 if ctx.current[1] >= t.center[1] else -1.0
    vertices = []
    for i, y in enumerate(np.linspace(sy * h / 2, -sy * h / 2, lanes)):
        xs = (sx * w / 2, -sx * w / 2) if i % 2 == 0 else (-sx * w / 2, sx * w / 2)
        vertices += [t.c + np.array([xs[0], y, 0.0]), t.c + np.array([xs[1], y, 0.0])]
    pts = polyline(*vertices)
    pts[:, 2] = z
    return Shape(pts, {"effective_scan_width_m": w, "effective_scan_height_m": h})


BUILDERS: dict[str, Builder] = {
    "gradual_approach": approach,
    "gradual_depart": depart,
    "circular_orbit": circular,
    "spiral_orbit": spiral,
    "square_orbit": square,
    "triangular_orbit": triangle,
    "figure8_orbit": figure8,
    "sky_rise": sky_rise,
    "comet": comet,
    "surface_mapping": surface,
}
# elements that fly from where the drone is (no bridge to a legal start)
CONTINUOUS = frozenset({"gradual_approach", "gradual_depart", "sky_rise"})
