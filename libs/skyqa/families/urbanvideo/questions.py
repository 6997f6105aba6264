"""The 16 UrbanVideo-Bench question types, each answered from a navigation mission's recorded
geometry: the planned segments and their reasons, the per-frame drone states, the landmarks'
boxes, the renderer's per-frame visibility and the planner's judged alternatives.

A builder returns every question of its type the mission supports (a candidate), gold option
first; the family keeps one per type, balancing gold answers across missions. Questions asked
"now" show the video cut at a segment's last frame. Every answer needs a margin (angles 15
degrees from a boundary, distances and durations 30 % apart, boxes 5 % of the width from a
third) and every landmark an option names was seen in the frames the row shows, unless the
question is about what was not in view.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.navigation import NavigationTask, NavSegment
from skyqa.contracts.urbanvideo import NavTask
from skyqa.families.structure import MAX_SIMILARITY
from skyqa.families.urbanvideo import words as W
from skyqa.vocab.directions import similarity

MIN_SEEN = 3  # frames a landmark must be visible in to count as seen
WINDOW_S = 2.0  # a Scene Recall moment
ANGLE_MARGIN = 15.0
RATIO = 1.3
THIRD_MARGIN = 0.05
Evidence = dict[str, str | int | float | bool | list[str] | list[float]]


@dataclass(frozen=True)
class Question:
    task: NavTask
    end_frame: int  # the last frame shown
    question: str
    options: tuple[str, ...]  # the gold first
    key: str  # the gold's class, for balancing across missions
    evidence: Evidence = field(default_factory=dict)


class Mission:
    """A navigation task with the lookups every question needs."""

    def __init__(self, task: NavigationTask) -> None:
        self.task = task
        self.fps = task.fps
        self.last = task.frame_count - 1
        self.names = {lm.landmark_id: lm.description for lm in task.landmarks}
        self.lo = {lm.landmark_id: np.array(lm.center) - np.array(lm.size) / 2 for lm in task.landmarks}
        self.hi = {lm.landmark_id: np.array(lm.center) + np.array(lm.size) / 2 for lm in task.landmarks}
        self.center = {lm.landmark_id: np.array(lm.center) for lm in task.landmarks}
        self.at = np.array([[p.x, p.y, p.z] for p in task.poses])
        self.goal = task.route[-1]
        self.part = task.goal_part

    def seen(self, lid: str, a: int = 0, b: int | None = None) -> int:
        frames = self.task.visibility.get(lid, [])
        return sum(1 for f in frames[a : (self.last if b is None else b) + 1] if f.visible)

    def seen_in(self, a: int, b: int) -> list[str]:
        return [lid for lid in self.names if self.seen(lid, a, b) >= MIN_SEEN]

    def gap(self, lid: str, points: NDArray[np.float64]) -> NDArray[np.float64]:
        """Distance from each point to the landmark's box."""
        d = np.maximum(np.maximum(self.lo[lid] - points, points - self.hi[lid]), 0.0)
        out: NDArray[np.float64] = np.linalg.norm(d, axis=-1)
        return out

    def box_gap(self, a: str, b: str) -> float:
        d = np.maximum(np.maximum(self.lo[a] - self.hi[b], self.lo[b] - self.hi[a]), 0.0)
        return float(np.linalg.norm(d))

    def cuts(self) -> list[NavSegment]:
        """Segments whose last frame a "now" question may be asked at (not the final one)."""
        return [s for s in self.task.segments[:-1] if s.end_frame >= self.fps]  # at least a second in

    def blocker(self, s: NavSegment) -> str:
        return self.names.get(s.blocked_by, "")

    def leg_blocker(self, s: NavSegment) -> str:
        return self.names.get(leg_blocker(self.task, s.leg), "")

    def reason(self, s: NavSegment) -> str:
        return W.reason_text(s.reason, self.names[s.toward], self.leg_blocker(s), self.part)

    def span(self, s: NavSegment) -> str:
        end = min(s.end_frame + 1, self.last)  # the last segment ends on the video's last frame
        return f"from {W.seconds(s.start_frame, self.fps)} to {W.seconds(end, self.fps)}"


def leg_blocker(task: NavigationTask, leg: int) -> str:
    """The landmark id that made the leg avoid something, else ""."""
    return next((s.blocked_by for s in task.segments if s.leg == leg and s.blocked_by), "")


def _nearest(values: dict[str, float]) -> str | None:
    """The key of the smallest value when the next is at least RATIO times larger (and 5 m)."""
    ranked = sorted(values.items(), key=lambda kv: kv[1])
    if len(ranked) < 2 or ranked[1][1] < max(ranked[0][1] * RATIO, ranked[0][1] + 5.0):
        return None
    return ranked[0][0]


def _relative_bearing(m: Mission, lid: str, frame: int) -> float:
    p = m.task.poses[frame]
    c = m.center[lid]
    bearing = math.degrees(math.atan2(c[1] - p.y, c[0] - p.x))
    return (bearing - p.yaw_deg + 180.0) % 360.0 - 180.0


def _quadrant(rel: float) -> str | None:
    """The QUADRANTS label of a relative bearing, or None within the margin of a boundary."""
    if min(abs(rel), abs(abs(rel) - 90.0), 180.0 - abs(rel)) < ANGLE_MARGIN:
        return None
    return W.QUADRANTS[(0 if abs(rel) < 90.0 else 2) + (0 if rel > 0 else 1)]


def _four(gold: str, pool: list[str]) -> tuple[str, ...] | None:
    """The gold and up to three distractors from ``pool``, in its order, each no more similar
    than QC allows to any option already taken; None below two distractors."""
    chosen = [gold]
    for p in dict.fromkeys(pool):
        if len(chosen) == 4:
            break
        if all(similarity(p, c) <= MAX_SIMILARITY for c in chosen):
            chosen.append(p)
    return tuple(chosen) if len(chosen) >= 3 else None


# -- recall ------------------------------------------------------------------------------


Flight = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # landmarks, turns, ways, per leg


def caption_text(
    names: Sequence[str], turns: Sequence[str], ways: Sequence[str], blockers: Sequence[str]
) -> str:
    """Terse, so options differ by what matters: "turn left, stone fountain, climb over the red
    brick hall, grey office tower" (per leg: its opening turn, how it avoided what, where to)."""
    parts = []
    for name, turn, way, blocker in zip(names, turns, ways, blockers, strict=True):
        parts += [f"turn {turn}"] if turn else []
        parts += [f"{way} {W.obstacle(blocker)}"] if way else []
        parts.append(name)
    return ", ".join(parts)


TURNED = {"left": "right", "right": "left", "": ""}
AVOIDED = {"climb over": "go around", "go around": "climb over", "": ""}


def trajectory_captioning(m: Mission) -> Iterator[Question]:
    legs = sorted({s.leg for s in m.task.segments})
    turns, ways, blockers = [], [], []
    for leg in legs:
        first = next(s for s in m.task.segments if s.leg == leg)
        turned = first.reason == "face_landmark" and first.amount >= 20.0
        turns.append(first.action.removeprefix("turn_") if turned else "")
        avoid = next((s for s in m.task.segments if s.leg == leg and s.blocked_by), None)
        ways.append("" if avoid is None else "climb over" if avoid.action == "ascend" else "go around")
        blockers.append("" if avoid is None else m.blocker(avoid))

    def caption(f: Flight) -> str:
        return caption_text([m.names[lid] for lid in f[0]], f[1], f[2], blockers)

    def reverse(f: Flight) -> Flight:
        return f[0][::-1], f[1], f[2]

    def flip(k: int) -> Callable[[Flight], Flight]:
        return lambda f: (f[0], tuple(TURNED[t] if j == k else t for j, t in enumerate(f[1])), f[2])

    def swap(k: int) -> Callable[[Flight], Flight]:
        return lambda f: (f[0], f[1], tuple(AVOIDED[w] if j == k else w for j, w in enumerate(f[2])))

    def replace(i: int, lid: str) -> Callable[[Flight], Flight]:
        return lambda f: ((*f[0][:i], lid, *f[0][i + 1 :]), f[1], f[2])

    single: list[Callable[[Flight], Flight]] = [reverse] if len(legs) > 1 else []
    single += [flip(k) for k, t in enumerate(turns) if t]
    single += [swap(k) for k, w in enumerate(ways) if w]
    single += [replace(i, lid) for i in range(len(legs)) for lid in m.names if lid not in m.task.route]

    def both(a: Callable[[Flight], Flight], b: Callable[[Flight], Flight]) -> Callable[[Flight], Flight]:
        return lambda f: b(a(f))

    # one changed word in a long caption is too close to tell apart (QC's 0.85): edits of two
    # changes each are tried after the single ones
    edits = single + [both(a, b) for n, a in enumerate(single) for b in single[n + 1 :]]
    # Options form a square: the flight, two single edits of it and both edits together. Each
    # option then differs from two others by one edit and from one by two, so the gold is not
    # the option that overlaps the rest most (which one-edit distractors all around it make it).
    flown: Flight = (tuple(m.task.route), tuple(turns), tuple(ways))
    for n, e1 in enumerate(edits):
        for e2 in edits[n + 1 :]:
            square = [caption(flown), caption(e1(flown)), caption(e2(flown)), caption(e2(e1(flown)))]
            if len(set(square)) == 4 and all(
                similarity(x, y) <= MAX_SIMILARITY for k, x in enumerate(square) for y in square[k + 1 :]
            ):
                q = "Which sequence sums up the drone's whole flight?"
                yield Question(
                    "trajectory_captioning",
                    m.last,
                    q,
                    tuple(square),
                    square[0],
                    {"route": list(m.task.route)},
                )
                return


def sequence_recall(m: Mission) -> Iterator[Question]:
    segs = m.task.segments
    for s, nxt in pairwise(segs):
        if nxt.action == s.action:
            continue
        gold = W.PAST[nxt.action]
        pool = [W.PAST[a] for a in W.PAST if a not in (nxt.action,)]
        options = _four(gold, pool[s.index % len(pool) :] + pool[: s.index % len(pool)])
        if options is None:
            continue
        q = f"What did the drone do right after what it did {m.span(s)}?"
        yield Question(
            "sequence_recall", m.last, q, options, nxt.action, {"segment": s.index, "next": nxt.index}
        )


def object_recall(m: Mission) -> Iterator[Question]:
    seen = m.seen_in(0, m.last)
    for lid in seen:
        others = [o for o in m.names if o != lid]
        near = _nearest({o: m.box_gap(lid, o) for o in others})
        if near is None or near not in seen:
            continue
        options = _four(m.names[near], [m.names[o] for o in others])
        if options is not None:
            q = f"Which of these landmarks stands closest to the {m.names[lid]}?"
            yield Question(
                "object_recall", m.last, q, options, options[0], {"landmark": lid, "nearest": near}
            )


def scene_recall(m: Mission) -> Iterator[Question]:
    """Over a window of ``WINDOW_S`` inside one segment (stepping a second): the one landmark
    in view for at least half of it, when at least two others show not a pixel in it."""
    size, step = round(WINDOW_S * m.fps), round(m.fps)
    for s in m.task.segments:
        for a in range(s.start_frame, s.end_frame - size + 2, step):
            b = a + size - 1
            inside = [lid for lid in m.names if m.seen(lid, a, b) * 2 >= size]
            outside = [lid for lid in m.names if not any(f.pixels for f in m.task.visibility[lid][a : b + 1])]
            if len(inside) != 1 or len(outside) < 2:
                continue
            options = _four(m.names[inside[0]], [m.names[o] for o in outside])
            if options is not None:
                q = (f"Which landmark was in view while the drone {W.PAST[s.action]}, between "
                     f"{W.seconds(a, m.fps)} and {W.seconds(b + 1, m.fps)}?")  # fmt: skip
                evidence: Evidence = {"start": a, "end": b, "landmark": inside[0]}
                yield Question("scene_recall", m.last, q, options, options[0], evidence)


def start_end_position(m: Mission) -> Iterator[Question]:
    start = _nearest({lid: float(m.gap(lid, m.at[0])) for lid in m.names})
    end = _nearest({lid: float(m.gap(lid, m.at[-1])) for lid in m.names})
    if start is None or end is None or len(m.names) < 2:
        return
    if m.seen(start, 0, min(m.last, int(5 * m.fps))) < 1 or not m.task.visibility[end][-1].visible:
        return
    fmt = "from the {} to the {}"
    gold = fmt.format(m.names[start], m.names[end])
    ids = list(m.names)
    pool = [fmt.format(m.names[a], m.names[b]) for a in ids for b in ids if (a, b) != (start, end)]
    pool.sort(key=lambda t: (t.count(m.names[start]) + t.count(m.names[end])) * -1)  # near misses first
    options = _four(gold, pool)
    if options is not None:
        q = "From which landmark's side did the drone start, and at which did it stop?"
        yield Question("start_end_position", m.last, q, options, options[0], {"start": start, "end": end})


# -- perception --------------------------------------------------------------------------


def proximity(m: Mission) -> Iterator[Question]:
    for s in m.cuts():
        if s.action not in ("fly_forward", "ascend", "descend"):
            continue  # turning or tilting in place leaves every distance as it was: no question
        for lid in m.seen_in(s.start_frame, s.end_frame):
            d = m.gap(lid, m.at[s.start_frame : s.end_frame + 2])
            d0, d1, low = float(d[0]), float(d[-1]), float(d.min())
            tol = max(3.0, 0.1 * d0)
            if low < min(d0, d1) - tol:
                key = 3
            elif abs(d1 - d0) < tol / 2:
                key = 2
            elif abs(d1 - d0) >= tol:
                key = 0 if d1 < d0 else 1
            else:
                continue
            q = (f"How did the distance between the drone and the {m.names[lid]} change while it "
                 f"{W.PAST[s.action]} {m.span(s)}?")  # fmt: skip
            options = (W.PROXIMITY[key], *[p for i, p in enumerate(W.PROXIMITY) if i != key])
            evidence: Evidence = {"landmark": lid, "segment": s.index, "start_m": round(d0, 2),
                                  "end_m": round(d1, 2), "min_m": round(low, 2)}  # fmt: skip
            yield Question("proximity", s.end_frame + 1, q, options, W.PROXIMITY[key], evidence)


def duration(m: Mission) -> Iterator[Question]:
    # named by what the flight was for, never by its times (which would give the answer away)
    what = {
        "approach_landmark": "the straight flight to the {}",
        "avoid_obstacle": "the side step around {}",
        "pass_obstacle": "the flight over {}",  # nosec B105: a reason code, not a password
    }
    named = [
        (
            s,
            what[s.reason].format(
                m.names[s.toward] if s.reason == "approach_landmark" else W.obstacle(m.leg_blocker(s))
            ),
        )
        for s in m.task.segments
        if s.action == "fly_forward" and s.reason in what
    ]
    counts: dict[str, int] = {}
    for _, phrase in named:
        counts[phrase] = counts.get(phrase, 0) + 1
    segs = [s for s, phrase in named if counts[phrase] == 1]
    phrases = {s.index: phrase for s, phrase in named if counts[phrase] == 1}
    for a, b in ((a, b) for a in segs for b in segs if a.index != b.index):  # both orders
        na, nb = a.end_frame - a.start_frame + 1, b.end_frame - b.start_frame + 1
        ratio = max(na, nb) / min(na, nb)
        if ratio >= RATIO:
            key = 0 if na > nb else 1
        elif ratio <= 1.1:
            key = 2
        else:
            continue
        q = f"Which took longer: {phrases[a.index]}, or {phrases[b.index]}?"
        options = (W.LONGER[key], *[p for i, p in enumerate(W.LONGER) if i != key])
        yield Question(
            "duration",
            min(max(a.end_frame, b.end_frame) + 1, m.last),
            q,
            options,
            W.LONGER[key],
            {"first": a.index, "second": b.index, "frames": [float(na), float(nb)]},
        )


def landmark_position(m: Mission) -> Iterator[Question]:
    for s in m.cuts():
        t = s.end_frame + 1
        p = m.task.poses[t]
        for lid in m.seen_in(0, t):
            lm_size = m.hi[lid] - m.lo[lid]
            if (
                math.hypot(m.center[lid][0] - p.x, m.center[lid][1] - p.y)
                < math.hypot(*lm_size[:2]) / 2 + 5.0
            ):
                continue  # over or beside its footprint: no bearing to speak of
            label = _quadrant(_relative_bearing(m, lid, t))
            if label is None:
                continue
            q = f"Where is the {m.names[lid]} relative to the drone now?"
            options = (label, *[x for x in W.QUADRANTS if x != label])
            yield Question(
                "landmark_position",
                t,
                q,
                options,
                label,
                {"landmark": lid, "frame": t, "bearing_deg": round(_relative_bearing(m, lid, t), 2)},
            )


def goal_detection(m: Mission) -> Iterator[Question]:
    frames = m.task.visibility[m.goal]
    for s in m.cuts():
        t = s.end_frame + 1
        f = frames[t]
        if not f.visible:
            if f.pixels:
                continue  # a sliver: neither clearly in view nor out of it
            key = 0
        else:
            cx = (f.bbox_xyxy_norm[0] + f.bbox_xyxy_norm[2]) / 2
            if min(abs(cx - 1 / 3), abs(cx - 2 / 3)) < THIRD_MARGIN:
                continue
            key = 1 if cx < 1 / 3 else 2 if cx < 2 / 3 else 3
        q = f"The drone is flying to the {m.names[m.goal]}. Is it in view now, and if so, where in the image?"
        options = (W.IN_VIEW[key], *[x for i, x in enumerate(W.IN_VIEW) if i != key])
        yield Question("goal_detection", t, q, options, W.IN_VIEW[key], {"frame": t, "landmark": m.goal})


def cognitive_map(m: Mission) -> Iterator[Question]:
    yaw = math.radians(m.task.poses[0].yaw_deg)
    fwd, left = np.array([math.cos(yaw), math.sin(yaw)]), np.array([-math.sin(yaw), math.cos(yaw)])
    seen = m.seen_in(0, m.last)
    for a in seen:
        for b in seen:
            if a == b:
                continue
            v = m.center[b][:2] - m.center[a][:2]
            f, lft = float(v @ fwd), float(v @ left)
            if max(abs(f), abs(lft)) < RATIO * min(abs(f), abs(lft)) or max(abs(f), abs(lft)) < 10.0:
                continue
            key = (0 if f > 0 else 1) if abs(f) > abs(lft) else (2 if lft > 0 else 3)
            q = (f"Facing the way the drone faced when it started, where is the {m.names[b]} "
                 f"relative to the {m.names[a]}?")  # fmt: skip
            options = (W.LAYOUT[key], *[x for i, x in enumerate(W.LAYOUT) if i != key])
            yield Question(
                "cognitive_map", m.last, q, options, W.LAYOUT[key], {"reference": a, "landmark": b}
            )


# -- reasoning ---------------------------------------------------------------------------


def causal(m: Mission) -> Iterator[Question]:
    reasons = {s.index: m.reason(s) for s in m.task.segments}
    for s in m.task.segments:
        gold = reasons[s.index]
        pool = [
            r
            for i, r in reasons.items()
            if r != gold and m.task.segments[i].reason != s.reason and not _both_fit(s, m.task.segments[i])
        ]
        options = _four(gold, pool)
        if options is None:
            continue
        q = f"Why did the drone do what it did {m.span(s)}?"
        end = min(s.end_frame + 1, m.last)
        yield Question("causal", end, q, options, s.reason, {"segment": s.index, "reason": s.reason})


def _both_fit(a: NavSegment, b: NavSegment) -> bool:
    """Turning to face a landmark, looking at it and flying to it serve one purpose; for the
    same landmark, either reason fits the other's segment, so neither is the other's distractor."""
    aims = {"face_landmark", "look_at_landmark", "approach_landmark"}
    return a.toward == b.toward and a.reason in aims and b.reason in aims


def counterfactual(m: Mission) -> Iterator[Question]:
    ways = {
        "straight": "flown straight on at its height",
        "over": "climbed over what was ahead",
        "around_left": "flown around to the left",
        "around_right": "flown around to the right",
    }
    for alt in m.task.alternatives:
        chosen = next((a for a in m.task.alternatives if a.leg == alt.leg and a.chosen), None)
        # straight on is an unflown alternative only when blocked: asking it would give the
        # answer away
        if chosen is None or alt.chosen or chosen.seconds is None or alt.option == "straight":
            continue
        # where the planner judged the ways: after turning, tilting and any climb to a roof
        decided = next(
            (
                s
                for s in m.task.segments
                if s.leg == alt.leg
                and s.reason not in ("face_landmark", "look_at_landmark", "match_goal_height")
            ),
            None,
        )
        if decided is None:
            continue
        key = 0 if alt.feasible else 1
        q = (f"At {W.seconds(decided.start_frame, m.fps)}, on its way to the {m.names[alt.toward]}, "
             f"could the drone have {ways[alt.option]} instead?")  # fmt: skip
        options = (W.COUNTERFACTUAL[key], *[x for i, x in enumerate(W.COUNTERFACTUAL) if i != key])
        yield Question("counterfactual", decided.start_frame, q, options, W.COUNTERFACTUAL[key],
                       {"leg": alt.leg, "option": alt.option, "chosen": chosen.option})  # fmt: skip


def association(m: Mission) -> Iterator[Question]:
    frames = m.task.visibility[m.goal]
    for s in m.cuts():
        t = s.end_frame + 1
        if frames[t].pixels:
            continue
        near = _nearest({lid: m.box_gap(m.goal, lid) for lid in m.names if lid != m.goal})
        if near is None or m.seen(near, 0, t) < MIN_SEEN:
            continue
        options = _four(m.names[near], [m.names[lid] for lid in m.names if lid not in (m.goal, near)])
        if options is not None:
            q = (f"The drone is flying to the {m.names[m.goal]}, which is out of view now. Which landmark "
                 "stands closest to it?")  # fmt: skip
            yield Question("association", t, q, options, options[0], {"frame": t, "nearest": near})


# -- navigation --------------------------------------------------------------------------


def progress_evaluation(m: Mission) -> Iterator[Question]:
    if m.task.kind != "route":
        return
    steps = [*W.route_steps(m.task.instruction), "the route is complete"]
    if len(steps) != len(m.task.route) + 1:
        return
    for s in m.cuts():
        t, nxt = s.end_frame + 1, m.task.segments[s.index + 1]
        if nxt.leg != s.leg:
            continue  # between two steps: either answer would be fair
        key = len(m.task.route) if nxt.action == "hover" else s.leg
        options = _four(steps[key], steps)
        if options is not None:
            q = f'The drone follows this route: "{m.task.instruction}" Which step is it on now?'
            yield Question("progress_evaluation", t, q, options, f"step {key}", {"frame": t, "leg": s.leg})


def high_level_planning(m: Mission) -> Iterator[Question]:
    plans = {
        s.index: W.plan_text(s.reason, m.names[s.toward], m.leg_blocker(s), m.part) for s in m.task.segments
    }
    for s in m.cuts():
        nxt = m.task.segments[s.index + 1]
        gold = plans[nxt.index]
        pool = [
            p
            for i, p in plans.items()
            if p != gold
            and m.task.segments[i].reason != nxt.reason
            and not _both_fit(nxt, m.task.segments[i])
        ]
        options = _four(gold, pool)
        if options is not None:
            q = f'The drone\'s task: "{m.task.instruction}" What should it do next from here?'
            yield Question(
                "high_level_planning", s.end_frame + 1, q, options, nxt.reason, {"next": nxt.index}
            )


def action_generation(m: Mission) -> Iterator[Question]:
    for s in m.cuts():
        nxt = m.task.segments[s.index + 1]
        gold = W.COMMAND[nxt.action]
        # once facing a landmark, looking at it and flying to it are both fair next moves: the
        # one the drone did not make is no distractor
        fair = (
            {"fly_forward", "rotate_camera_up", "rotate_camera_down"}
            if s.reason == "face_landmark"
            else set()
        )
        pool = [W.COMMAND[a] for a in W.COMMAND if a != nxt.action and not (nxt.action in fair and a in fair)]
        options = _four(gold, pool[s.index % len(pool) :] + pool[: s.index % len(pool)])
        if options is not None:
            q = f'The drone\'s task: "{m.task.instruction}" What is its next control action?'
            yield Question("action_generation", s.end_frame + 1, q, options, nxt.action, {"next": nxt.index})


BUILDERS: dict[NavTask, Callable[[Mission], Iterator[Question]]] = {
    "trajectory_captioning": trajectory_captioning,
    "sequence_recall": sequence_recall,
    "object_recall": object_recall,
    "scene_recall": scene_recall,
    "start_end_position": start_end_position,
    "proximity": proximity,
    "duration": duration,
    "landmark_position": landmark_position,
    "goal_detection": goal_detection,
    "cognitive_map": cognitive_map,
    "causal": causal,
    "counterfactual": counterfactual,
    "association": association,
    "progress_evaluation": progress_evaluation,
    "high_level_planning": high_level_planning,
    "action_generation": action_generation,
}
