"""Seeded procedural city: a street grid with blocks of several kinds and street furniture.

Blocks are 40 m squares between 10 m roads. The first 4 m inside each block are sidewalk
(lamps, signs, shelters, bridge piers); block contents stay inside the rest, so objects never
intersect. Same seed, same city, to the byte.
"""

from __future__ import annotations

import numpy as np

from skyqa.sim.classes import BY_ID, BY_NAME, COLOURS
from skyqa.sim.mesh import ASPHALT, FACADE, FOLIAGE, GRASS, Part, box, cylinder, gable_roof, sphere
from skyqa.sim.scene import Scene, SceneObject

ROAD_W = 10.0
BLOCK = 40.0
GROUND_APRON_M = 600.0
PITCH = BLOCK + ROAD_W
SIDEWALK = 4.0

RGB = tuple[float, float, float]


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.objects: list[SceneObject] = []
        self.next_id = 1

    def pick(self, options: list[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def u(self, lo: float, hi: float, step: float = 0.5) -> float:
        return float(np.round(self.rng.uniform(lo, hi) / step) * step)

    def add(
        self,
        cls: str,
        colour: str,
        yaw: float,
        at: tuple[float, float, float],
        parts: list[Part],
        **attrs: object,
    ) -> None:
        semantic = BY_NAME[cls]
        iid = 0 if semantic.stuff else self.next_id
        if not semantic.stuff:
            self.next_id += 1
        placed = [p.transformed(yaw, at) for p in parts]
        self.objects.append(
            SceneObject.from_parts(iid, semantic, colour, yaw, placed, type=cls, colour=colour, **attrs)
        )

    # -- object kinds -----------------------------------------------------------------------

    def building(
        self, cls: str, x: float, y: float, sx: float, sy: float, h: float, colours: list[str]
    ) -> None:
        colour = self.pick(colours)
        c = COLOURS[colour]
        roof: RGB = (c[0] * 0.6, c[1] * 0.6, c[2] * 0.6)
        parts = [
            box(sx, sy, h, color=c, material=FACADE),
            box(sx + 0.6, sy + 0.6, 0.6, (0, 0, h), color=roof),
        ]
        if cls == "office_tower" and h > 45 and self.rng.random() < 0.6:
            top = h * self.u(0.2, 0.35, 0.05)
            parts.append(box(sx * 0.6, sy * 0.6, top, (0, 0, h + 0.6), color=c, material=FACADE))
        elif self.rng.random() < 0.5:
            parts.append(box(3.0, 3.0, 2.5, (sx * 0.2, sy * 0.1, h + 0.6), color=COLOURS["gray"]))
        floors = int(h // 3.2)
        self.add(cls, colour, 0.0, (x, y, 0.0), parts, height_m=round(h, 2), floors=floors)

    def house(self, x: float, y: float, yaw: float) -> None:
        wall = self.pick(["white", "beige", "light gray", "yellow"])
        roof = self.pick(["red", "dark red", "brown", "dark gray"])
        sx, sy, h = self.u(8, 11), self.u(7, 9), self.u(4, 6.5)
        parts = [
            box(sx, sy, h, color=COLOURS[wall], material=FACADE),
            gable_roof(sx + 0.8, sy + 0.8, self.u(2.5, 4), h, color=COLOURS[roof]),
        ]
        self.add("house", wall, yaw, (x, y, 0.0), parts, roof_colour=roof, height_m=round(h, 2))

    def tree(self, x: float, y: float) -> None:
        crown = self.pick(["green", "dark green"])
        trunk_h, r = self.u(2.0, 3.5), self.u(2.0, 3.5)
        parts = [
            cylinder(0.3, trunk_h + 0.5, segments=8, color=COLOURS["brown"]),
            sphere(r, (0, 0, trunk_h + r * 0.8), scale_z=0.85, color=COLOURS[crown], material=FOLIAGE),
        ]
        self.add("tree", crown, 0.0, (x, y, 0.0), parts, height_m=round(trunk_h + r * 1.65, 2))

    def car(self, x: float, y: float, yaw: float) -> None:
        colour = self.pick(["red", "blue", "white", "black", "silver", "yellow", "dark gray"])
        c = COLOURS[colour]
        parts = [
            box(4.4, 1.8, 0.9, (0, 0, 0.3), color=c),
            box(2.4, 1.6, 0.6, (-0.3, 0, 1.2), color=c),
            box(4.0, 1.6, 0.3, color=COLOURS["black"]),
        ]
        self.add("car", colour, yaw, (x, y, 0.06), parts)

    def truck(self, x: float, y: float, yaw: float) -> None:
        colour = self.pick(["white", "orange", "blue", "green", "red"])
        parts = [
            box(2.2, 2.5, 2.6, (3.0, 0, 0.4), color=COLOURS[colour]),
            box(5.6, 2.5, 3.0, (-1.0, 0, 0.5), color=COLOURS["silver"]),
            box(7.6, 2.3, 0.4, color=COLOURS["black"]),
        ]
        self.add("truck", colour, yaw, (x, y, 0.06), parts)

    def bus(self, x: float, y: float, yaw: float) -> None:
        colour = self.pick(["yellow", "red", "blue", "green"])
        parts = [
            box(11.0, 2.6, 2.8, (0, 0, 0.4), color=COLOURS[colour]),
            box(10.6, 2.4, 0.4, color=COLOURS["black"]),
        ]
        self.add("bus", colour, yaw, (x, y, 0.06), parts)

    def lamp(self, x: float, y: float, yaw: float) -> None:
        grey = COLOURS["dark gray"]
        parts = [
            cylinder(0.15, 7.0, segments=8, color=grey),
            box(1.8, 0.2, 0.2, (0.9, 0, 6.8), color=grey),
            box(0.6, 0.4, 0.25, (1.7, 0, 6.6), color=COLOURS["yellow"]),
        ]
        self.add("street_lamp", "dark gray", yaw, (x, y, 0.0), parts, height_m=7.0)

    def sign(self, x: float, y: float, yaw: float) -> None:
        colour = self.pick(["blue", "red", "green"])
        parts = [
            cylinder(0.08, 3.2, segments=8, color=COLOURS["silver"]),
            box(0.1, 1.4, 1.0, (0, 0, 2.6), color=COLOURS[colour]),
        ]
        self.add("traffic_sign", colour, yaw, (x, y, 0.0), parts)

    def shelter(self, x: float, y: float, yaw: float) -> None:
        frame = COLOURS["dark gray"]
        parts = [
            box(4.0, 1.8, 0.15, (0, 0, 2.6), color=COLOURS["light blue"]),
            box(4.0, 0.1, 2.4, (0, 0.85, 0.2), color=COLOURS["light blue"]),
        ]
        parts += [cylinder(0.06, 2.6, (sx, -0.8, 0), segments=6, color=frame) for sx in (-1.9, 1.9)]
        self.add("bus_shelter", "light blue", yaw, (x, y, 0.0), parts)

    def billboard(self, x: float, y: float, yaw: float) -> None:
        colour = self.pick(["red", "yellow", "white", "blue"])
        parts = [cylinder(0.25, 5.0, (sx, 0, 0), segments=8, color=COLOURS["gray"]) for sx in (-2.0, 2.0)]
        parts.append(box(7.0, 0.4, 3.5, (0, 0, 5.0), color=COLOURS[colour]))
        self.add("billboard", colour, yaw, (x, y, 0.0), parts, height_m=8.5)

    def fountain(self, x: float, y: float) -> None:
        stone = COLOURS["light gray"]
        parts = [
            cylinder(5.0, 0.8, segments=24, color=stone),
            cylinder(4.4, 0.85, segments=24, color=COLOURS["light blue"]),
            cylinder(0.8, 2.5, segments=12, color=stone),
            cylinder(1.8, 0.3, (0, 0, 2.5), segments=16, color=stone),
        ]
        self.add("fountain", "light gray", 0.0, (x, y, 0.0), parts)

    def statue(self, x: float, y: float) -> None:
        colour = self.pick(["dark gray", "brown", "light gray"])
        parts = [
            box(3.0, 3.0, 2.0, color=COLOURS["light gray"]),
            cylinder(0.6, 3.0, (0, 0, 2.0), top_radius=0.4, segments=10, color=COLOURS[colour]),
            sphere(0.55, (0, 0, 5.5), color=COLOURS[colour]),
        ]
        self.add("statue", colour, self.u(0, 90, 15), (x, y, 0.0), parts, height_m=6.0)

    def tank(self, x: float, y: float) -> None:
        colour = self.pick(["white", "silver", "light gray"])
        r, h = self.u(4, 7), self.u(8, 16)
        parts = [
            cylinder(r, h, segments=24, color=COLOURS[colour]),
            cylinder(r, 1.2, (0, 0, h), top_radius=r * 0.3, segments=24, color=COLOURS[colour]),
        ]
        self.add("storage_tank", colour, 0.0, (x, y, 0.0), parts, height_m=round(h + 1.2, 2), radius_m=r)

    def container(self, x: float, y: float, yaw: float, z: float = 0.0) -> None:
        colour = self.pick(["orange", "red", "blue", "green", "dark red"])
        length = 12.0 if self.rng.random() < 0.5 else 6.0
        self.add(
            "shipping_container",
            colour,
            yaw,
            (x, y, z),
            [box(length, 2.4, 2.6, color=COLOURS[colour])],
            length_m=length,
        )

    def chimney(self, x: float, y: float) -> None:
        h = self.u(25, 35)
        parts = [
            cylinder(1.6, h, top_radius=1.0, segments=16, color=COLOURS["dark red"]),
            cylinder(1.05, 2.0, (0, 0, h - 2.0), segments=16, color=COLOURS["white"]),
        ]
        self.add("chimney", "dark red", 0.0, (x, y, 0.0), parts, height_m=h)

    def water_tower(self, x: float, y: float) -> None:
        colour = self.pick(["white", "light blue", "silver"])
        legs = [
            cylinder(0.3, 14.0, (dx, dy, 0), segments=6, color=COLOURS["gray"])
            for dx, dy in ((-2, -2), (2, -2), (2, 2), (-2, 2))
        ]
        self.add(
            "water_tower",
            colour,
            0.0,
            (x, y, 0.0),
            [*legs, sphere(4.0, (0, 0, 17.0), color=COLOURS[colour])],
            height_m=21.0,
        )

    def bridge(self, x: float, y: float, yaw: float, span: float) -> None:
        grey = COLOURS["gray"]
        parts = [
            box(span, 4.0, 1.0, (0, 0, 6.0), color=grey),
            box(span, 0.2, 1.1, (0, 1.9, 7.0), color=COLOURS["light gray"]),
            box(span, 0.2, 1.1, (0, -1.9, 7.0), color=COLOURS["light gray"]),
        ]
        parts += [box(1.2, 3.0, 6.0, (sx, 0, 0), color=grey) for sx in (-span / 2 + 0.8, span / 2 - 0.8)]
        self.add("bridge", "gray", yaw, (x, y, 0.0), parts, span_m=span)

    # -- blocks -------------------------------------------------------------------------------

    def block(self, x0: float, y0: float) -> None:
        """Fill the block whose inner (non-sidewalk) square starts at (x0, y0)."""
        inner = BLOCK - 2 * SIDEWALK
        cx, cy = x0 + inner / 2, y0 + inner / 2
        kind = self.pick(
            ["residential"] * 7
            + ["office"] * 4
            + ["houses"] * 3
            + ["park"] * 3
            + ["industrial"] * 3
            + ["parking"]
        )
        if kind == "residential":
            if self.rng.random() < 0.5:
                self.building(
                    "residential_building",
                    cx,
                    cy,
                    self.u(16, 28),
                    self.u(14, 26),
                    self.u(12, 36),
                    ["beige", "white", "light gray", "brown", "dark red", "gray"],
                )
            else:
                for dx in (-inner / 4, inner / 4):
                    self.building(
                        "residential_building",
                        cx + dx,
                        cy,
                        self.u(10, 14),
                        self.u(14, 28),
                        self.u(10, 30),
                        ["beige", "white", "light gray", "brown", "dark red"],
                    )
        elif kind == "office":
            self.building(
                "office_tower",
                cx,
                cy,
                self.u(16, 26),
                self.u(16, 26),
                self.u(40, 80),
                ["light blue", "silver", "gray", "teal", "white"],
            )
        elif kind == "houses":
            for dx in (-inner / 4, inner / 4):
                for dy in (-inner / 4, inner / 4):
                    self.house(cx + dx, cy + dy, self.u(0, 90, 90))
        elif kind == "park":
            (self.fountain if self.rng.random() < 0.5 else self.statue)(cx, cy)
            for a in np.linspace(0, 2 * np.pi, int(self.rng.integers(6, 10)), endpoint=False):
                rad = self.u(10, 13)
                self.tree(cx + rad * float(np.cos(a)), cy + rad * float(np.sin(a)))
        elif kind == "industrial":
            self.tank(cx - inner / 4, cy - inner / 4)
            self.tank(cx + inner / 4, cy - inner / 4) if self.rng.random() < 0.6 else self.chimney(
                cx + inner / 4, cy - inner / 4
            )
            for i in range(int(self.rng.integers(2, 5))):
                self.container(cx - 12.0 + i * 3.2, cy + inner / 4, 90.0)
            if self.rng.random() < 0.5:
                self.water_tower(cx + inner / 4, cy + inner / 4)
        else:
            for row in (-8.0, 0.0, 8.0):
                for col in np.arange(-12.0, 13.0, 3.0):
                    if self.rng.random() < 0.55:
                        self.car(cx + float(col), cy + row, 90.0)


def generate_city(scene_id: str, seed: int, blocks: int) -> Scene:
    """A ``blocks`` by ``blocks`` city centred on the origin."""
    b = _Builder(seed)
    half = blocks * PITCH / 2.0
    road_lines = [-half + k * PITCH for k in range(blocks + 1)]
    margin = 20.0
    ext = 2 * half + 2 * margin
    # the ground reaches far past the blocks so flights heading out still see a horizon
    b.add(
        "ground",
        "green",
        0.0,
        (0.0, 0.0, -0.2),
        [
            box(
                ext + 2 * GROUND_APRON_M,
                ext + 2 * GROUND_APRON_M,
                0.2,
                color=(0.36, 0.50, 0.28),
                material=GRASS,
            )
        ],
    )
    for c in road_lines:
        b.add(
            "road",
            "dark gray",
            0.0,
            (0.0, c, 0.0),
            [box(ext, ROAD_W, 0.06, color=(0.22, 0.22, 0.24), material=ASPHALT)],
        )
        b.add(
            "road",
            "dark gray",
            0.0,
            (c, 0.0, 0.0),
            [box(ROAD_W, ext, 0.05, color=(0.22, 0.22, 0.24), material=ASPHALT)],
        )
    for i in range(blocks):
        for j in range(blocks):
            bx = road_lines[i] + ROAD_W / 2
            by = road_lines[j] + ROAD_W / 2
            b.block(bx + SIDEWALK, by + SIDEWALK)
            # street furniture on the block's south sidewalk, facing the road
            b.lamp(bx + 6.0, by + 1.5, 90.0)
            b.lamp(bx + BLOCK - 6.0, by + 1.5, 90.0)
            extra = b.pick(["sign", "shelter", "billboard", "none", "none"])
            if extra == "sign":
                b.sign(bx + 1.5, by + 1.5, 0.0)
            elif extra == "shelter":
                b.shelter(bx + BLOCK / 2, by + 1.8, 0.0)
            elif extra == "billboard":
                b.billboard(bx + BLOCK / 2, by + 2.0, 0.0)
    # traffic: vehicles in the lanes of the east-west roads, spaced so they never overlap
    for c in road_lines[1:-1]:
        for lane, yaw in ((-2.5, 0.0), (2.5, 180.0)):
            x = -half + b.u(2, 10)
            while x < half - 12:
                kind = b.pick(["car"] * 6 + ["truck", "bus"])
                getattr(b, kind)(x, c + lane, yaw)
                x += {"car": 6.0, "truck": 10.0, "bus": 13.0}[kind] + b.u(4, 20)
    # one footbridge across a north-south road, piers on the sidewalks
    k = int(b.rng.integers(1, blocks)) if blocks > 1 else 0
    b.bridge(road_lines[k], -half + PITCH / 2 + ROAD_W / 2, 0.0, ROAD_W + 2 * SIDEWALK)
    return Scene(
        scene_id,
        b.objects,
        dict(BY_ID),
        (-half - margin, half + margin, -half - margin, half + margin),
        seed,
    )
