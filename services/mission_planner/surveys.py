"""UltraVR-style ultra-resolution surveys: one area photographed nadir and oblique at a size
where its small objects (vehicles, containers, lamps, trees) are tiny evidence.

An area is centred where the fused instance table has most small objects within half the nadir
footprint; further areas keep a footprint's width apart. The nadir camera hangs at the height
whose ground pixel is ``gsd_m`` at the centre, image top to the north. The oblique camera stands
at the same height at a seeded azimuth and a seeded 40-55 degree depression, aimed at the centre.
A survey renders as one video job with ``survey`` set: the renderer renders each view in row
bands and measures every instance it shows; the small objects it is told about (``targets``,
every one within reach of either view) also get their 3D box's in-frame and occluded shares and
their colour. The bundle is ``final_task/survey_task.json``.
"""

from __future__ import annotations

import math

import numpy as np
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.fusion import InstanceEntry, InstanceTable
from skyqa.contracts.ultra import (
    MeasuredView,
    RejectedSurvey,
    SurveyIndexRow,
    SurveyMeasurement,
    SurveyPlan,
    SurveyTask,
    SurveyView,
)
from skyqa.protojson import to_json
from skyqa.sim.camera import look_at
from skyqa.v1 import render_pb2, scan_pb2

from services.mission_planner.group_missions import add_stills, seed_of
from services.mission_planner.safety import ObstacleMap

# the classes a survey's questions count: small in an aerial view, many per area
SMALL = ("car", "truck", "bus", "shipping_container", "street_lamp", "tree", "storage_tank")
OBLIQUE_PITCH_DEG = (40.0, 55.0)  # depression below the horizon
DRAWS = 20  # oblique azimuth draws before the survey is rejected
MAX_TARGETS = 2000


def survey_id_of(scene_id: str, k: int) -> str:
    return f"{scene_id}_survey_{k:03d}"


def altitude_for(gsd_m: float, width: int, fov_deg: float) -> float:
    """Height above the ground at which a nadir pixel at the image centre covers ``gsd_m``."""
    return gsd_m * width / (2.0 * math.tan(math.radians(fov_deg) / 2.0))


def choose_areas(
    instances: list[InstanceEntry], count: int, half: tuple[float, float]
) -> list[tuple[float, float]]:
    """Up to ``count`` centres, most small objects within the nadir footprint first (ties to the
    lower instance id), a footprint's width apart."""
    small = [i for i in instances if i.class_name in SMALL]
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
        if all(max(abs(c[0] - o[0]), abs(c[1] - o[1])) >= 2 * half[0] for o in chosen):
            chosen.append(c)
    return chosen


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


def plan_all(
    run_id: str,
    scene_id: str,
    backend: str,
    table: InstanceTable,
    obstacles: ObstacleMap,
    scan: scan_pb2.ScanRequest,
    jpeg_quality: int,
    store: BlobStore,
) -> tuple[list[str], list[RejectedSurvey], list[render_pb2.VideoJob]]:
    """Plan, write and make render jobs for the run's surveys."""
    sv = scan.surveys
    height = altitude_for(sv.gsd_m, sv.width, sv.fov_deg)
    half = (sv.gsd_m * sv.width / 2.0, sv.gsd_m * sv.height / 2.0)
    centres = choose_areas(table.instances, sv.count, half)
    planned, rejected, jobs = [], [], []
    for k in range(sv.count):
        survey_id = survey_id_of(scene_id, k)
        if k >= len(centres):
            rejected.append(RejectedSurvey(survey_id=survey_id, reason="no further area with small objects"))
            continue
        cx, cy = centres[k]
        centre = [cx, cy, float(obstacles.ground_z(np.array([[cx, cy]]))[0])]
        seed = seed_of(scan.seed, survey_id)
        views = place_views(centre, height, obstacles, np.random.default_rng(seed))
        if views is None:
            rejected.append(
                RejectedSurvey(survey_id=survey_id, reason=f"no clear view pose in {DRAWS} draws")
            )
            continue
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
        store.put(keys.mission_file(run_id, survey_id, keys.SURVEY_PLAN), dump_json(plan), "application/json")
        # the oblique view reaches about twice as far as the nadir one's corners
        reach = 2.0 * math.hypot(*half) + height
        targets = [
            i
            for i in table.instances
            if i.class_name in SMALL and math.hypot(i.center[0] - cx, i.center[1] - cy) <= reach
        ]
        job = survey_job(run_id, backend, plan, targets[:MAX_TARGETS], jpeg_quality)
        store.put(
            keys.mission_file(run_id, survey_id, keys.RENDER_REQUEST),
            to_json(job, indent=1),
            "application/json",
        )
        planned.append(survey_id)
        jobs.append(job)
    return planned, rejected, jobs


def survey_job(
    run_id: str, backend: str, plan: SurveyPlan, targets: list[InstanceEntry], jpeg_quality: int
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
