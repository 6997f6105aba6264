"""QC of the navigation rows: structure, and each answer re-derived on a second code path.

The planner's labels are not trusted here. The next or anchored action is read off the
per-frame drone states (which of position, height, heading or camera pitch changes next);
bearings and layouts come from rotation matrices instead of angle differences; distances from
clamping points onto boxes; whether the goal is in view and where, from the stored segmentation
frame itself; route progress from the states' distances to the route's landmarks; a
counterfactual's answer from the judged alternatives, which must make the flown way feasible
and the quickest. A row whose re-derived answer differs from its gold fails.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts.navigation import NavigationTask, NavLandmark, NavState
from skyqa.contracts.urbanvideo import NavRow
from skyqa.errors import BlobNotFound
from skyqa.families import mcq
from skyqa.families.frames import per_frame
from skyqa.families.structure import Verdict
from skyqa.families.urbanvideo import words as W
from skyqa.families.urbanvideo.questions import (
    RATIO,
    caption_text,
    instructed,
    leg_blocker,
    lone_hint,
    option_counts,
    progress_steps,
    start_end_question,
    step_label,
)

Derive = Callable[[NavRow, NavigationTask], str | None]
REACHED_M = 14.0  # the planner stops 12 m outside a landmark's footprint
KEEP_OUT_M = 3.0  # the planner's 2 m keep-out around structures, and a metre of path sampling
_TILTS = ("rotate_camera_up", "rotate_camera_down")


def moved(a: NavState, b: NavState) -> str:
    """The action that takes the drone from state ``a`` to ``b`` (one changes at a time)."""
    dyaw = (b.yaw_deg - a.yaw_deg + 180.0) % 360.0 - 180.0
    changes = {
        "fly_forward": math.hypot(b.x - a.x, b.y - a.y),
        "ascend": max(b.z - a.z, 0.0),
        "descend": max(a.z - b.z, 0.0),
        "turn_left": max(dyaw, 0.0) / 10.0,
        "turn_right": max(-dyaw, 0.0) / 10.0,
        "rotate_camera_up": max(b.camera_pitch_deg - a.camera_pitch_deg, 0.0) / 10.0,
        "rotate_camera_down": max(a.camera_pitch_deg - b.camera_pitch_deg, 0.0) / 10.0,
    }
    action, amount = max(changes.items(), key=lambda kv: kv[1])
    return action if amount > 1e-6 else "hover"


def _box(task: NavigationTask, lid: str) -> tuple[np.ndarray, np.ndarray]:
    lm = next(x for x in task.landmarks if x.landmark_id == lid)
    c, s = np.array(lm.center), np.array(lm.size) / 2
    return c - s, c + s


def _to_box(task: NavigationTask, lid: str, p: np.ndarray) -> float:
    lo, hi = _box(task, lid)
    return float(np.linalg.norm(p - np.clip(p, lo, hi)))


def _off_footprint(task: NavigationTask, lid: str, p: np.ndarray) -> float:
    """How far outside the landmark's footprint circle (half its diagonal) ``p`` is, flat: the
    planner stops that far out whatever the heights."""
    lm = next(x for x in task.landmarks if x.landmark_id == lid)
    return math.hypot(p[0] - lm.center[0], p[1] - lm.center[1]) - math.hypot(*lm.size[:2]) / 2


def _box_to_box(task: NavigationTask, a: str, b: str) -> float:
    return _boxes_gap(_box(task, a), _box(task, b))


def _boxes_gap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    (alo, ahi), (blo, bhi) = a, b
    per_axis = [max(0.0, float(max(alo[i], blo[i]) - min(ahi[i], bhi[i]))) for i in range(3)]
    return math.sqrt(sum(v * v for v in per_axis))


Scene = dict[str, list[NavLandmark]]  # per description, every landmark the missions record


def scene_of(tasks: Iterable[NavigationTask | None]) -> Scene:
    """The landmarks the missions record, by description, each once."""
    out: dict[str, dict[str, NavLandmark]] = {}
    for task in tasks:
        for lm in task.landmarks if task else []:
            out.setdefault(lm.description, {})[lm.landmark_id] = lm
    return {d: list(by.values()) for d, by in out.items()}


def _corners(lm: NavLandmark) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.array(lm.center), np.array(lm.size) / 2
    return c - s, c + s


def _point_to(lm: NavLandmark, p: np.ndarray) -> float:
    lo, hi = _corners(lm)
    return float(np.linalg.norm(p - np.clip(p, lo, hi)))


def _name(task: NavigationTask, lid: str) -> str:
    return next(x.description for x in task.landmarks if x.landmark_id == lid)


def _body(task: NavigationTask, lid: str, frame: int) -> tuple[float, float]:
    """The landmark centre in the drone's frame at ``frame``: (forward, left) metres."""
    p = task.poses[frame]
    lm = next(x for x in task.landmarks if x.landmark_id == lid)
    yaw = math.radians(p.yaw_deg)
    rot = np.array([[math.cos(yaw), math.sin(yaw)], [-math.sin(yaw), math.cos(yaw)]])  # world -> body
    f, left = rot @ (np.array(lm.center[:2]) - np.array([p.x, p.y]))
    return float(f), float(left)


def _next_action(row: NavRow, task: NavigationTask) -> str | None:
    t = row.clip_end_frame
    return W.COMMAND[moved(task.poses[t], task.poses[t + 1])] if t + 1 < len(task.poses) else None


def _sequence(row: NavRow, task: NavigationTask) -> str | None:
    """The move after the one the question names, in words, re-read from the states (its
    action from the poses, its reason from the geometry, its landmark); it must start where
    the named one ends."""
    nxt = row.evidence.get("next")
    named = row.evidence.get("segment")
    if not isinstance(nxt, int) or not isinstance(named, int) or nxt != named + 1:
        return None
    return event_of(task, nxt)


def _position(row: NavRow, task: NavigationTask) -> str | None:
    f, left = _body(task, str(row.evidence["landmark"]), row.clip_end_frame)
    return W.direction(math.degrees(math.atan2(left, f)), 0.0)


def _layout(row: NavRow, task: NavigationTask) -> str | None:
    """Where the landmark lies from the flight's start, facing its first heading."""
    f, left = _body(task, str(row.evidence["landmark"]), 0)
    return W.direction(math.degrees(math.atan2(left, f)), 0.0)


def _proximity(row: NavRow, task: NavigationTask) -> str | None:
    a, b = int(row.evidence["start"]), int(row.evidence["end"])  # type: ignore[arg-type]
    lid = str(row.evidence["landmark"])
    d = [_to_box(task, lid, np.array([p.x, p.y, p.z])) for p in task.poses[a : b + 1]]
    tol = max(3.0, 0.1 * d[0])
    if min(d) < min(d[0], d[-1]) - tol:
        return W.PROXIMITY[3]
    if abs(d[-1] - d[0]) < tol / 2:
        return W.PROXIMITY[2]
    return W.PROXIMITY[0] if d[-1] < d[0] else W.PROXIMITY[1]


def _duration(row: NavRow, task: NavigationTask) -> str | None:
    a, b = (task.segments[int(row.evidence[k])] for k in ("first", "second"))  # type: ignore[arg-type]
    # frames the drone actually moves forward over each segment, from the states
    na = sum(
        1
        for i in range(a.start_frame, a.end_frame + 1)
        if moved(task.poses[i], task.poses[i + 1]) == "fly_forward"
    )
    nb = sum(
        1
        for i in range(b.start_frame, b.end_frame + 1)
        if moved(task.poses[i], task.poses[i + 1]) == "fly_forward"
    )
    if max(na, nb) <= 1.1 * min(na, nb):
        return W.LONGER[2]
    return W.LONGER[0] if na > nb else W.LONGER[1]


def _nearest_to(task: NavigationTask, lid: str, among: list[str]) -> str:
    return _name(task, min(among, key=lambda o: _box_to_box(task, lid, o)))


def _object_recall(row: NavRow, task: NavigationTask) -> str | None:
    lid = str(row.evidence["landmark"])
    return _nearest_to(task, lid, [x.landmark_id for x in task.landmarks if x.landmark_id != lid])


def _association(row: NavRow, task: NavigationTask, scene: Scene) -> str | None:
    """The option standing closest to the goal (every landmark an option may mean measured, box
    to box), clearly closer than the rest, when the goal shows no pixel at the cut and that
    option's landmark of this mission is in view then."""
    goal = task.route[-1]
    t = row.clip_end_frame
    if task.visibility[goal][t].pixels or f"flying to the {_name(task, goal)}," not in row.question:
        return None
    gold = _closest(row, scene, lambda lm: _boxes_gap(_box(task, goal), _corners(lm)))
    mine = [x for x in task.landmarks if x.description == gold]
    if gold is None or len(mine) != 1 or not task.visibility[mine[0].landmark_id][t].visible:
        return None
    return gold


def _closest(row: NavRow, scene: Scene, far: Callable[[NavLandmark], float]) -> str | None:
    """The option whose landmarks stand nearest by ``far``, when every other option's stand at
    least RATIO times (and 5 m) farther; None otherwise, or when an option names no landmark
    the missions record."""
    ds = {o.label: min((far(lm) for lm in scene.get(o.label, [])), default=math.inf) for o in row.options}
    ranked = sorted(ds.items(), key=lambda kv: kv[1])
    if math.isinf(ranked[-1][1]) or ranked[1][1] < max(ranked[0][1] * RATIO, ranked[0][1] + 5.0):
        return None
    return ranked[0][0]


def _start_end(row: NavRow, task: NavigationTask, scene: Scene) -> str | None:
    """The option standing closest to the first state (every landmark an option may mean),
    clearly closer than the rest, one the video shows in its first five seconds; the question
    names the route's last landmark, which the last state reached."""
    goal = task.route[-1]
    last = task.poses[-1]
    if row.question != start_end_question(_name(task, goal)):
        return None
    if _off_footprint(task, goal, np.array([last.x, last.y, last.z])) > REACHED_M:
        return None
    first = np.array([task.poses[0].x, task.poses[0].y, task.poses[0].z])
    gold = _closest(row, scene, lambda lm: _point_to(lm, first))
    mine = [x for x in task.landmarks if x.description == gold]
    early = task.visibility[mine[0].landmark_id][: int(5 * task.fps) + 1] if len(mine) == 1 else []
    return gold if any(f.visible for f in early) else None


def _progress(row: NavRow, task: NavigationTask) -> str | None:
    """The step: how many route landmarks the drone has reached, in order, by the states (within
    ``REACHED_M`` of a landmark's footprint circle counts as reached)."""
    t = row.clip_end_frame
    steps = progress_steps(task.instruction)
    if t + 1 >= len(task.poses) or moved(task.poses[t], task.poses[t + 1]) == "hover":
        return step_label(len(steps) - 1)
    done, since = 0, 0
    for lid in task.route[:-1]:
        lm = next(x for x in task.landmarks if x.landmark_id == lid)
        reach = math.hypot(lm.size[0], lm.size[1]) / 2 + REACHED_M
        d = [math.hypot(p.x - lm.center[0], p.y - lm.center[1]) for p in task.poses[since : t + 1]]
        near = [i for i, v in enumerate(d) if v <= reach]
        if not near:
            break
        done, since = done + 1, since + near[0]
    return step_label(done) if done < len(steps) - 1 else None


def _counterfactual(row: NavRow, task: NavigationTask) -> str | None:
    leg = int(row.evidence["leg"])  # type: ignore[arg-type]
    alts = [a for a in task.alternatives if a.leg == leg]
    flown = [a for a in alts if a.chosen]
    feasible = [a for a in alts if a.feasible and a.seconds is not None]
    if (
        len(flown) != 1
        or not flown[0].feasible
        or flown[0].seconds != min(a.seconds for a in feasible if a.seconds is not None)
    ):
        return None  # the judged alternatives do not support what was flown
    asked = next(a for a in alts if a.option == row.evidence["option"])
    if not asked.feasible or asked.seconds is None:
        return W.COUNTERFACTUAL[2]
    quick = asked.seconds <= W.ABOUT_AS_LONG * (flown[0].seconds or 0.0)
    return W.COUNTERFACTUAL[0 if quick else 1]


def why(task: NavigationTask, index: int) -> str:
    """A segment's reason, from the motion and the geometry rather than its label: a turn that
    ends facing the leg's landmark faces it (else it steps aside), a tilt looks at it, a climb
    or descent that ends at the goal's facade height or over its roof matches it (else it clears
    an obstacle, or comes back down after one), a forward flight between a climb and a descent
    passes over, one after a side turn steps around, any other approaches; a hover arrives."""
    s = task.segments[index]
    a, b = task.poses[s.start_frame], task.poses[min(s.end_frame + 1, len(task.poses) - 1)]
    act = moved(a, b)
    lm = next(x for x in task.landmarks if x.landmark_id == s.toward)
    if act in ("turn_left", "turn_right"):
        bearing = math.degrees(math.atan2(lm.center[1] - b.y, lm.center[0] - b.x))
        return (
            "face_landmark" if abs((bearing - b.yaw_deg + 180.0) % 360.0 - 180.0) < 1.0 else "avoid_obstacle"
        )
    if act.startswith("rotate_camera"):
        return "look_at_landmark"
    last_leg = s.toward == task.route[-1]
    goal_z = {"rooftop": lm.center[2] + lm.size[2] / 2 + 8.0, "facade": lm.center[2]}.get(task.goal_part)
    climbs = [  # (start z, end z) of the leg's climbs before this segment, by the states
        (task.poses[x.start_frame].z, task.poses[x.end_frame + 1].z)
        for x in task.segments
        if x.leg == s.leg
        and x.index < index
        and moved(task.poses[x.start_frame], task.poses[x.end_frame + 1]) == "ascend"
    ]
    if act == "descend" and any(abs(b.z - z0) < 0.05 for z0, _ in climbs):
        return "descend_after_obstacle"  # back to the height it climbed from
    if act in ("ascend", "descend"):
        if last_leg and goal_z is not None and abs(b.z - goal_z) < 0.05:
            return "match_goal_height"
        return "clear_obstacle" if act == "ascend" else "descend_after_obstacle"
    if act == "fly_forward":
        before = [x for x in task.segments if x.leg == s.leg and x.index < index]
        after = next((x for x in task.segments if x.index > index), None)
        if climbs and before and before[-1].action == "ascend" and after is not None and after.leg == s.leg:
            back = task.poses[min(after.end_frame + 1, len(task.poses) - 1)].z
            if after.action == "descend" and abs(back - climbs[-1][0]) < 0.05:
                return "pass_obstacle"  # between a climb and the descent back to where it began
        if (
            before
            and before[-1].action in ("turn_left", "turn_right")
            and why(task, before[-1].index) == "avoid_obstacle"
        ):
            return "avoid_obstacle"
        return "approach_landmark"
    return "arrive"


def _about(task: NavigationTask, index: int, reason: str) -> str:
    """The landmark a segment was about: the structure in its leg's way for an obstacle's
    reason, else the leg's landmark."""
    s = task.segments[index]
    return (
        leg_blocker(task, s.leg) if reason in W.OBSTACLE_REASONS or reason == "avoid_obstacle" else s.toward
    )


def _causal(row: NavRow, task: NavigationTask) -> str | None:
    idx = int(row.evidence["segment"])  # type: ignore[arg-type]
    reason = why(task, idx)
    about = _about(task, idx, reason)
    return W.because(reason, _name(task, about)) if about else None


def asked_move(row: NavRow, task: NavigationTask) -> str | None:
    """The move a Causal row asks about, re-read from the states: its action from the poses and
    how many moves of that action came before (consecutive segments of one action are one
    move); None when the row's segment does not start a move."""
    idx = row.evidence.get("segment")
    if not isinstance(idx, int) or not 0 <= idx < len(task.segments):
        return None
    last = len(task.poses) - 1
    acts = [moved(task.poses[s.start_frame], task.poses[min(s.end_frame + 1, last)]) for s in task.segments]
    if idx > 0 and acts[idx - 1] == acts[idx]:
        return None
    ordinal = sum(1 for k in range(idx) if acts[k] == acts[idx] and (k == 0 or acts[k - 1] != acts[k]))
    return W.asked_move(acts[idx], ordinal) if ordinal < len(W.ORDINALS) else None


def _planning(row: NavRow, task: NavigationTask) -> str | None:
    return W.plan_text(why(task, int(row.evidence["next"])))  # type: ignore[arg-type]


def _bearing_off(p: NavState, target: list[float]) -> float:
    """How far the heading is from the bearing to ``target`` (degrees, 0..180)."""
    bearing = math.degrees(math.atan2(target[1] - p.y, target[0] - p.x))
    return abs((bearing - p.yaw_deg + 180.0) % 360.0 - 180.0)


def _crosses(lo: np.ndarray, hi: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the XY segment a-b meets the XY rectangle lo-hi (slab test)."""
    t0, t1 = 0.0, 1.0
    for k in range(2):
        d = b[k] - a[k]
        if abs(d) < 1e-9:
            if not lo[k] <= a[k] <= hi[k]:
                return False
            continue
        u, v = sorted(((lo[k] - a[k]) / d, (hi[k] - a[k]) / d))
        t0, t1 = max(t0, u), min(t1, v)
    return t0 <= t1


def _leg_from_states(task: NavigationTask, leg: int, at: np.ndarray) -> tuple[str, str, str] | None:
    """(turn, way, blocker description) of one leg read off the states; None when ambiguous.

    The opening turn: the heading change of the leg's first run of turning frames one way up to
    where it first faces the leg's landmark, when it does and is at least 20 degrees. What was
    avoided: a landmark (not the leg's own) whose footprint, widened by the keep-out margin, the
    straight way from where the drone set off to where the leg ends crosses, and that stood
    above the drone then; climbed
    over when the drone passed above its footprint higher than it set off, gone around when the
    path left the straight way sideways."""
    frames = [f for s in task.segments if s.leg == leg for f in (s.start_frame, s.end_frame)]
    a, b = min(frames), max(frames)
    target = next(x for x in task.landmarks if x.landmark_id == task.route[leg])
    # one direction: a turn to face the landmark straight followed by a side step the other way
    # is two moves, and only the first opens the leg
    p, opening = a, moved(task.poses[a], task.poses[a + 1]) if a < b else "hover"
    while (
        p < b
        and opening in ("turn_left", "turn_right")
        and moved(task.poses[p], task.poses[p + 1]) == opening
    ):
        p += 1
    # the turn faces the landmark where the heading first comes within 3 degrees of it (a side
    # step the same way may follow without a pause)
    q = next((f for f in range(a, p + 1) if _bearing_off(task.poses[f], target.center) < 3.0), p)
    dyaw = (task.poses[q].yaw_deg - task.poses[a].yaw_deg + 180.0) % 360.0 - 180.0
    faced = _bearing_off(task.poses[q], target.center) < 3.0 and abs(dyaw) >= 20.0
    turn = ("left" if dyaw > 0 else "right") if faced else ""
    # the set-off point: after the opening turn, the rooftop goal's climb and the camera tilt
    for moves in (("ascend",) if leg == len(task.route) - 1 and task.goal_part == "rooftop" else (), _TILTS):
        while p < b and moved(task.poses[p], task.poses[p + 1]) in moves:
            p += 1
    start, end, path = at[p], at[b], at[p : b + 1]
    line = (end - start)[:2] / max(float(np.linalg.norm((end - start)[:2])), 1e-9)
    sideways = float(np.max(np.abs((path[:, :2] - start[:2]) @ np.array([-line[1], line[0]]))))
    found = []
    for lm in task.landmarks:
        lo, hi = _box(task, lm.landmark_id)
        if lm.landmark_id == target.landmark_id or hi[2] <= start[2] - KEEP_OUT_M:
            continue
        if not _crosses(lo[:2] - KEEP_OUT_M, hi[:2] + KEEP_OUT_M, start, end):
            continue
        inside = np.all((path[:, :2] >= lo[:2]) & (path[:, :2] <= hi[:2]), axis=1)
        over = bool(inside.any()) and float(path[inside, 2].max()) > start[2] + 1.0
        around = not inside.any() and sideways > 2.0
        if over or around:
            found.append(("climb over" if over else "go around", lm.description))
    if len(found) > 1:
        return None
    return (turn, *found[0]) if found else (turn, "", "")


def _captioning(row: NavRow, task: NavigationTask) -> str | None:
    """Trajectory Captioning: the route's landmarks in the order the drone stopped beside them,
    each leg's turn and avoidance from the states (the planner's segment labels unread)."""
    at = np.array([[p.x, p.y, p.z] for p in task.poses])
    legs = [x for leg in range(len(task.route)) if (x := _leg_from_states(task, leg, at)) is not None]
    last = len(task.poses) - 1
    stops = [
        f for f in range(last + 1) if f == last or moved(task.poses[f], task.poses[f + 1]) != "fly_forward"
    ]
    # where the drone stopped nearest each landmark once it had flown (a stop on the way to
    # another may pass within reach of one standing beside it; it may set off beside one)
    flown = next((f for f in range(last) if moved(task.poses[f], task.poses[f + 1]) == "fly_forward"), last)
    stops = [f for f in stops if f > flown]
    arrived = {lid: min(stops, key=lambda f: (_off_footprint(task, lid, at[f]), f)) for lid in task.route}
    if len(legs) < len(task.route) or any(
        _off_footprint(task, lid, at[f]) > REACHED_M for lid, f in arrived.items()
    ):
        return None
    names = [_name(task, lid) for lid in sorted(task.route, key=lambda lid: arrived[lid])]
    turns, ways, blockers = ([leg[k] for leg in legs] for k in range(3))
    return caption_text(names, turns, ways, blockers)


DERIVE: dict[str, Derive] = {
    "trajectory_captioning": _captioning,
    "sequence_recall": _sequence,
    "causal": _causal,
    "high_level_planning": _planning,
    "object_recall": _object_recall,
    "proximity": _proximity,
    "duration": _duration,
    "landmark_position": _position,
    "cognitive_map": _layout,
    "counterfactual": _counterfactual,
    "progress_evaluation": _progress,
    "action_generation": _next_action,
}


# the types whose answer is the option standing closest to something, over the whole scene
NEAREST: dict[str, Callable[[NavRow, NavigationTask, Scene], str | None]] = {
    "start_end_position": _start_end,
    "association": _association,
}


def goal_in_view(
    store: BlobStore, run_id: str, row: NavRow, task: NavigationTask, instance: int
) -> str | None:
    """Goal Detection from the segmentation frame the question is asked at."""
    key = f"{keys.final_task(run_id, row.mission_id)}/{keys.video_frame('seg', row.clip_end_frame)}"
    try:
        mask = media.decode_segmentation(store.get(key))[1] == instance
    except (BlobNotFound, OSError, ValueError):
        return None
    if not mask.any():
        return W.IN_VIEW[0]
    cols = np.flatnonzero(mask.any(axis=0))
    return W.fifth((cols[0] + cols[-1] + 1) / 2 / mask.shape[1])


def in_view_during(
    store: BlobStore, run_id: str, row: NavRow, task: NavigationTask, scene: Scene
) -> str | None:
    """Scene Recall from the window's segmentation frames: the one option with pixels in at
    least half of them, when no other option shows a pixel in any (an option counts the pixels
    of every landmark the missions record under its description, this flight's or another's:
    the renderer draws the whole scene)."""
    a, b = int(row.evidence["start"]), int(row.evidence["end"])  # type: ignore[arg-type]
    labels = [o.label for o in row.options]
    ids = {label: [lm.rendered_instance_id for lm in scene.get(label, [])] for label in labels}
    if not all(ids.values()):
        return None  # a landmark no mission recorded: its pixels cannot be checked
    root = keys.final_task(run_id, row.mission_id)
    frame_keys = [f"{root}/{keys.video_frame('seg', f)}" for f in range(a, b + 1)]

    def shows(instance: NDArray[np.uint32]) -> list[bool]:
        return [bool(np.isin(instance, ids[label]).any()) for label in labels]

    shown = per_frame(store, frame_keys, shows)
    if shown is None:
        return None
    present = {label: sum(frame[i] for frame in shown) for i, label in enumerate(labels)}
    seen = [label for label, k in present.items() if k * 2 >= b - a + 1]
    others = [k for label, k in present.items() if label not in seen]
    return seen[0] if len(seen) == 1 and not any(others) else None


# a clock time or a span of seconds: "at 8.3 s", "between 8.3 s and 10.3 s", "the last 3 seconds"
TIME = re.compile(r"\b\d+(?:\.\d+)?\s*(?:s|sec|secs|seconds?)\b", re.IGNORECASE)
# the types whose question is about a moment of the flight: it must name it by what happened
MOMENT_FROM = {
    "sequence_recall": "segment",
    "scene_recall": "segment",
    "proximity": "segment",
}


def moment(row: NavRow, task: NavigationTask) -> str | None:
    """What a moment-type row's named segment did, in words, re-read from the states
    (:func:`event_of`); None when the row names no segment."""
    idx = row.evidence.get(MOMENT_FROM.get(row.task) or "")
    return event_of(task, idx) if isinstance(idx, int) else None


def event_of(task: NavigationTask, idx: int) -> str | None:
    """A segment in words from the states: its action from the poses, its reason from the
    motion and geometry (:func:`why`), the landmark it was about (the structure in the leg's
    way for an obstacle's reason); None when it names no landmark."""
    if not 0 <= idx < len(task.segments):
        return None
    s = task.segments[idx]
    reason = why(task, idx)
    about = _about(task, idx, reason)
    if not about:
        return None
    end = task.poses[min(s.end_frame + 1, len(task.poses) - 1)]
    return W.event(reason, moved(task.poses[s.start_frame], end), _name(task, about))


def _names_nothing(text: str) -> bool:
    """ "around a structure" (which?), "from the tank to the tank" (no flight)."""
    route = re.fullmatch(r"from the (.+) to the (.+)", text)
    return "a structure" in text or (route is not None and route.group(1) == route.group(2))


def check_rows(
    rows: list[NavRow], tasks: dict[str, NavigationTask | None], store: BlobStore, run_id: str
) -> Verdict:
    v = Verdict()
    scene = scene_of(tasks.values())
    for r in rows:
        mcq.check_structure(r, v)
        task = tasks.get(r.mission_id)
        if task is None:
            v.fail(r.sample_id, "navigation task missing or unreadable")
            continue
        if not 0 <= r.clip_end_frame < task.frame_count:
            v.fail(r.sample_id, "question frame outside the video")
            continue
        if r.task == "goal_detection":
            goal = next(x for x in task.landmarks if x.landmark_id == task.route[-1])
            derived = goal_in_view(store, run_id, r, task, goal.rendered_instance_id)
        elif r.task == "scene_recall":
            derived = in_view_during(store, run_id, r, task, scene)
        elif r.task in NEAREST:
            derived = NEAREST[r.task](r, task, scene)
        else:
            derived = DERIVE[r.task](r, task)
        if derived != r.answer_label:
            v.fail(r.sample_id, "answer disagrees with the geometry re-check")
        if len(r.options) not in option_counts(r.task, task.instruction):
            v.fail(r.sample_id, "not the source's number of options for the task")
        if any(_names_nothing(x) for x in (r.question, *(o.label for o in r.options))):
            v.fail(r.sample_id, "a question or option names no landmark a person could point at")
        if TIME.search(r.question):
            v.fail(r.sample_id, "question points at a moment by a time")
        # the row is released with its mission's instruction (UrbanVideo-Bench gives it with
        # every question): an option naming its landmark must not be the gold alone
        if lone_hint([o.label for o in r.options], r.answer_label, instructed(task)):
            v.fail(r.sample_id, "the gold is the only option naming a landmark of the instruction")
        if r.task == "causal" and (
            (words := asked_move(r, task)) is None or r.question != f"Why did the drone {words}?"
        ):
            v.fail(r.sample_id, "question does not name its move by its action and count")
        if r.task in MOMENT_FROM:
            words = moment(r, task)
            if words is None or f"it {words}?" not in r.question:
                v.fail(r.sample_id, "question does not name its moment by what happened there")
    return v
