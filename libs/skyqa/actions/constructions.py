"""Action sequences that are exact instances of an algebraic identity, from a seeded stream.

Reasoning-Structured Videos' constructions, with its defaults (40 actions):

- **inverse_easy**: ``A ‖ no_op pad ‖ A⁻¹`` where ``A`` (10-20 actions) interleaves translation
  blocks with look (pitch) blocks. Looks commute with level moves, so this half can be solved
  by treating the return as a time reversal or by cancelling action counts.
- **inverse_hard**: ``A · A⁻¹`` where ``A`` interleaves translations with turns, and the state at
  the turnaround is not where a model that lets the actions commute would put it (the
  non-abelian witness).
- **loop_easy**: an exploration, then the five-stage discrete return (heading, pitch,
  forward/backward, lateral, then no_op), kept when the residual is below 0.45 of a step
  horizontally (0.3 vertically): it closes within that residual, not exactly.
- **loop_hard**: a rectangle, triangle or hexagon, closed exactly by its geometry and not an
  inverse (its translations never cancel, so a commuting model never comes back).
- **equivalence_easy**: two paths to one state: a Fisher-Yates shuffle within every maximal run
  of translations or of rotations (moves at one heading commute, as do turns and looks), or the
  L-shape ``Uᵐ Vⁿ`` against the zig-zag ``(VU)ᵏ Vⁿ⁻ᵏ Uᵐ⁻ᵏ`` (their interiors are disjoint) with
  self-inverse rotation pairs filling the remaining slots.
- **equivalence_hard**: the card holds its Hard-tier Equivalence back and defines a hard tier as
  one defended against shortcut attacks (a commuting, symmetric model); built here as two paths
  whose actions differ in kind, not in order: ``P · turnᵠ · Uᵐ · turn⁻ᵠ · Q`` against
  ``P · Vᵐ · Q`` where ``V`` is ``U`` turned by ``q`` (a quarter turn: a side step), ``P``
  and ``Q`` interleaving translations with turns, the shorter path filled with self-inverse
  turn pairs. A commuting model moves both middles along the root's heading and so puts the two
  ends apart (and misses each path's true end): equal action counts cannot pass it.

Every construction is verified on exact states before it is returned; a draw that does not hold
is drawn again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from skyqa.actions.space import (
    INVERSE,
    LOOKS,
    ROTATIONS,
    TRANSLATIONS,
    TURNS,
    Kinematics,
    Root,
    State,
)

MOVES = ("move_forward", "move_backward", "move_left", "move_right")
RESIDUAL_H = 0.45  # of a step, the card's acceptance of a discrete return
RESIDUAL_V = 0.30
DRAWS = 200
ORIGIN = Root(0.0, 0.0, 0.0)


@dataclass
class Built:
    """One constructed sequence and what it asserts."""

    construction: str
    actions: list[str]
    identities: list[tuple[int, int, float]]  # (frame, frame, tolerance m) of equal states
    anchors: list[int]  # frames the GT-anchored tier compares
    witness: str = ""
    residual_m: float = 0.0
    partner: list[str] = field(default_factory=list)  # equivalence: path B


class NoConstruction(ValueError):
    """No draw satisfied the construction (the action space leaves no room for it)."""


def _pad(actions: list[str], n: int) -> list[str]:
    if len(actions) > n:
        raise NoConstruction(f"{len(actions)} actions do not fit in {n}")
    return actions + ["no_op"] * (n - len(actions))


def inverse_of(actions: list[str]) -> list[str]:
    return [INVERSE[a] for a in reversed(actions)]


def _blocks(
    kin: Kinematics, rng: np.random.Generator, length: int, rotations: tuple[str, ...], max_block: int = 4
) -> list[str]:
    """``length`` actions alternating translation blocks and rotation blocks (translations first).
    A rotation block turns or looks one way; no action undoes the one before it (a natural path,
    not a cancelled one); the pitch stays within its limit."""
    out: list[str] = []
    state = State.root(kin.space)
    translate = True
    while len(out) < length:
        size = int(rng.integers(1, max_block + 1))
        spin = [a for a in rotations if not out or a != INVERSE[out[-1]]]
        turn = spin[int(rng.integers(len(spin)))]
        for _ in range(min(size, length - len(out))):
            pool = [a for a in MOVES if not out or a != INVERSE[out[-1]]] if translate else [turn]
            choices = [a for a in pool if kin.allowed(state, a)]
            if not choices:
                break
            a = choices[int(rng.integers(len(choices)))]
            out.append(a)
            state = kin.apply(state, a)
        translate = not translate
    return out


def _distance(kin: Kinematics, a: State, b: State) -> float:
    (ax, ay), (bx, by) = kin.offset(a), kin.offset(b)
    return float(np.hypot(ax - bx, ay - by))


def inverse(kin: Kinematics, rng: np.random.Generator, hard: bool) -> Built:
    space = kin.space
    n = space.actions
    for _ in range(DRAWS):
        k = int(rng.integers(min(10, n // 2), min(20, n // 2) + 1))
        a = _blocks(kin, rng, k, tuple(sorted(TURNS)) if hard else tuple(sorted(LOOKS)))
        pad = 0 if hard else n - 2 * k
        seq = _pad(a + ["no_op"] * pad + inverse_of(a), n)
        states = kin.run(seq, ORIGIN)
        turn = states[k]
        witness = ""
        if hard:
            shortcut = kin.run(seq, ORIGIN, commuting=True)[k]
            miss = _distance(kin, turn, shortcut)
            if miss < space.translation_m:
                continue
            witness = f"a commuting model puts the turnaround {miss:.2f} m from where it is"
        if not kin.same(states[-1], states[0]) or kin.same(turn, states[0]):
            continue
        last = space.frames - 1
        return Built(
            "A_inverse" if hard else "A_pad_inverse",
            seq,
            [(0, last, 0.0)],
            [space.end_frame(k - 1), last],
            witness,
        )
    raise NoConstruction("no inverse path fits the action space")


def _return(kin: Kinematics, state: State) -> tuple[list[str], float]:
    """The five-stage discrete return from ``state`` and its horizontal residual (m)."""
    n = kin.n
    out: list[str] = []
    h = state.heading % n
    out += ["turn_right"] * h if h <= n // 2 else ["turn_left"] * (n - h)
    out += ["look_down"] * state.pitch if state.pitch > 0 else ["look_up"] * -state.pitch
    dx, dy = kin.offset(state)
    t = kin.space.translation_m
    fwd, left = round(dx / t), round(dy / t)  # the root frame: heading 0 is +x, left is +y
    out += ["move_backward"] * fwd if fwd > 0 else ["move_forward"] * -fwd
    out += ["move_right"] * left if left > 0 else ["move_left"] * -left
    return out, float(np.hypot(dx - fwd * t, dy - left * t))


def loop_easy(kin: Kinematics, rng: np.random.Generator) -> Built:
    space = kin.space
    n = space.actions
    rotations = tuple(sorted(ROTATIONS))
    for _ in range(DRAWS):
        e = int(rng.integers(min(8, n // 2), min(20, n // 2) + 1))
        explore = _blocks(kin, rng, e, rotations, max_block=3)
        end = kin.run(explore, ORIGIN)[-1]
        back, residual = _return(kin, end)
        if len(explore) + len(back) > n or residual >= RESIDUAL_H * space.translation_m:
            continue
        if _distance(kin, end, State.root(space)) < space.translation_m:
            continue  # an exploration that never left
        seq = _pad(explore + back, n)
        states = kin.run(seq, ORIGIN)
        if states[-1].heading != 0 or states[-1].pitch != 0:
            continue
        last = space.frames - 1
        return Built(
            "explore_return",
            seq,
            [(0, last, round(residual, 6))],
            [space.end_frame(e - 1), last],
            residual_m=round(residual, 6),
        )
    raise NoConstruction("no exploration returns within the card's residual in this action space")


POLYGONS = {"rectangle": 4, "triangle": 3, "hexagon": 6}


def loop_hard(kin: Kinematics, rng: np.random.Generator) -> Built:
    space = kin.space
    n = space.actions
    shapes = list(POLYGONS)
    for _ in range(DRAWS):
        shape = shapes[int(rng.integers(len(shapes)))]
        corners = POLYGONS[shape]
        if (kin.n % corners) or kin.n // corners < 1:
            continue
        turn = ["turn_left" if rng.random() < 0.5 else "turn_right"] * (kin.n // corners)
        room = (n - corners * len(turn)) // corners
        if room < 1:
            continue
        if shape == "rectangle":
            a, b = int(rng.integers(1, room + 1)), int(rng.integers(1, room + 1))
            if 2 * (a + b) + 4 * len(turn) > n or a == b:
                continue
            sides = [a, b, a, b]
        else:
            sides = [int(rng.integers(1, room + 1))] * corners
        seq: list[str] = []
        vertices: list[int] = []
        for s in sides:
            seq += ["move_forward"] * s
            vertices.append(len(seq) - 1)
            seq += turn
        seq = _pad(seq, n)
        states = kin.run(seq, ORIGIN)
        commuting = kin.run(seq, ORIGIN, commuting=True)[-1]
        if not kin.same(states[-1], states[0]) or kin.same(commuting, states[0]):
            continue
        last = space.frames - 1
        miss = _distance(kin, commuting, states[0])
        return Built(
            shape,
            seq,
            [(0, last, 0.0)],
            [space.end_frame(v) for v in vertices] + [last],
            f"a commuting model never closes the {shape}: it ends {miss:.2f} m from the start",
        )
    raise NoConstruction("no polygon fits the action space")


def _segments(actions: list[str]) -> list[list[str]]:
    """Maximal runs of translations or of rotations (no_op ends a run)."""
    out: list[list[str]] = []
    kind = None
    for a in actions:
        k = "t" if a in TRANSLATIONS else "r" if a in ROTATIONS else None
        if k is None or k != kind or not out:
            out.append([])
        out[-1].append(a)
        kind = k
    return out


def equivalence(kin: Kinematics, rng: np.random.Generator, stage: int) -> Built:
    """Stage 1: a commutative shuffle; stage 2 (or a path stage 1 cannot shuffle): L against zig-zag."""
    space = kin.space
    n = space.actions
    last = space.frames - 1
    for _ in range(DRAWS if stage == 1 else 0):
        length = int(rng.integers(min(10, n), min(20, n) + 1))
        a = _blocks(kin, rng, length, tuple(sorted(ROTATIONS)), max_block=4)
        b: list[str] = []
        for seg in _segments(a):
            seg = list(seg)
            for i in range(len(seg) - 1, 0, -1):  # Fisher-Yates
                j = int(rng.integers(i + 1))
                seg[i], seg[j] = seg[j], seg[i]
            b += seg
        if a == b:
            continue
        sa, sb = kin.run(a, ORIGIN), kin.run(b, ORIGIN)
        if not kin.same(sa[-1], sb[-1]):
            continue
        end = len(a) - 1
        return Built(
            "commutative_shuffle",
            _pad(a, n),
            [(last, last, 0.0)],
            [space.end_frame(end), last],
            partner=_pad(b, n),
        )
    for _ in range(DRAWS):
        m, k_n = int(rng.integers(3, 7)), int(rng.integers(3, 7))
        if m + k_n > n:
            continue
        u = ("move_forward", "move_backward")[int(rng.integers(2))]
        v = ("move_left", "move_right")[int(rng.integers(2))]
        if rng.random() < 0.5:
            u, v = v, u
        k = int(rng.integers(1, min(m, k_n)))
        a = [u] * m + [v] * k_n
        b = [v, u] * k + [v] * (k_n - k) + [u] * (m - k)
        fill: list[str] = []
        pairs = [
            ("turn_left", "turn_right"),
            ("turn_right", "turn_left"),
            ("look_up", "look_down"),
            ("look_down", "look_up"),
        ]
        while len(a) + len(fill) + 2 <= n:
            fill += list(pairs[int(rng.integers(len(pairs)))])
        a, b = _pad(a + fill, n), _pad(b + fill, n)
        sa, sb = kin.run(a, ORIGIN), kin.run(b, ORIGIN)
        inner_a = {kin.offset(s) for s in sa[1 : m + k_n]}
        inner_b = {kin.offset(s) for s in sb[1 : m + k_n]}
        if not kin.same(sa[-1], sb[-1]) or inner_a & inner_b:
            continue
        end = m + k_n - 1
        return Built(
            "l_shape_zigzag",
            a,
            [(last, last, 0.0)],
            [space.end_frame(end), last],
            partner=b,
        )
    raise NoConstruction("no equivalent pair fits the action space")


def equivalence_hard(kin: Kinematics, rng: np.random.Generator) -> Built:
    """Two paths to one state that a commuting model tells apart (see the module docstring)."""
    space = kin.space
    n = space.actions
    q = kin.n // 4  # a quarter turn, whole steps by the action space's rule
    last = space.frames - 1
    sides = {"move_left": ("turn_left", "turn_right"), "move_right": ("turn_right", "turn_left")}
    for _ in range(DRAWS):
        m = int(rng.integers(3, 7))
        room = n - m - 2 * q
        if room < 2:
            break
        k1 = int(rng.integers(1, max(1, room - 1) + 1))
        k2 = int(rng.integers(1, room - k1 + 1)) if room - k1 >= 1 else 0
        before = _blocks(kin, rng, k1, tuple(sorted(TURNS)))
        after = _blocks(kin, rng, k2, tuple(sorted(TURNS))) if k2 else []
        side = ("move_left", "move_right")[int(rng.integers(2))]
        into, back = sides[side]
        turning = before + [into] * q + ["move_forward"] * m + [back] * q + after
        fill: list[str] = []
        while len(fill) < 2 * q:
            fill += list((("turn_left", "turn_right"), ("turn_right", "turn_left"))[int(rng.integers(2))])
        stepping = before + [side] * m + after + fill
        a, b = (turning, stepping) if rng.random() < 0.5 else (stepping, turning)
        sa, sb = kin.run(a, ORIGIN), kin.run(b, ORIGIN)
        ca, cb = kin.run(a, ORIGIN, commuting=True), kin.run(b, ORIGIN, commuting=True)
        apart = _distance(kin, ca[-1], cb[-1])
        if (
            a == b
            or len(a) != len(b)
            or not kin.same(sa[-1], sb[-1])
            or kin.same(sa[-1], sa[0])
            or apart < space.translation_m
            or min(_distance(kin, ca[-1], sa[-1]), _distance(kin, cb[-1], sb[-1])) < space.translation_m
        ):
            continue
        return Built(
            "turned_side_step",
            _pad(a, n),
            [(last, last, 0.0)],
            sorted({space.end_frame(len(a) - 1), last}),
            f"a commuting model puts the two paths' ends {apart:.2f} m apart",
            partner=_pad(b, n),
        )
    raise NoConstruction("no hard equivalent pair fits the action space")


def random_walk(kin: Kinematics, rng: np.random.Generator) -> Built:
    """Actions drawn uniformly (no identity): the kind of path that fills ``random_walk/``."""
    out: list[str] = []
    state = State.root(kin.space)
    moves_and_rotations = tuple(sorted(TRANSLATIONS | ROTATIONS))
    for _ in range(kin.space.actions):
        choices = [a for a in moves_and_rotations if kin.allowed(state, a)]
        a = choices[int(rng.integers(len(choices)))]
        out.append(a)
        state = kin.apply(state, a)
    return Built("random_walk", out, [], [kin.space.frames - 1])


def build(split: str, kin: Kinematics, rng: np.random.Generator, index: int = 0) -> Built:
    """The construction of ``split``; ``index`` alternates equivalence's two stages."""
    if split in ("inverse_easy", "inverse_hard"):
        return inverse(kin, rng, hard=split == "inverse_hard")
    if split == "loop_easy":
        return loop_easy(kin, rng)
    if split == "loop_hard":
        return loop_hard(kin, rng)
    if split == "equivalence_easy":
        return equivalence(kin, rng, stage=1 + index % 2)
    if split == "equivalence_hard":
        return equivalence_hard(kin, rng)
    if split == "random_walk":
        return random_walk(kin, rng)
    raise ValueError(f"unknown split {split!r}")
