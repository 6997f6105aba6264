"""The 16 UrbanVideo-Bench question types, each answered from a navigation mission's recorded
geometry: the planned segments and their reasons, the per-frame drone states, the landmarks'
boxes, the renderer's per-frame visibility and the planner's judged alternatives.

A builder yields every question of its type the mission supports (a candidate), gold option
first; the family keeps some per type, balancing gold answers across missions. Questions asked
"now" show the video cut at that moment. Every answer needs a margin (angles 15 degrees from a
boundary, distances and durations 30 % apart, boxes 5 % of the width from a third) and every
landmark an option names was seen in the frames the row shows, unless the question is about
what was not in view.

What a model could answer without the video is kept out by construction (no-pixel solvers
trained on other missions' rows are the release gate's net, not the method):

- option sets are exchangeable. A type whose answers come from one fixed vocabulary
  (:data:`VOCABULARY`: actions, reasons, plan steps, positions) offers the gold and labels
  drawn uniformly from the labels the plan offers (:func:`from_vocabulary`), and the family
  makes each offered label the answer equally often (per difficulty, and per goal or route
  where the question quotes the instruction); a design with pairs never offered together, or
  sets filtered by their wording, would leave some labels in fewer sets, and a balanced gold
  then more often one of those. A type whose options are landmarks draws one of the alike
  sets (:func:`skyqa.families.options.singled_out`, decided from the set alone) of a universe
  that does not depend on the gold, equally likely whichever member is the gold (:func:`draw`);
- a question's words never decide its answer class: a moment is named by the move made there,
  in words (as the source does; never by a time, which a person cannot find and which tells
  the flight's phase), and that move's reason is the row's stratum, within which every answer
  is asked equally often (after "climbed to get above" the drone mostly flies on over);
  duration compares flights of one kind, a counterfactual's way is balanced per answer;
- every row has the source's number of options for its task (:data:`OPTIONS`), or is not
  asked;
- a fact of the scene's geometry that several missions could ask (which landmark is nearest
  another, how two landmarks lie) carries a key (:attr:`Question.fact`) and is asked once;
  a question whose words hold no moment (an instruction quoted) is asked by one mission;
- a landmark is named only when its description is unique among the mission's landmarks
  (:attr:`Mission.unique`), in questions and options alike.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations, pairwise, permutations

import numpy as np
from numpy.typing import NDArray

from skyqa.contracts.navigation import NavigationTask, NavSegment
from skyqa.contracts.urbanvideo import NavTask
from skyqa.families import options as O
from skyqa.families.structure import MAX_SIMILARITY
from skyqa.families.urbanvideo import words as W
from skyqa.sim.camera import Intrinsics, rotation_matrix
from skyqa.vocab.directions import similarity

MIN_SEEN = 3  # frames a landmark must be visible in to count as seen
DIRECTION_MARGIN = 7.5  # degrees inside a 45-degree sector's edge: a person could say either
RATIO = 1.3
THIRD_MARGIN = 0.05  # of the image width, from the edge of a fifth
K = 4  # options a row offers where its universe allows
# options per row, as the source's tasks have them (its examples and its random baseline: five
# for most, three for Duration, Proximity and Counterfactual, seven actions for Action
# Generation); a row that cannot have them all plausible is not asked
OPTIONS: dict[str, int] = {
    "trajectory_captioning": 5,
    "sequence_recall": 5,
    "object_recall": 5,
    "scene_recall": 5,
    "start_end_position": 5,
    "proximity": 3,
    "duration": 3,
    "landmark_position": 5,
    "goal_detection": 5,
    "cognitive_map": 5,
    "causal": 5,
    "counterfactual": 3,
    "association": 5,
    "progress_evaluation": 0,  # the route's steps the stratum offers: see progress_evaluation
    "high_level_planning": 5,
    "action_generation": 7,
}
Evidence = dict[str, str | int | float | bool | list[str] | list[float]]
Box = tuple[NDArray[np.float64], NDArray[np.float64]]  # a landmark's box: its low and high corners
# per description, the landmarks (id, box) it may mean
Landmarks = Mapping[str, list[tuple[str, Box]]]
# frames' camera positions, body-to-world rotations and half fields of view (tangents)
Cameras = tuple[NDArray[np.float64], NDArray[np.float64], tuple[float, float]]


def scene_boxes(tasks: Iterable[NavigationTask]) -> Landmarks:
    """The landmarks the missions record, by description: every landmark of it (two "green
    tree"s are both what an option "green tree" could mean), each once."""
    out: dict[str, dict[str, Box]] = {}
    for task in tasks:
        for lm in task.landmarks:
            c, h = np.array(lm.center, dtype=float), np.array(lm.size, dtype=float) / 2
            out.setdefault(lm.description, {})[lm.landmark_id] = (c - h, c + h)
    return {d: sorted(by.items(), key=lambda kv: kv[0]) for d, by in out.items()}


def box_gap(a: Box, b: Box) -> float:
    """The distance between two boxes (0 when they touch)."""
    d = np.maximum(np.maximum(a[0] - b[1], b[0] - a[1]), 0.0)
    return float(np.linalg.norm(d))


def point_gap(p: NDArray[np.float64], b: Box) -> float:
    """The distance from a point to a box."""
    return float(np.linalg.norm(np.maximum(np.maximum(b[0] - p, p - b[1]), 0.0)))


def clearly_farther(d: float, near: float) -> bool:
    """Whether a distance ``d`` is clearly more than ``near`` (RATIO times, and 5 m): a landmark
    that much farther is no fair answer to "which is closest"."""
    return d >= max(near * RATIO, near + 5.0)


@dataclass(frozen=True)
class Question:
    task: NavTask
    end_frame: int  # the last frame shown
    question: str
    options: tuple[str, ...]  # the gold first
    key: str  # the gold's class, for balancing across missions
    evidence: Evidence = field(default_factory=dict)
    # the scene fact the answer follows from whatever mission asks it ("" when the answer is the
    # mission's own): rows sharing it are one question, asked once per release
    fact: str = ""
    # the class of the question's wording whose answers the family balances (a counterfactual's
    # way): within it every answer is asked equally often, so the words decide nothing
    stratum: str = ""
    # the question's words when they name the mission's goal or instruction and no moment: two
    # missions flying to one goal would ask identical questions of like flights (whose answers
    # agree more often than chance), so one mission asks it; not a fact (the answer is the
    # video's), so within a mission it may repeat
    wording: str = ""
    # a question whose options are landmark texts of one form drawn over the release (:attr:`pool`
    # names the form, e.g. "causal/clear_obstacle"): the builder gives the gold alone and the
    # family adds the distractors from the golds of every row of that pool it asks, so each
    # text is offered about as often as the option count times it is the answer ("" : the
    # builder's options are complete)
    pool: str = ""
    # the texts this row may not offer beside its gold (a landmark in view while the move lasts)
    barred: frozenset[str] = frozenset()
    # the texts this row may offer beside its gold (None: any of the pool's)
    within: frozenset[str] | None = None
    # the texts offered first when the pool has them (the same reason for the mission's other
    # landmarks: a landmark the mission's instruction names is then no clue)
    first: frozenset[str] = frozenset()
    # the landmark descriptions the mission's instruction names (:func:`instructed`): the row
    # travels with the instruction, so the family draws distractors naming them too and never
    # leaves the gold the one option that does (:func:`lone_hint`)
    instructed: frozenset[str] = frozenset()


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
        # landmarks a description names unambiguously: one landmark of the mission has it (two
        # "green tree"s on the way make "the green tree" a guess, whatever the answer)
        shared = Counter(_norm(d) for d in self.names.values())
        self.unique = frozenset(lid for lid, d in self.names.items() if shared[_norm(d)] == 1)
        self.instructed = instructed(task)
        # per fixed-vocabulary type and difficulty, the labels the plan can give as answers about
        # equally often (set by the family from every mission's candidates); a label offered but
        # seldom the answer would be ruled out without looking
        self.allowed: dict[tuple[str, str], frozenset[str]] = {}
        # the descriptions of the landmarks the plan's missions fly to, each of one landmark (set
        # by the family; None: this mission's own landmarks)
        self.routed: frozenset[str] | None = None
        # the boxes of the landmarks the plan's missions record, by a description of one landmark
        # (set by the family, :func:`scene_boxes`; None: this mission's own): what a distractor
        # naming a landmark of another flight is measured by
        self.scene: Landmarks | None = None
        self.views: dict[tuple[int, int], Cameras] = {}  # per frame span, :func:`_cameras`

    def labels(self, task: str, every: Sequence[str], frame: int, words: str = "") -> list[str]:
        """The labels of a fixed-vocabulary type this plan offers in a row showing the video up
        to ``frame`` whose wording's class is ``words`` (all, unless the family kept only those
        it can ask as answers about equally often in that stratum: see :attr:`allowed`)."""
        kept = self.allowed.get((task, self.stratum(task, frame, words)))
        return [x for x in every if kept is None or x in kept]

    def wording(self, question: str) -> str:
        return _norm(question)

    def stratum(self, task: str, frame: int, words: str = "") -> str:
        """What a row shows of its answer's circumstances without the video, which a type of
        fixed vocabulary balances its answers within: the difficulty (the video's length),
        whether the mission is a goal or a route when the question quotes its instruction, and
        the class of the move the question names (:attr:`Question.stratum`: "right after it
        climbed to get above ..." makes some next moves likelier, so within it every answer
        is asked equally often)."""
        level = difficulty(frame, self.fps)
        level = f"{level}/{self.task.kind}" if task in QUOTES else level
        return f"{level}/{words}" if words else level

    def context(self) -> str:
        """The mission as the source's questions give it ("The drone is navigating to ...")."""
        return f'The drone\'s task: "{self.task.instruction}"'

    def about(self, s: NavSegment) -> str:
        """The landmark id a segment was about: the structure in the leg's way for an obstacle's
        reason, else the leg's landmark ("" when the way was blocked by something unlabelled)."""
        if s.reason in W.OBSTACLE_REASONS or s.reason == "avoid_obstacle":
            return leg_blocker(self.task, s.leg)
        return s.toward

    def event(self, s: NavSegment) -> str | None:
        """What the segment did, in words that name its landmark, when they name one moment of
        the flight: the landmark described uniquely, and no other segment in the same words
        (None otherwise). A moment is named by what happened, never by its time."""
        lid = self.about(s)
        if not lid or not self.named(lid):
            return None
        words = W.event(s.reason, s.action, self.names[lid])
        same = [
            x
            for x in self.task.segments
            if (y := self.about(x))
            and y in self.names
            and W.event(x.reason, x.action, self.names[y]) == words
        ]
        return words if len(same) == 1 else None

    def named(self, *lids: str) -> bool:
        """Every landmark id given ("" for none) has a description of its own in the mission."""
        return all(not lid or lid in self.unique for lid in lids)

    def boxes(self) -> Landmarks:
        """The landmarks an option may name, by description (:attr:`scene`, else the mission's
        own): a distractor is wrong only when every landmark it may mean is."""
        return self.scene if self.scene is not None else scene_boxes([self.task])

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

    def moment(self, s: NavSegment, rng: np.random.Generator) -> int | None:
        """A frame strictly inside the segment, drawn uniformly; None for a segment too short to
        have one. Naming it, not the span, hides how long the segment lasted."""
        if s.end_frame - s.start_frame < 2:
            return None
        return int(rng.integers(s.start_frame + 1, s.end_frame))


MIN_OPTIONS = 2  # a type of no fixed count (OPTIONS 0) offers at least this many


def fewest_options(task: str) -> int:
    """The fewest options a row of ``task`` has: its fixed count, else ``MIN_OPTIONS``."""
    return OPTIONS[task] or MIN_OPTIONS


def option_counts(task: str, instruction: str) -> range:
    """The option counts a row of ``task`` may have (:data:`OPTIONS`; Progress Evaluation: from
    two to every step of the route its question quotes)."""
    most = OPTIONS[task] or len(progress_steps(instruction))
    return range(fewest_options(task), most + 1)


def difficulty(end_frame: int, fps: float) -> str:
    """A row's difficulty, by the seconds of video it shows."""
    seconds = (end_frame + 1) / fps
    return "easy" if seconds < 20 else "medium" if seconds < 45 else "hard"


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def instructed(task: NavigationTask) -> frozenset[str]:
    """The descriptions (lower case) of the mission's landmarks its instruction names ("Fly to
    the gray billboard."): every row of the mission is released beside that instruction."""
    return frozenset(
        _norm(lm.description)
        for lm in task.landmarks
        if mentions(task.instruction, frozenset({_norm(lm.description)}))
    )


def mentions(label: str, names: frozenset[str]) -> bool:
    """Whether ``label`` names one of ``names``: the whole label, or "the <name>" in it as
    whole words ("the gray billboard" is not named by "the light gray billboard")."""
    text = _norm(label).rstrip(".")
    return any(text == d or re.search(rf"\bthe {re.escape(d)}\b", text) for d in names)


def lone_hint(options: Sequence[str], gold: str, names: frozenset[str]) -> bool:
    """Whether the gold is the only option naming a landmark of the instruction: a solver
    given the instruction (UrbanVideo-Bench gives it with every question) would pick it without
    looking at the video."""
    return [x for x in options if mentions(x, names)] == [gold]


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


def alike(question: str, labels: Sequence[str]) -> bool:
    """Options a row may offer together: distinct, no two more similar than QC allows, and
    none singled out by its form, length or words shared with the question. Decided from the
    set alone, never from which member is the gold."""
    return (
        len(set(labels)) == len(labels)
        and O.singled_out(question, labels) is None
        and not any(_close(a, b) for a, b in combinations(labels, 2))
    )


@lru_cache(maxsize=1 << 16)
def _close(a: str, b: str) -> bool:
    """Too similar to offer together (QC's bound); cached, as the same labels meet in many sets."""
    return similarity(a, b) > MAX_SIMILARITY


def sets_of(universe: Sequence[str], question: str, k: int = K) -> list[tuple[str, ...]]:
    """Every ``k``-subset of ``universe`` whose members are :func:`alike` (none with fewer: a
    row has the source's number of options or is not asked)."""
    return _sets(tuple(dict.fromkeys(universe)), question, k)


@lru_cache(maxsize=4096)
def _sets(labels: tuple[str, ...], question: str, k: int) -> list[tuple[str, ...]]:
    return [
        c
        for c in combinations(labels, k)
        if not any(_close(a, b) for a, b in combinations(c, 2)) and O.singled_out(question, c) is None
    ]


def draw(
    gold: str,
    universe: Sequence[str],
    question: str,
    rng: np.random.Generator,
    k: int = K,
) -> tuple[str, ...] | None:
    """The gold and its distractors: one of :func:`sets_of` ``universe`` holding the gold, drawn
    so that every set is equally likely whichever of its members is the gold (a gold that few
    sets hold is asked less often, never placed differently); None: not asked with this gold.
    ``universe`` must not depend on the gold (every label the question could have as answer)."""
    return pick(gold, sets_of(universe, question, k), rng) if gold in universe else None


def from_vocabulary(
    gold: str, labels: Sequence[str], rng: np.random.Generator, k: int = K
) -> tuple[str, ...] | None:
    """A fixed vocabulary's options: the gold and ``k - 1`` others drawn uniformly from the
    labels the plan offers (None when it offers fewer than ``k``: a row with fewer options than
    the source's is not asked). Every ``k``-subset is
    a candidate set, as many holding each label: the design stays exchangeable when the family
    then balances the golds (a filter on the sets, or pairs never offered together, would
    have some labels in fewer sets, and a balanced gold then more often one of those)."""
    if gold not in labels or len(labels) < k:
        return None
    if len(labels) == k:
        return (gold, *(x for x in labels if x != gold))
    drawn = O.from_pool(gold, list(labels), k, rng)
    return None if drawn is None else tuple(drawn)


def pick(gold: str, sets: Sequence[tuple[str, ...]], rng: np.random.Generator) -> tuple[str, ...] | None:
    """One of ``sets`` holding the gold, gold first, by :func:`skyqa.families.options.exchangeable`
    over the family of ``sets`` (which must not depend on the gold); None: not asked."""
    holding = Counter(x for s in sets for x in s)
    if not holding.get(gold):
        return None
    picked = O.exchangeable(gold, lambda x: [s for s in sets if x in s], max(holding.values()), rng)
    return None if picked is None else (gold, *(x for x in picked if x != gold))


# -- recall ------------------------------------------------------------------------------


def caption_text(
    names: Sequence[str], turns: Sequence[str], ways: Sequence[str], blockers: Sequence[str]
) -> str:
    """The flight as one sentence, as the source's captions are: "The drone turned left and
    reached the stone fountain, then turned right, climbed over the red brick hall and reached
    the grey office tower." (per leg: its opening turn, how it avoided what, where to)."""
    legs = []
    for name, turn, way, blocker in zip(names, turns, ways, blockers, strict=True):
        parts = [f"turned {turn}"] if turn else []
        parts += [f"{PAST_WAY[way]} {W.obstacle(blocker)}"] if way else []
        parts.append(f"reached the {name}")
        legs.append(", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1])
    return "The drone " + ", then ".join(legs) + "."


PAST_WAY = {"climb over": "climbed over", "go around": "went around"}
CAPTION_Q = "Which of these sentences best sums up the drone's whole flight in the video?"


def trajectory_captioning(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Which sentence sums up the flight, as the source's captions do. The options differ in
    where the drone flew, not in one word (sentences one word apart are too alike to offer):
    five landmarks on a cycle, the ones the flight names (each leg's obstacle and landmark) in
    flight order among them, and option ``i`` names them from cycle place ``i`` on, each leg
    with its turn and way. Every landmark of the cycle is named as often by the options and
    every two options differ in every name, whichever is the gold (no near misses around the gold, which
    make it the option overlapping the rest most)."""
    legs = sorted({s.leg for s in m.task.segments})
    turns, ways, blockers, blocker_ids = [], [], [], []
    for leg in legs:
        first = next(s for s in m.task.segments if s.leg == leg)
        turned = first.reason == "face_landmark" and first.amount >= 20.0
        turns.append(first.action.removeprefix("turn_") if turned else "")
        # the leg's first avoiding move (a side turn or a climb), whether or not the structure
        # in the way has a description
        avoid = next(
            (s for s in m.task.segments if s.leg == leg and s.reason in ("avoid_obstacle", "clear_obstacle")),
            None,
        )
        # a structure without a label is no landmark a person could point at ("around a
        # structure"): the caption sums the leg up by its turn and where it led, as it would
        # a leg with nothing in the way
        if avoid is not None and not avoid.blocked_by:
            avoid = None
        ways.append("" if avoid is None else "climb over" if avoid.action == "ascend" else "go around")
        blockers.append("" if avoid is None else m.blocker(avoid))
        blocker_ids.append("" if avoid is None else avoid.blocked_by)
    n = OPTIONS["trajectory_captioning"]
    if not m.named(*m.task.route, *blocker_ids):
        return
    # the things the caption names, in flight order: per leg the obstacle it avoided, then its
    # landmark; the cycle's others: landmarks some mission of the release flies to (a caption
    # naming places the video never shows is a wrong caption, as the source's distractors
    # are), not the ones the caption names; without the release's, this flight's seen ones
    slots = [lid for leg in legs for lid in (blocker_ids[leg], m.task.route[leg]) if lid]
    taken = {_norm(m.names[lid]) for lid in slots}
    if m.routed is None:
        others = [m.names[lid] for lid in m.seen_in(0, m.last) if lid not in slots and m.named(lid)]
    else:
        others = sorted(x for x in m.routed if _norm(x) not in taken)
    if len(set(slots)) < len(slots) or len(slots) > n or len(others) < n - len(slots):
        return
    names_of = [m.names[lid] for lid in slots]

    def caption(cycle: Sequence[str], i: int) -> str:
        """The flight with every named thing moved ``i`` places on along the cycle."""
        at = iter(cycle[(i + j) % n] for j in range(len(slots)))
        names, walls = [], []
        for leg in legs:
            walls.append(next(at) if blocker_ids[leg] else "")
            names.append(next(at))
        return caption_text(names, turns, ways, walls)

    # the others drawn in a random order: the first alike cycles use different landmarks
    others = [others[int(k)] for k in rng.permutation(len(others))]
    cycles = []
    for tried, extra in enumerate(combinations(others, n - len(slots))):
        if tried >= 256:
            break
        for order in permutations(extra):
            options = tuple(caption([*names_of, *order], i) for i in range(n))
            # the instruction's landmarks named by more options than the gold alone (else the
            # one naming them is the flight, the video unseen)
            if alike(CAPTION_Q, options) and not lone_hint(options, options[0], m.instructed):
                cycles.append(options)
        if len(cycles) >= 64:
            break
    if cycles:
        options = cycles[int(rng.integers(len(cycles)))]
        yield Question(
            "trajectory_captioning",
            m.last,
            CAPTION_Q,
            options,
            options[0],
            {"route": list(m.task.route)},
            # two flights of one route with like legs have one caption: asked once
            fact=f"caption:{_norm(options[0])}",
            instructed=m.instructed,
        )


def sequence_recall(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """What the drone did right after a move the question names by what happened ("right after
    it hovered in place at the stone fountain"), as the source asks, over the whole video; the
    options are moves in words naming their landmark ("turned right to face the grey tower").
    Asked where the next move is about another landmark than the named one (else the option
    repeating the question's landmark would be the answer). The options share the gold's kind
    of move and differ in the landmark (and way): the distractors are the golds of other rows
    after the same kinds of move across the release (:attr:`Question.pool`), none naming the
    question's landmark, so each is offered about five times as often as it is right."""
    for s, nxt in pairwise(m.task.segments):
        if nxt.action == s.action or (words := m.event(s)) is None or (then := m.event(nxt)) is None:
            continue
        if m.about(nxt) == m.about(s):
            continue
        q = f"What did the drone do right after it {words}?"
        named = m.names[m.about(s)]
        barred = frozenset(W.event(x.reason, x.action, named) for x in m.task.segments) | frozenset(
            W.event(r, a, named) for r in W.EVENT for a in W.ACTIONS
        )
        evidence: Evidence = {"segment": s.index, "next": nxt.index, "moment": words}
        yield Question(
            "sequence_recall", m.last, q, (then,), then, evidence,
            pool=f"sequence_recall/{s.reason}/{nxt.reason}", barred=barred, instructed=m.instructed,
        )  # fmt: skip


def object_recall(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Which seen landmark stands nearest a seen one: a fact of the scene, whatever mission
    asks it, so it carries the referent as its key (shared with Association's)."""
    seen = [lid for lid in m.seen_in(0, m.last) if m.named(lid)]
    for lid in seen:
        near = _nearest({o: m.box_gap(lid, o) for o in m.names if o != lid})
        if near is None or near not in seen:
            continue
        q = f"Which of these landmarks stands closest to the {m.names[lid]}?"
        options = draw(
            m.names[near], [m.names[o] for o in seen if o != lid], q, rng, OPTIONS["object_recall"]
        )
        if options is not None:
            yield Question(
                "object_recall",
                m.last,
                q,
                options,
                options[0],
                {"landmark": lid, "nearest": near},
                fact=f"nearest:{lid}",
            )


def scene_recall(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """While a move the question names by what happened (a segment, in words), a landmark in
    view for at least half of it (not the one the words name). The others offered are landmarks
    (of this flight or of another) outside the camera's view for the whole move
    (:func:`out_of_view`), so none of them shows a pixel then; they are the golds of other rows
    across the release (:attr:`Question.pool`), so each is offered about as often as the option
    count times it is right. None is a landmark of the instruction (the drone mostly has where
    it flies in view: such options would single themselves out, right or wrong)."""
    barred = frozenset(m.names[lid] for lid in m.names if _norm(m.names[lid]) in m.instructed)
    boxes = m.boxes()
    for s in m.task.segments:
        a, b = s.start_frame, s.end_frame
        words = m.event(s)
        if words is None or b - a + 1 < round(m.fps):  # a glimpse is no scene
            continue
        named = m.about(s)
        golds = [
            lid
            for lid in m.names
            if lid != named
            and m.named(lid)
            and m.names[lid] not in barred
            and m.seen(lid, a, b) * 2 >= b - a + 1
        ]
        if not golds:
            continue
        # the mission's own landmarks by what the renderer measured, the others by the view
        within = frozenset(
            x
            for x, lms in boxes.items()
            if all(
                not any(f.pixels for f in m.task.visibility[lid][a : b + 1])
                if lid in m.names
                else out_of_view(m, box, a, b)
                for lid, box in lms
            )
        )
        q = f"Which of these did the drone have in view while it {words}?"
        for lid in golds:
            evidence: Evidence = {"start": a, "end": b, "landmark": lid, "segment": s.index, "moment": words}
            yield Question(
                "scene_recall", m.last, q, (m.names[lid],), m.names[lid], evidence, pool="scene_recall",
                fact=f"in_view:{_norm(words)}:{lid}",  # two flights making one move: asked once
                barred=barred | {m.names[named]} if named else barred, within=within, instructed=m.instructed,
            )  # fmt: skip


def out_of_view(m: Mission, box: Box, a: int, b: int) -> bool:
    """Whether ``box`` lies outside the camera's view cone in every frame from ``a`` to ``b``:
    wholly behind the camera or beyond one side of the image (a pinhole of the video's field of
    view, with a margin). Conservative: a box it keeps may still be hidden behind another."""
    corners = np.array([[x, y, z] for x in (box[0][0], box[1][0]) for y in (box[0][1], box[1][1])
                        for z in (box[0][2], box[1][2])])  # fmt: skip
    eye, turn, (th, tv) = _cameras(m, a, b)
    c = np.einsum("fki,fij->fkj", corners[None, :, :] - eye[:, None, :], turn)  # (frame, corner, body)
    fwd, left, up = c[..., 0], c[..., 1], c[..., 2]
    outside = (
        np.all(fwd <= 0.0, axis=1)
        | np.all(left > fwd * th, axis=1)
        | np.all(-left > fwd * th, axis=1)
        | np.all(up > fwd * tv, axis=1)
        | np.all(-up > fwd * tv, axis=1)
    )
    return bool(outside.all())


def _cameras(m: Mission, a: int, b: int) -> Cameras:
    """The camera positions and body-to-world rotations of frames ``a`` to ``b``, and the
    tangents of the half fields of view (5 % wider: a margin)."""
    if (a, b) in m.views:
        return m.views[(a, b)]
    poses = m.task.poses[a : b + 1]
    eye = np.array([[p.x, p.y, p.z] for p in poses])
    turn = np.array([rotation_matrix(p.yaw_deg, p.camera_pitch_deg, 0.0) for p in poses])
    k = Intrinsics.from_fov(m.task.video.width, m.task.video.height, m.task.video.fov_deg)
    th, tv = (math.tan(math.radians(x)) * 1.05 for x in k.half_fov_deg())
    m.views[(a, b)] = (eye, turn, (th, tv))
    return m.views[(a, b)]


def start_end_question(goal: str) -> str:
    """Start/End Position's question: where the drone stopped is the instruction's goal, which
    the row travels with (options differing in where it stopped would be ruled out without
    looking), so the question says it and asks where it set off."""
    return f"The drone stopped at the {goal}. Which of these landmarks stood closest to where it set off?"


def start_end_position(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Where the flight started and ended, as the source asks: it ends at the goal (said in the
    question), and it set off closest to a landmark the video shows in its first five seconds,
    the nearest such of the mission's named ones. The options are landmarks each clearly farther
    from where it set off (:func:`clearly_farther`: every landmark an option may mean), so the
    gold is the closest of them whichever others stand near; the distractors are the golds of
    other rows across the release (:attr:`Question.pool`), so each is offered about as often as
    the option count times it is right. None is a landmark of the instruction (where the drone
    flies to, never where it set off: such options would be ruled out without looking)."""
    if not m.named(m.goal):
        return
    early = min(m.last, int(5 * m.fps))
    gaps = {
        lid: float(m.gap(lid, m.at[0]))
        for lid in m.names
        if lid != m.goal
        and m.named(lid)
        and _norm(m.names[lid]) not in m.instructed
        and m.seen(lid, 0, early) >= 1
    }
    if not gaps:
        return
    start = min(gaps, key=lambda lid: gaps[lid])
    name = m.names[start]
    barred = frozenset(m.names[lid] for lid in m.names if _norm(m.names[lid]) in m.instructed)
    within = frozenset(
        x
        for x, lms in m.boxes().items()
        if all(clearly_farther(point_gap(m.at[0], b), gaps[start]) for _, b in lms)
    )
    yield Question(
        "start_end_position", m.last, start_end_question(m.names[m.goal]), (name,), name,
        {"start": start, "end": m.goal}, pool="start_end_position", barred=barred, within=within,
        fact=f"start:{m.goal}:{start}",  # two flights from one place to one goal: asked once
        instructed=m.instructed,
    )  # fmt: skip


# -- perception --------------------------------------------------------------------------


def proximity(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """How the distance to a seen landmark changed while the drone made a move the question
    names by what happened (a segment, in words, as the source's "after the agent descends to
    street level"). The move's reason is the row's stratum: a climb leaves most distances as
    they were, so within each kind of move every answer is asked equally often. Over a move a
    landmark can come closer, fall behind, stay as far (turning or tilting in place) or be
    passed."""
    for s in m.task.segments:
        a, b = s.start_frame, s.end_frame + 1
        if (words := m.event(s)) is None or b - a < round(m.fps):
            continue
        labels = m.labels("proximity", W.PROXIMITY, m.last, s.reason)
        for lid in m.seen_in(a, b):
            if not m.named(lid) or lid == m.about(s):
                continue
            d = m.gap(lid, m.at[a : b + 1])
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
            q = f"How did the distance between the drone and the {m.names[lid]} change while it {words}?"
            evidence: Evidence = {"landmark": lid, "start": a, "end": b, "start_m": round(d0, 2),
                                  "end_m": round(d1, 2), "min_m": round(low, 2), "segment": s.index,
                                  "moment": words}  # fmt: skip
            options = from_vocabulary(W.PROXIMITY[key], labels, rng, OPTIONS["proximity"])
            if options is not None:
                # two flights along one leg ask it alike and mostly agree: one mission owns it
                yield Question(
                    "proximity", m.last, q, options, options[0], evidence,
                    stratum=s.reason, wording=m.wording(q),
                )  # fmt: skip


# named by what the flight was for, never by its times (which would give the answer away)
DURATION_OF = {
    "approach_landmark": "the straight flight to the {}",
    "avoid_obstacle": "the side step around {}",
    "pass_obstacle": "the flight over {}",  # nosec B105: a reason code, not a password
}


def duration(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Two forward flights of one kind, in a drawn order: flights of two kinds would let the
    kind decide (a flight to a landmark outlasts a side step), a fixed order the position."""
    named = [
        (
            s,
            DURATION_OF[s.reason].format(
                m.names[s.toward] if s.reason == "approach_landmark" else W.obstacle(m.leg_blocker(s))
            ),
        )
        for s in m.task.segments
        if s.action == "fly_forward"
        and s.reason in DURATION_OF
        and (s.reason == "approach_landmark" or leg_blocker(m.task, s.leg))  # "around a structure": which?
        and m.named(s.toward if s.reason == "approach_landmark" else leg_blocker(m.task, s.leg))
    ]
    counts = Counter(phrase for _, phrase in named)
    segs = [s for s, phrase in named if counts[phrase] == 1]
    phrases = {s.index: phrase for s, phrase in named if counts[phrase] == 1}
    for x, y in combinations(segs, 2):
        if x.reason != y.reason:
            continue
        a, b = (x, y) if rng.random() < 0.5 else (y, x)
        na, nb = a.end_frame - a.start_frame + 1, b.end_frame - b.start_frame + 1
        ratio = max(na, nb) / min(na, nb)
        if ratio >= RATIO:
            key = 0 if na > nb else 1
        elif ratio <= 1.1:
            key = 2
        else:
            continue
        labels = m.labels("duration", W.LONGER, min(max(a.end_frame, b.end_frame) + 1, m.last))
        if W.LONGER[key] not in labels:
            continue
        q = f"Which lasted longer: {phrases[a.index]}, or {phrases[b.index]}?"
        options = (W.LONGER[key], *[x for x in labels if x != W.LONGER[key]])
        yield Question(
            "duration",
            min(max(a.end_frame, b.end_frame) + 1, m.last),
            q,
            options,
            W.LONGER[key],
            {"first": a.index, "second": b.index, "frames": [float(na), float(nb)]},
        )


def landmark_position(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Where a seen landmark is from the drone at a cut, in eight directions (15 degrees of
    margin inside each sector's edge), the question quoting the mission's goal as the source's
    "Given [navigation goal] initially" does."""
    for s in m.cuts():
        t = s.end_frame + 1
        p = m.task.poses[t]
        for lid in m.seen_in(0, t):
            if not m.named(lid):
                continue
            lm_size = m.hi[lid] - m.lo[lid]
            if (
                math.hypot(m.center[lid][0] - p.x, m.center[lid][1] - p.y)
                < math.hypot(*lm_size[:2]) / 2 + 5.0
            ):
                continue  # over or beside its footprint: no bearing to speak of
            label = W.direction(_relative_bearing(m, lid, t), DIRECTION_MARGIN)
            labels = m.labels("landmark_position", W.QUADRANTS, t)
            if (
                label is None
                or (options := from_vocabulary(label, labels, rng, OPTIONS["landmark_position"])) is None
            ):
                continue
            q = f"{m.context()} Where is the {m.names[lid]} relative to the drone now?"
            yield Question(
                "landmark_position",
                t,
                q,
                options,
                label,
                {"landmark": lid, "frame": t, "bearing_deg": round(_relative_bearing(m, lid, t), 2)},
            )


def goal_detection(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Whether and where the goal is in view, asked each second (not only where a segment
    ends, when the drone mostly faces the goal: the goal is off to one side while it turns),
    by fifths of the image's width."""
    if not m.named(m.goal):
        return
    frames = m.task.visibility[m.goal]
    # no word of the question in any option ("view" would be in "not in view" alone)
    q = (f"The drone is flying to the {m.names[m.goal]}. Can it see its destination now, and "
         "if so, where in the image is it?")  # fmt: skip
    for t in range(round(m.fps), m.last, round(m.fps)):
        f = frames[t]
        if not f.visible:
            if f.pixels:
                continue  # a sliver: neither clearly in view nor out of it
            gold = W.IN_VIEW[0]
        else:
            cx = (f.bbox_xyxy_norm[0] + f.bbox_xyxy_norm[2]) / 2
            if min(abs(cx - k / 5) for k in range(1, 5)) < THIRD_MARGIN:
                continue
            gold = W.fifth(cx)
        options = from_vocabulary(
            gold, m.labels("goal_detection", W.IN_VIEW, t), rng, OPTIONS["goal_detection"]
        )
        if options is not None:
            evidence: Evidence = {"frame": t, "landmark": m.goal}
            yield Question("goal_detection", t, q, options, gold, evidence, wording=m.wording(q))


def cognitive_map(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """A map of the flight, as the source's "summarize historical movement observations into a
    cognitive map": where a landmark the video showed lies from the point the drone started
    at, facing the way it first faced (eight directions, a margin inside each sector's edge).
    The answer is the mission's own (its start), asked over the whole video."""
    p0 = m.task.poses[0]
    for lid in m.seen_in(0, m.last):
        if not m.named(lid):
            continue
        c = m.center[lid]
        if math.hypot(c[0] - p0.x, c[1] - p0.y) < math.hypot(*(m.hi[lid] - m.lo[lid])[:2]) / 2 + 10.0:
            continue  # it stood by the start: no direction to speak of
        label = W.direction(_relative_bearing(m, lid, 0), DIRECTION_MARGIN)
        labels = m.labels("cognitive_map", W.LAYOUT, m.last)
        if (
            label is None
            or (options := from_vocabulary(label, labels, rng, OPTIONS["cognitive_map"])) is None
        ):
            continue
        q = ("Picture a map of the whole flight, facing the way the drone faced when it set off. "
             f"In which direction from the point it set off from does the {m.names[lid]} lie?")  # fmt: skip
        yield Question("cognitive_map", m.last, q, options, label, {"landmark": lid})


# -- reasoning ---------------------------------------------------------------------------


def moves(task: NavigationTask) -> list[list[NavSegment]]:
    """The flight's moves as a person sees them: consecutive segments of one action are one move
    (a flight forward to get around a building, then on to the landmark, is one flight)."""
    out: list[list[NavSegment]] = []
    for s in task.segments:
        if out and out[-1][-1].action == s.action:
            out[-1].append(s)
        else:
            out.append([s])
    return out


def causal(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Why the drone made a move, as the source asks ("Why do drones keep rising after leaving
    the beach?"): the move named by its action and how many times the drone had made it, the
    options the reason of that move's kind naming five landmarks ("to get above the red brick
    hall", "to get above the grey tower", ...). The action tells the kind of reason; the video
    must tell which landmark. The distractors are the golds of other rows of that reason across
    the release (:attr:`Question.pool`), so no landmark is offered more often than it is right."""
    made: Counter[str] = Counter()
    for run in moves(m.task):
        action = run[0].action
        ordinal = made[action]
        made[action] += 1
        reasons = {(s.reason, m.about(s)) for s in run}
        if len(reasons) != 1 or ordinal >= len(W.ORDINALS):
            continue  # a move made for two reasons has no one answer
        s = run[0]
        lid = m.about(s)
        if not lid or not m.named(lid):
            continue
        gold = W.because(s.reason, m.names[lid])
        q = f"Why did the drone {W.asked_move(action, ordinal)}?"
        evidence: Evidence = {"segment": s.index, "moment": W.asked_move(action, ordinal), "landmark": lid}
        # the reason of another move of this flight of the same kind ("to face" the next
        # landmark, for the first turn) may be offered: the count names one move, and a
        # landmark of the mission's instruction is then no clue (other rows quote it)
        mine = frozenset(W.because(s.reason, m.names[x]) for x in m.names if m.named(x))
        yield Question(
            "causal", m.last, q, (gold,), gold, evidence,
            pool=f"causal/{s.reason}", first=mine, instructed=m.instructed,
        )  # fmt: skip


WAYS = {
    "straight": "flown straight on at its height",
    "over": "climbed over what was ahead",
    "around_left": "flown around to the left",
    "around_right": "flown around to the right",
}


LONGER_BY = 1.35  # a way at least this factor slower than the flown one takes longer


def counterfactual(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Could an unflown way have reached the leg's landmark, and how would it compare, in the
    source's three answers (about as quick, longer, blocked; never "quicker": the planner
    flies the quickest way). The way named is the question's stratum: the family asks each
    way's answers equally often (the planner finds most ways clear, some never blocked), so the
    wording tells nothing."""
    for alt in m.task.alternatives:
        chosen = next((a for a in m.task.alternatives if a.leg == alt.leg and a.chosen), None)
        # straight on is an unflown alternative only when blocked: asking it would give the
        # answer away
        if chosen is None or alt.chosen or chosen.seconds is None or alt.option == "straight":
            continue
        if not m.named(alt.toward):
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
        if not alt.feasible or alt.seconds is None:
            key = 2
        elif alt.seconds <= W.ABOUT_AS_LONG * chosen.seconds:
            key = 0
        elif alt.seconds >= LONGER_BY * chosen.seconds:
            key = 1
        else:
            continue  # a little longer: "about the same" and "longer" would both be fair
        # the video ends where the ways were judged: no time in the question (which would tell
        # the leg, and with it how likely a way is blocked)
        name = m.names[alt.toward]
        q = (f"The drone is on its way to the {name}. Instead of the way it then took, if it had "
             f"{WAYS[alt.option]} from here, could it still have reached the {name}, and how "
             "would that way compare?")  # fmt: skip
        options = (W.COUNTERFACTUAL[key], *[x for i, x in enumerate(W.COUNTERFACTUAL) if i != key])
        yield Question("counterfactual", decided.start_frame, q, options, W.COUNTERFACTUAL[key],
                       {"leg": alt.leg, "option": alt.option, "chosen": chosen.option},
                       stratum=alt.option)  # fmt: skip


def association(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """A cue in sight to where the goal lies while the goal is out of view, as the source's
    "are there any relevant urban elements or objects in sight when the navigation goal is not
    visible?": asked each second the goal shows no pixel, of each named landmark in view then;
    the options are landmarks each clearly farther from the goal than it (:func:`clearly_farther`),
    so it is the closest of them whichever others stand near. The distractors are the golds of
    other rows across the release (:attr:`Question.pool`), landmarks of this flight or of
    others, so each is offered about as often as the option count times it is right; none is
    the goal or a landmark of the instruction (the instruction names where the drone flies,
    never the cue: such options would be ruled out without looking)."""
    if not m.named(m.goal):
        return
    boxes = m.boxes()
    goal = (m.lo[m.goal], m.hi[m.goal])
    barred = frozenset(m.names[lid] for lid in m.names if _norm(m.names[lid]) in m.instructed) | {
        m.names[m.goal]
    }
    # the goal alone, not the route's instruction: landmark options the question names would
    # stand out by repeating its words
    q = (f"The drone is flying to the {m.names[m.goal]}, which is out of view now. Of these "
         "landmarks, which one in sight now stands closest to it, a cue to where it lies?")  # fmt: skip
    frames = m.task.visibility[m.goal]
    for t in range(round(m.fps), m.last, round(m.fps)):
        if frames[t].pixels:
            continue
        for lid in m.names:
            name = m.names[lid]
            if lid == m.goal or not m.named(lid) or name in barred or not m.task.visibility[lid][t].visible:
                continue
            near = m.box_gap(lid, m.goal)
            within = frozenset(
                x for x, lms in boxes.items() if all(clearly_farther(box_gap(b, goal), near) for _, b in lms)
            )
            nearest = _nearest({o: m.box_gap(m.goal, o) for o in m.names if o != m.goal})
            yield Question(
                "association", t, q, (name,), name, {"frame": t, "landmark": lid},
                # the same fact as Object Recall's when it is the goal's nearest landmark
                fact=f"nearest:{m.goal}" if nearest == lid else f"nearer:{m.goal}:{lid}",
                pool="association", barred=barred, within=within, instructed=m.instructed,
            )  # fmt: skip


# -- navigation --------------------------------------------------------------------------


def progress_steps(instruction: str) -> list[str]:
    """The route's steps as numbered in the question, the stop last."""
    return [*W.route_steps(instruction), "stop there"]


MAX_STEPS = 8  # a route's steps, the stop included, as far as the family numbers them


def step_label(k: int) -> str:
    return f"step {k + 1}"


def progress_evaluation(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """Which numbered step of the quoted route the drone is on: options "step N", alike in
    form. The steps are a fixed vocabulary per route length (the question lists them) and per
    video length (a short clip is seldom past the first steps): within that stratum the family
    offers the steps enough missions can be on and makes each the answer equally often, so
    neither the route's length nor the clip's tells the step (offering every step, the last of
    a long route was right in 25 of 60 rows of two 40-landmark builds, against 0.23)."""
    if m.task.kind != "route" or not m.named(*m.task.route):
        return
    steps = progress_steps(m.task.instruction)
    if len(steps) != len(m.task.route) + 1:
        return
    listed = "; ".join(f"{step_label(k)}: {x}" for k, x in enumerate(steps))
    q = f'The drone follows this route: "{m.task.instruction}" Its steps: {listed}. Which step is it on now?'
    words, every = f"{len(steps)} steps", [step_label(k) for k in range(len(steps))]
    for s in m.cuts():
        t, nxt = s.end_frame + 1, m.task.segments[s.index + 1]
        if nxt.leg != s.leg:
            continue  # between two steps: either answer would be fair
        gold = step_label(len(m.task.route) if nxt.action == "hover" else s.leg)
        labels = m.labels("progress_evaluation", every, t, words)
        asked = len(labels) >= fewest_options("progress_evaluation")
        options = from_vocabulary(gold, labels, rng, len(labels)) if asked else None
        if options is not None:
            yield Question(
                "progress_evaluation",
                t,
                q,
                options,
                gold,
                {"frame": t, "leg": s.leg},
                wording=m.wording(q),
                stratum=words,
            )


def high_level_planning(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """The next step of the plan, from steps that name no landmark (options naming the goal the
    question quotes beside ones naming obstacles would single it out), drawn uniformly. Not
    asked right after the drone turned to face a landmark: looking at it and flying to it are
    then both fair next steps."""
    q = f'The drone\'s task: "{m.task.instruction}" What should it do next from here?'
    yield from _next_move(m, rng, "high_level_planning", q, W.PLAN, lambda nxt: W.plan_text(nxt.reason))


def action_generation(m: Mission, rng: np.random.Generator) -> Iterator[Question]:
    """The next control action from the source's seven (rise, descend, fly forward, turn left or
    right, camera up or down: all seven offered, as its examples do), asked where a move ends
    (but right after the drone turned to face a landmark: flying to it and tilting the camera
    to it are then both fair) and at a drawn moment inside each move, whose next action is to
    go on with it. A hover, not among the source's actions, is not asked."""
    if not m.named(*m.task.route):
        return
    q = f'The drone\'s task: "{m.task.instruction}" What is its next control action?'
    labels = list(W.SOURCE_COMMANDS)
    for s in m.task.segments:
        nxt = m.task.segments[s.index + 1] if s.index + 1 < len(m.task.segments) else None
        ends = s in m.cuts() and s.reason != "face_landmark" and nxt is not None
        inside = m.moment(s, rng)
        for t, move in ((s.end_frame + 1, nxt) if ends else (None, None), (inside, s)):
            if t is None or t < round(m.fps) or move is None or move.action == "hover":
                continue
            options = from_vocabulary(
                W.COMMAND[move.action], m.labels("action_generation", labels, t), rng, 7
            )
            if options is not None:
                yield Question(
                    "action_generation", t, q, options, options[0], {"next": move.index}, wording=m.wording(q)
                )


def _next_move(
    m: Mission,
    rng: np.random.Generator,
    task: NavTask,
    q: str,
    vocabulary: Mapping[str, str],
    gold_of: Callable[[NavSegment], str],
) -> Iterator[Question]:
    """At each cut (but one right after the drone turned to face a landmark), the next segment's
    move in ``vocabulary``'s words, with options drawn uniformly from it."""
    if not m.named(*m.task.route):
        return
    for s in m.cuts():
        if s.reason == "face_landmark":
            continue
        nxt = m.task.segments[s.index + 1]
        labels = m.labels(task, list(vocabulary.values()), s.end_frame + 1)
        options = from_vocabulary(gold_of(nxt), labels, rng, OPTIONS[task])
        if options is not None:
            yield Question(
                task, s.end_frame + 1, q, options, options[0], {"next": nxt.index}, wording=m.wording(q)
            )


QUOTES = frozenset({"progress_evaluation", "high_level_planning", "action_generation", "landmark_position"})
# the types whose answers come from one fixed vocabulary: the family keeps, per plan, the labels
# it can ask as answers about equally often (:attr:`Mission.allowed`)
VOCABULARY: dict[NavTask, tuple[str, ...]] = {
    "proximity": W.PROXIMITY,
    "duration": W.LONGER,
    "landmark_position": W.QUADRANTS,
    "goal_detection": W.IN_VIEW,
    "cognitive_map": W.LAYOUT,
    "high_level_planning": tuple(W.PLAN.values()),
    "action_generation": W.SOURCE_COMMANDS,
    "progress_evaluation": tuple(step_label(k) for k in range(MAX_STEPS)),
}
Builder = Callable[[Mission, np.random.Generator], Iterator[Question]]
BUILDERS: dict[NavTask, Builder] = {
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
