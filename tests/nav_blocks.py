"""A hand-checkable block world for the navigation family's tests: flat ground, a long hall
between the start and a tower, a fountain, a kiosk, a water tank, a chapel, a pavilion and a
crane beside the way; the mission the planner
flies over it, with a pinhole stand-in for the renderer's visibility."""

from __future__ import annotations

import math

import numpy as np
from skyqa.contracts.navigation import NavFrame, NavigationPlan, NavigationTask, NavState, NavVideo
from skyqa.families.urbanvideo.questions import BUILDERS, Mission, Question

from services.mission_planner.navigation import (
    Flight,
    NavConfig,
    RouteLandmark,
    fly_leg,
    instruction,
    measured_landmarks,
    timeline,
)
from services.mission_planner.safety import ObstacleMap
from services.mission_planner.shapes import Target

FPS = 10.0
FOV = 90.0


def lm(lid: str, lo: tuple[float, float, float], hi: tuple[float, float, float], name: str) -> RouteLandmark:
    c = tuple((a + b) / 2 for a, b in zip(lo, hi, strict=True))
    s = tuple(b - a for a, b in zip(lo, hi, strict=True))
    return RouteLandmark(lid, int(lid.split("_")[1]), "building", "", name, Target(c, s, 2.0))  # type: ignore[arg-type]


def faces(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    axes = [np.arange(a, b + 0.01, 1.0) for a, b in zip(lo, hi, strict=True)]
    g = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    return g[np.any(np.isclose(g, lo) | np.isclose(g, hi), axis=1)]


def world(
    side: float, hall: float | None = 30.0, tower_y: float = 0.0, fountain_y: float = 0.0, span: float = 140.0
) -> tuple[ObstacleMap, list[RouteLandmark]]:
    """``side`` 1 or -1: the world as drawn, or mirrored across the x axis; ``hall``: the hall's
    height, None without it, ``span`` how far it reaches either side; ``tower_y``, ``fountain_y``:
    those moved sideways."""

    def box(lid: str, x0: float, y0: float, x1: float, y1: float, h: float, name: str) -> RouteLandmark:
        ys = sorted((side * y0, side * y1))
        return lm(lid, (x0, ys[0], 0.0), (x1, ys[1], h), name)

    marks = [
        box("lm_1", 100, tower_y - 10, 120, tower_y + 10, 40, "grey office tower"),
        # 18-24 m north: with moves ramped from rest, its approach and the tower's still differ
        # enough in length for a duration question
        box("lm_3", 16, fountain_y + 18, 22, fountain_y + 24, 10, "stone fountain"),
        box("lm_4", 90, 20, 96, 26, 4, "blue kiosk"),
        box("lm_5", 70, -30, 76, -24, 6, "yellow water tank"),
        box("lm_6", 130, 25, 136, 31, 8, "white chapel"),
        box("lm_7", 8, 44, 14, 50, 6, "green pavilion"),
        box("lm_8", 84, -52, 90, -46, 12, "orange crane"),
    ]
    if hall is not None:
        marks.append(box("lm_2", 40, -span, 60, span, hall, "red brick hall"))
    ground = np.stack(np.meshgrid(np.arange(-150.0, 151, 2), np.arange(-150.0, 151, 2)), -1).reshape(-1, 2)
    cloud = [np.column_stack([ground, np.zeros(len(ground))])]
    keep = []
    for m in marks:
        lo = m.target.c - np.asarray(m.target.size) / 2
        hi = m.target.c + np.asarray(m.target.size) / 2
        cloud.append(faces(lo, hi))
        keep.append(ObstacleMap.keepout(lo, hi, 2.0))
    return ObstacleMap(np.concatenate(cloud), keep, 2.0), marks


def seen(p: NavState, m: RouteLandmark) -> NavFrame:
    """A pinhole stand-in for the renderer: the centre within the field of view and 150 m."""
    d = m.target.c - np.array([p.x, p.y, p.z])
    yaw, pitch = math.radians(p.yaw_deg), math.radians(p.camera_pitch_deg)
    fwd = np.array([math.cos(yaw) * math.cos(pitch), math.sin(yaw) * math.cos(pitch), math.sin(pitch)])
    left = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
    up = np.cross(fwd, left)
    f, x, y = float(d @ fwd), float(d @ left), float(d @ up)
    half = math.tan(math.radians(FOV / 2))
    if f <= 1 or abs(x / f) > half * 0.9 or abs(y / f) > half * 0.9 or np.linalg.norm(d) > 150:
        return NavFrame(frame=0, visible=False, visible_ratio=0.0, pixels=0, bbox_xyxy_norm=[0.0] * 4)
    u = 0.5 - x / f / half / 2
    return NavFrame(
        frame=0, visible=True, visible_ratio=1.0, pixels=500, bbox_xyxy_norm=[u - 0.02, 0.4, u + 0.02, 0.6]
    )


def mission(
    side: float,
    hall: float | None = 30.0,
    tower_y: float = 0.0,
    fountain_y: float = 0.0,
    span: float = 140.0,
    route: tuple[str, ...] = ("lm_3", "lm_1"),
) -> NavigationTask:
    """The route over the fountain to the tower, or over ``route``'s landmark ids (two or more)."""
    obstacles, marks = world(side, hall, tower_y, fountain_y, span)
    by_id = {m.landmark_id: m for m in marks}
    legs = [by_id[x] for x in route]
    f = Flight(NavState(x=0.0, y=0.0, z=20.0, yaw_deg=side * 20.0, camera_pitch_deg=0.0), NavConfig())
    for k, leg in enumerate(legs):
        fly_leg(f, leg, k, obstacles, marks, "whole" if k == len(legs) - 1 else None)
    segments, poses, duration = timeline(f, FPS)
    plan = NavigationPlan(
        scene_id="blocks", traj_id="blocks_nav_route_000", kind="route", goal_part="whole",
        instruction=instruction("route", "whole", legs, segments), route=list(route),
        landmarks=[], start=poses[0], segments=segments, fps=FPS, frame_count=len(poses),
        duration_sec=duration, speeds={}, check={"collision_free": True, "min_distance_m": 2.0, "samples": 1},
        seed=0, attempt=0, poses=poses, alternatives=f.alternatives,
    )  # fmt: skip
    plan.landmarks = measured_landmarks(legs, marks, np.array([[p.x, p.y, p.z] for p in poses]), NavConfig())
    visibility = {
        m.landmark_id: [seen(p, m).model_copy(update={"frame": i}) for i, p in enumerate(poses)]
        for m in marks
        if m.landmark_id in {x.landmark_id for x in plan.landmarks}
    }
    video = NavVideo(path="task_rgb.mp4", fps=FPS, frame_count=len(poses), width=160, height=120, fov_deg=FOV)
    return NavigationTask(**plan.model_dump(), video=video, visibility=visibility)


def build(kind: str, task: NavigationTask, seed: int = 0) -> list[Question]:
    """The type's candidates on the mission, with the draws of a seeded stream."""
    return list(BUILDERS[kind](Mission(task), np.random.default_rng(seed)))  # type: ignore[index]
