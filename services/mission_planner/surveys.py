"""UltraVR-style ultra-resolution surveys: one area photographed nadir and oblique at a size
where its small objects (vehicles, containers, lamps, trees) are tiny evidence.

What is known of the small objects decides what a view's questions can count: an object whose
3D box the renderer is not given gets no in-frame or occluded share, and the family treats it as
not countable without doubt, which makes every count of its class in its region uncertain. On
the builtin backend the planner reads the scene's own objects (class, instance id, box: what the
renderer draws), so every small object a view shows is measured. The AirSim backend's scene is
not readable here: its objects come from the fused instance table, which misses small objects
(thin lamps, cars the scan saw in few points), and a view showing one asks fewer questions.

An area is centred where those objects are densest within half the nadir footprint; further
areas are at least a quadrant (half a footprint) from each chosen one along x or y, so each
view's regions frame different ground (a city is often less than two footprints wide: a
footprint's width apart left one area on a 40-landmark procedural scene). The nadir camera
hangs at the height whose ground pixel is ``gsd_m`` at the centre, image top to the north. The
oblique camera stands at the same height at a seeded azimuth and a seeded depression of
``OBLIQUE_PITCH_DEG``, aimed at the centre: at 40 degrees, with a 4:3 image's 37-degree half
height, the top edge looked 3 degrees below the horizon, and the upper regions showed the city
to its end, their objects tiny and hidden behind buildings, not one count certain. Each view
is then shifted a little (:func:`settle`) so that few objects lie on its centre lines or its
border. A survey renders as one video job with ``survey`` set: the renderer renders each view
in row bands and measures every instance it shows; the small objects it is told about
(``targets``: every one whose box projects into either view) also get their 3D box's in-frame
and occluded shares and their colour. The bundle is ``final_task/survey_task.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.fusion import InstanceTable
from skyqa.contracts.ultra import (
    MeasuredView,
    RejectedSurvey,
    SurveyIndexRow,
    SurveyMeasurement,
    SurveyPlan,
    SurveyTask,
    SurveyView,
)
from skyqa.errors import UnknownScene
from skyqa.protojson import to_json
from skyqa.sim.camera import Intrinsics, Pose, look_at, project, project_box
from skyqa.v1 import render_pb2, scan_pb2

from services.mission_planner.group_missions import add_stills, seed_of
from services.mission_planner.safety import ObstacleMap

# the classes a survey's questions count: small in an aerial view, many per area
SMALL = ("car", "truck", "bus", "shipping_container", "street_lamp", "tree", "storage_tank")
# depression below the horizon: the top edge stays 18-28 degrees down (the far side of the
# area within about three heights), the view still oblique (25-35 degrees off the vertical)
OBLIQUE_PITCH_DEG = (55.0, 65.0)
DRAWS = 20  # oblique azimuth draws before the survey is rejected
MAX_TARGETS = 2000
# a view's four regions are the quadrants cut by its centre lines, and an object whose centre
# lies close to one belongs to no region for certain, as one cut by the image's border is not
# certainly counted: either leaves every count of its class in its region(s) uncertain. Each
# view is shifted (eye and aim together, up to ``SETTLE_SHARE`` of the footprint's width each
# way, ``SETTLE_STEPS`` steps a side) to where the fewest small objects project within
# ``SPLIT_BAND`` of the image's size of either line or across the border: an area centred on
# an object, as it is chosen, would put that object on both lines, and a centre line along a
# street every car of the street
SPLIT_BAND = 0.03
SETTLE_SHARE = 1.0 / 12.0
SETTLE_STEPS = 20
GROUND_WINDOW_M = 20.0  # the ground under an area: the lowest cell within this of its centre


class Thing(Protocol):
    """A small object as the planner knows it: a fused-map instance or a scene object."""

    instance_id: int
    class_name: str
    center: list[float]
    size: list[float]


@dataclass
class SceneThing:
    """One of the scene's own objects: its class, instance id and axis-aligned box, exactly
    what the builtin renderer draws (the ids its instance image carries)."""

    instance_id: int
    class_name: str
    center: list[float]
    size: list[float]


def scene_things(backend: str, scene_id: str, scenes_dir: Path | None) -> list[SceneThing] | None:
    """The scene's small objects, or None where the backend's scene is not readable here
    (AirSim: the fused instance table stands in for it)."""
    if backend != "builtin":
        return None
    # the scene's objects only: no ray-casting scene is built (it is cached for other planners)
    from skyqa.sim import load_scene

    scene = load_scene(scene_id, scenes_dir)
    return [
        SceneThing(
            o.instance_id,
            o.semantic.name,
            [float(v) for v in o.center],
            [float(v) for v in o.size],
        )
        for o in scene.things()
        if o.semantic.name in SMALL
    ]


def survey_id_of(scene_id: str, k: int) -> str:
    return f"{scene_id}_survey_{k:03d}"


def altitude_for(gsd_m: float, width: int, fov_deg: float) -> float:
    """Height above the ground at which a nadir pixel at the image centre covers ``gsd_m``."""
    return gsd_m * width / (2.0 * math.tan(math.radians(fov_deg) / 2.0))


def choose_areas(things: Sequence[Thing], count: int, half: tuple[float, float]) -> list[tuple[float, float]]:
    """Up to ``count`` centres, most small objects within the nadir footprint first (ties to the
    lower instance id), each shifted from every chosen one by at least half a footprint along
    x or along y (before its views settle, by at most ``SETTLE_SHARE`` of a footprint): its
    quadrants then frame other ground than theirs, while a city less than two footprints wide
    still holds several areas."""
    small = [i for i in things if i.class_name in SMALL]
    ranked = []
    for s in small:
        inside = [
            t
            for t in small
            if abs(t.center[0] - s.center[0]) <= half[0] and abs(t.center[1] - s.center[1]) <= half[1]
        ]
        ranked.append((-len(inside), s.instance_id, (s.center[0], s.center[1])))
    ranked.sort()
    chosen: list[tuple[float, float]] = []
    for _, _, c in ranked:
        if len(chosen) == count:
            break
        if all(abs(c[0] - o[0]) >= half[0] or abs(c[1] - o[1]) >= half[1] for o in chosen):
            chosen.append(c)
    return chosen


def in_view(thing: Thing, poses: Sequence[list[float]], k: Intrinsics) -> bool:
    """Whether the object's 3D box projects into the image of one of ``poses``."""
    lo = np.asarray(thing.center) - np.asarray(thing.size) / 2.0
    hi = np.asarray(thing.center) + np.asarray(thing.size) / 2.0
    for p in poses:
        (x0, y0, x1, y1), _ = project_box(lo, hi, Pose(*p), k)
        if x1 >= 0 and y1 >= 0 and x0 < k.width and y0 < k.height:
            return True
    return False


def place_views(
    centre: list[float], height: float, obstacles: ObstacleMap, rng: np.random.Generator
) -> list[SurveyView] | None:
    """The nadir view above ``centre`` and an oblique view of it; None when no oblique pose in
    ``DRAWS`` draws (or the nadir one) is clear of the map."""
    nadir = np.array([centre[0], centre[1], centre[2] + height])
    if obstacles.unsafe(nadir[None])[0]:
        return None
    views = [SurveyView(view="nadir", pose=[round(float(v), 3) for v in (*nadir, 90.0, -90.0, 0.0)])]
    for _ in range(DRAWS):
        az = float(rng.uniform(0.0, 2 * math.pi))
        depression = math.radians(float(rng.uniform(*OBLIQUE_PITCH_DEG)))
        d = height / math.tan(depression)
        eye = np.array([centre[0] + d * math.cos(az), centre[1] + d * math.sin(az), centre[2] + height])
        if obstacles.unsafe(eye[None])[0]:
            continue
        yaw, pitch = look_at(eye, np.array(centre))
        views.append(SurveyView(view="oblique", pose=[round(float(v), 3) for v in (*eye, yaw, pitch, 0.0)]))
        return views
    return None


def crowding(
    pose: list[float],
    centres: NDArray[np.float64],
    radii: NDArray[np.float64],
    k: Intrinsics,
    shifts: NDArray[np.float64],
) -> NDArray[np.int64]:
    """Per shift (x, y of the eye and aim), how many small objects (box centres, and half their
    largest side) would leave a count in doubt: projecting within ``SPLIT_BAND`` of the
    image's centre lines, or across its border."""
    p = Pose(*pose)
    rot = p.rotation()
    base = (centres - p.position) @ rot  # camera-frame coordinates at no shift
    moved = np.column_stack([shifts, np.zeros(len(shifts))]) @ rot
    local = base[None, :, :] - moved[:, None, :]
    depth = local[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        px = k.cx - k.fx * local[..., 1] / depth
        py = k.cy - k.fy * local[..., 2] / depth
        r = k.fx * radii[None, :] / depth
    front = depth > 0.1
    inside = front & (px >= 0) & (px < k.width) & (py >= 0) & (py < k.height)
    near = (np.abs(px - k.cx) < SPLIT_BAND * k.width) | (np.abs(py - k.cy) < SPLIT_BAND * k.height)
    touches = front & (px + r > 0) & (px - r < k.width) & (py + r > 0) & (py - r < k.height)
    whole = (px - r >= 0) & (px + r < k.width) & (py - r >= 0) & (py + r < k.height)
    out: NDArray[np.int64] = ((inside & near) | (touches & ~whole)).sum(axis=1)
    return out


def settle(
    view: SurveyView, things: Sequence[Thing], k: Intrinsics, reach_m: float, obstacles: ObstacleMap
) -> SurveyView:
    """The view shifted to where the fewest small objects lie near its centre lines or across
    its border (:func:`crowding`; ties: the shortest shift, then the lower x, y), among the
    shifts whose eye is clear of the map."""
    if not things:
        return view
    centres = np.array([t.center for t in things], dtype=np.float64)
    radii = np.array([max(t.size) / 2.0 for t in things], dtype=np.float64)
    # only what a shift can bring near the lines or the border: objects projecting near the
    # image unshifted
    px, depth = project(centres, Pose(*view.pose), k)
    margin = 0.5 * np.array([k.width, k.height])
    keep = (depth > 0.1) & np.all((px >= -margin) & (px < margin * 3.0), axis=1)
    steps = np.linspace(-reach_m, reach_m, 2 * SETTLE_STEPS + 1)
    shifts = np.array([(dx, dy) for dx in steps for dy in steps], dtype=np.float64)
    eyes = np.column_stack([np.asarray(view.pose[:2]) + shifts, np.full(len(shifts), view.pose[2])])
    crowd = crowding(view.pose, centres[keep], radii[keep], k, shifts)
    crowd[obstacles.unsafe(eyes)] = np.iinfo(np.int64).max
    best = min(range(len(shifts)), key=lambda i: (crowd[i], float(np.hypot(*shifts[i])), *shifts[i]))
    dx, dy = shifts[best]
    pose = [round(view.pose[0] + float(dx), 3), round(view.pose[1] + float(dy), 3), *view.pose[2:]]
    return SurveyView(view=view.view, pose=pose)


def ground_under(obstacles: ObstacleMap, x: float, y: float) -> float:
    """The ground level under an area: the lowest map cell near its centre (the centre's own
    cell may be a roof, or hold a tank)."""
    g = np.linspace(-GROUND_WINDOW_M, GROUND_WINDOW_M, 11)
    xy = np.array([(x + a, y + b) for a in g for b in g], dtype=np.float64)
    return float(obstacles.ground_z(xy).min())


def plan_all(
    run_id: str,
    scene_id: str,
    backend: str,
    table: InstanceTable,
    obstacles: ObstacleMap,
    scan: scan_pb2.ScanRequest,
    jpeg_quality: int,
    store: BlobStore,
    scenes_dir: Path | None = None,
) -> tuple[list[str], list[RejectedSurvey], list[render_pb2.VideoJob]]:
    """Plan, write and make render jobs for the run's surveys. ``scenes_dir`` resolves a mesh
    scene's id, as the renderer's does; a mesh scene the planner cannot open without it is
    surveyed on the fused map's objects, as on AirSim."""
    try:
        things: Sequence[Thing] | None = scene_things(backend, scene_id, scenes_dir)
    except UnknownScene:
        things = None
    if things is None:
        things = table.instances
    plans, rejected = plan_surveys(scene_id, scan, things, obstacles)
    planned, jobs = [], []
    for plan, targets in plans:
        store.put(
            keys.mission_file(run_id, plan.survey_id, keys.SURVEY_PLAN), dump_json(plan), "application/json"
        )
        job = survey_job(run_id, backend, plan, targets, jpeg_quality)
        store.put(
            keys.mission_file(run_id, plan.survey_id, keys.RENDER_REQUEST),
            to_json(job, indent=1),
            "application/json",
        )
        planned.append(plan.survey_id)
        jobs.append(job)
    return planned, rejected, jobs


def plan_surveys(
    scene_id: str, scan: scan_pb2.ScanRequest, things: Sequence[Thing], obstacles: ObstacleMap
) -> tuple[list[tuple[SurveyPlan, list[Thing]]], list[RejectedSurvey]]:
    """The run's survey plans, each with the small objects its renderer measures (nearest the
    area's centre first, at most ``MAX_TARGETS``), and the rejected surveys (nothing is
    written)."""
    sv = scan.surveys
    height = altitude_for(sv.gsd_m, sv.width, sv.fov_deg)
    half = (sv.gsd_m * sv.width / 2.0, sv.gsd_m * sv.height / 2.0)
    lens = Intrinsics.from_fov(sv.width, sv.height, sv.fov_deg)
    small = [t for t in things if t.class_name in SMALL]
    centres = choose_areas(small, sv.count, half)
    planned: list[tuple[SurveyPlan, list[Thing]]] = []
    rejected = []
    for k in range(sv.count):
        survey_id = survey_id_of(scene_id, k)
        if k >= len(centres):
            reason = "no further area with small objects at least half a footprint from the others"
            rejected.append(RejectedSurvey(survey_id=survey_id, reason=reason))
            continue
        cx, cy = centres[k]
        centre = [cx, cy, ground_under(obstacles, cx, cy)]
        seed = seed_of(scan.seed, survey_id)
        views = place_views(centre, height, obstacles, np.random.default_rng(seed))
        if views is None:
            rejected.append(
                RejectedSurvey(survey_id=survey_id, reason=f"no clear view pose in {DRAWS} draws")
            )
            continue
        views = [settle(v, small, lens, SETTLE_SHARE * 2.0 * half[0], obstacles) for v in views]
        # the area is what the nadir view is centred on after settling
        centre = [views[0].pose[0], views[0].pose[1], centre[2]]
        plan = SurveyPlan(
            scene_id=scene_id,
            survey_id=survey_id,
            center=[round(v, 3) for v in centre],
            gsd_m=sv.gsd_m,
            width=sv.width,
            height=sv.height,
            fov_deg=sv.fov_deg,
            views=views,
            seed=seed,
        )
        poses = [v.pose for v in views]
        shown = [t for t in small if in_view(t, poses, lens)]
        shown.sort(key=lambda t: (math.hypot(t.center[0] - cx, t.center[1] - cy), t.instance_id))
        planned.append((plan, shown[:MAX_TARGETS]))
    return planned, rejected


def survey_job(
    run_id: str, backend: str, plan: SurveyPlan, targets: Sequence[Thing], jpeg_quality: int
) -> render_pb2.VideoJob:
    job = render_pb2.VideoJob(
        run_id=run_id,
        job_id=plan.survey_id,
        scene_id=plan.scene_id,
        backend=backend,
        width=plan.width,
        height=plan.height,
        fov_deg=plan.fov_deg,
        fps=1.0,
        jpeg_quality=jpeg_quality,
        output_prefix=keys.final_task(run_id, plan.survey_id),
        requester="mission",
        correlation=plan.survey_id,
        survey=True,
    )
    add_stills(job, [v.pose for v in plan.views], targets)
    return job


def is_survey(store: BlobStore, run_id: str, job_id: str) -> bool:
    return store.exists(keys.mission_file(run_id, job_id, keys.SURVEY_PLAN))


def bundle(done: render_pb2.VideoDone, store: BlobStore) -> SurveyTask:
    """The plan plus the renderer's measurements of its views."""
    plan = load_json(
        SurveyPlan, store.get(keys.mission_file(done.run_id, done.job_id, keys.SURVEY_PLAN)), "survey plan"
    )
    measured = load_json(SurveyMeasurement, store.get(done.survey.key), "survey measurements")
    if len(measured.views) != len(plan.views) or (measured.width, measured.height) != (
        plan.width,
        plan.height,
    ):
        raise ValueError(f"{done.job_id}: the measured views do not match the survey's plan")
    views: list[MeasuredView] = measured.views
    task = SurveyTask(**plan.model_dump(), measured=views)
    store.put(
        f"{keys.final_task(done.run_id, done.job_id)}/{keys.SURVEY_TASK}", dump_json(task), "application/json"
    )
    return task


def index_row(run_id: str, survey_id: str) -> SurveyIndexRow:
    return SurveyIndexRow(
        survey_id=survey_id, task=f"{keys.final_task(run_id, survey_id)}/{keys.SURVEY_TASK}"
    )
