"""Scene Recall, Start/End Position and Association offer landmarks drawn over the release: a
mission records 3 to 10 landmarks, too few for the source's five options of its own (a 40-landmark
build asked none of Association and one or two of the others). Each distractor is a landmark some
mission records, wrong for every landmark its description may mean (out of the camera's view
during the move; clearly farther from where the drone set off, or from the goal), and QC re-checks
that over every mission's landmarks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nav_blocks import build, seen, world
from skyqa import keys, media
from skyqa.blob import LocalBlobStore
from skyqa.contracts.navigation import NavigationTask
from skyqa.contracts.qa import Option
from skyqa.contracts.urbanvideo import NavRow
from skyqa.families.urbanvideo.checks import check_rows
from skyqa.families.urbanvideo.questions import (
    Mission,
    Question,
    clearly_farther,
    out_of_view,
    point_gap,
    scene_boxes,
    start_end_question,
)

pytestmark = pytest.mark.unit


def without(task: NavigationTask, name: str) -> NavigationTask:
    """The mission as if it had not recorded ``name`` (another mission did)."""
    kept = [lm for lm in task.landmarks if lm.description != name]
    return task.model_copy(update={"landmarks": kept, "traj_id": "blocks_nav_route_001"})


def row(q: Question, task: NavigationTask, others: list[str], sample: str = "s") -> NavRow:
    labels = [q.options[0], *others]
    return NavRow(
        sample_id=sample, scene_id="blocks", engine="builtin", task=q.task, task_display_name=q.task,
        group="recall", mission_id=task.traj_id, mission_kind="route", instruction=task.instruction,
        video_path="v.mp4", fps=task.fps, clip_end_frame=q.end_frame, frame_count=task.frame_count,
        question=q.question, options=[Option(option_id="ABCDE"[k], label=x) for k, x in enumerate(labels)],
        answer_option_id="A", answer_label=q.options[0], evidence=q.evidence, difficulty="easy",
        prompt_text="", user_prompt="", system_prompt="",
    )  # fmt: skip


def offered(q: Question) -> list[str]:
    """Four distractors the question allows (sorted: the test's choice, not the family's)."""
    return sorted((q.within or frozenset()) - q.barred - {q.options[0]})[:4]


def test_out_of_view_is_conservative_and_not_empty(task: NavigationTask) -> None:
    """A box called out of view for a move is never in view then by the renderer's stand-in,
    and some boxes are in view (the test is not vacuous)."""
    m = Mission(task)
    _, marks = world(1.0)
    calls = []
    for s in task.segments:
        for lm in marks:
            box = (lm.target.c - np.asarray(lm.target.size) / 2, lm.target.c + np.asarray(lm.target.size) / 2)
            out = out_of_view(m, box, s.start_frame, s.end_frame)
            calls.append(out)
            if out:
                assert not any(seen(p, lm).visible for p in task.poses[s.start_frame : s.end_frame + 1])
    assert any(calls) and not all(calls)


def test_scene_recall_distractors_show_no_pixel_and_qc_reads_every_mission(
    task: NavigationTask, tmp_path: Path
) -> None:
    """The gold is in view for half the move; no distractor shows a pixel then; none names the
    instruction's landmarks or the move's. QC counts an option's pixels by every landmark the
    missions record under it: one recorded by another mission only fails the row when it shows
    in a frame of the move."""
    found = build("scene_recall", task)
    assert found
    m = Mission(task)
    for q in found:
        a, b = int(q.evidence["start"]), int(q.evidence["end"])  # type: ignore[arg-type]
        assert m.seen(str(q.evidence["landmark"]), a, b) * 2 >= b - a + 1
        assert {"stone fountain", "grey office tower"} <= q.barred
        for lid, name in m.names.items():
            if name in (q.within or ()):
                assert not any(f.pixels for f in task.visibility[lid][a : b + 1])
    q = next(q for q in found if len(offered(q)) == 4)
    other = offered(q)[0]  # as if only another mission recorded it
    mine = without(task, other)
    ids = {lm.description: lm.rendered_instance_id for lm in task.landmarks}
    a, b = int(q.evidence["start"]), int(q.evidence["end"])  # type: ignore[arg-type]
    store = LocalBlobStore(tmp_path)
    for run, other_at in (("clean", None), ("shown", a)):
        for f in range(a, b + 1):
            instance = np.zeros((6, 8), np.uint16)
            instance[0, 0] = ids[q.options[0]]
            if f == other_at:
                instance[5, 7] = ids[other]
            key = f"{keys.final_task(run, mine.traj_id)}/{keys.video_frame('seg', f)}"
            store.put(key, media.encode_segmentation(np.zeros((6, 8), np.uint16), instance), "image/png")
    tasks: dict[str, NavigationTask | None] = {mine.traj_id: mine, task.traj_id: task}
    good = row(q, mine, offered(q))
    assert check_rows([good], tasks, store, "clean").reasons == {}
    assert check_rows([good], tasks, store, "shown").reasons == {
        "s": "answer disagrees with the geometry re-check"
    }
    # a landmark no mission records cannot be checked: refused
    alone: dict[str, NavigationTask | None] = {mine.traj_id: mine}
    assert check_rows([good], alone, store, "clean").reasons


def test_start_end_says_the_goal_and_offers_landmarks_clearly_farther(
    task: NavigationTask, tmp_path: Path
) -> None:
    """Where the drone stopped is the instruction's goal (the question says it); the options are
    landmarks each clearly farther from where it set off than the gold, none of the
    instruction's; QC passes that row and refuses one offering a landmark about as near (or
    nearer), or naming another goal."""
    (q,) = build("start_end_position", task)
    assert q.question == start_end_question("grey office tower")
    assert {"stone fountain", "grey office tower"} <= q.barred
    boxes = scene_boxes([task])
    near = point_gap(np.array([task.poses[0].x, task.poses[0].y, task.poses[0].z]), boxes[q.options[0]][0][1])
    start = np.array([task.poses[0].x, task.poses[0].y, task.poses[0].z])
    for x in q.within or ():
        assert all(clearly_farther(point_gap(start, b), near) for _, b in boxes[x])
    tasks: dict[str, NavigationTask | None] = {task.traj_id: task}
    store = LocalBlobStore(tmp_path)
    good = row(q, task, offered(q), "good")
    nearer = row(q, task, ["stone fountain", *offered(q)[:3]], "nearer")
    moved = good.model_copy(update={"sample_id": "moved", "question": start_end_question("blue kiosk")})
    assert check_rows([good, nearer, moved], tasks, store, "r").reasons == {
        "nearer": "answer disagrees with the geometry re-check",
        "moved": "answer disagrees with the geometry re-check",
    }


def test_association_gold_in_view_goal_not_and_distractors_farther_from_the_goal(
    task: NavigationTask, tmp_path: Path
) -> None:
    """Asked at a moment the goal shows no pixel, of a landmark in view then; every distractor
    clearly farther from the goal (every landmark it may mean); a fact of the scene keyed by the
    goal and the gold. QC passes such a row and refuses one that
    offers a landmark nearer the goal, or is asked where the goal is in view."""
    found = build("association", task)
    assert found
    m = Mission(task)
    boxes = scene_boxes([task])
    goal = (m.lo[m.goal], m.hi[m.goal])
    for q in found:
        t, lid = q.end_frame, str(q.evidence["landmark"])
        assert not task.visibility[m.goal][t].pixels and task.visibility[lid][t].visible
        assert q.fact in (f"nearest:{m.goal}", f"nearer:{m.goal}:{lid}")
        near = m.box_gap(lid, m.goal)
        for x in q.within or ():
            assert all(
                clearly_farther(
                    float(np.linalg.norm(np.maximum(np.maximum(b[0] - goal[1], goal[0] - b[1]), 0))), near
                )
                for _, b in boxes[x]
            )
    q = next(q for q in found if len(offered(q)) == 4)
    tasks: dict[str, NavigationTask | None] = {task.traj_id: task}
    good = row(q, task, offered(q), "good")
    shown = next(f for f in range(len(task.poses)) if task.visibility[m.goal][f].pixels)
    late = good.model_copy(update={"sample_id": "late", "clip_end_frame": shown})
    verdict = check_rows([good, late], tasks, LocalBlobStore(tmp_path), "r")
    assert verdict.reasons == {"late": "answer disagrees with the geometry re-check"}
    closer = [x for x in m.names.values() if x not in (q.within or ()) and x != q.options[0]]
    swapped = good.model_copy(
        update={
            "sample_id": "closer",
            "options": [*good.options[:4], good.options[4].model_copy(update={"label": closer[0]})],
        }
    )
    assert check_rows([swapped], tasks, LocalBlobStore(tmp_path), "r").reasons
