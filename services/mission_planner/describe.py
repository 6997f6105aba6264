"""A planned mission in UAV-DualCog's words: its identity, ``composed_segments.json`` (the behaviors
flown, with their parameters and waypoint ranges) and ``constraint_report.json`` (limits and checks).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from skyqa import keys
from skyqa.contracts import ValidInstance
from skyqa.contracts.missions import (
    Checks,
    CollisionCheck,
    ComposedSegments,
    ConstraintReport,
    ElementInstance,
    MissionSegment,
    MissionSummary,
    RepairReport,
    RepairStats,
    SetInstance,
)
from skyqa.kinematics import LIMITS
from skyqa.reviewed import rendered_id
from skyqa.vocab.behaviors import Library, behavior_id, behavior_label

from services.mission_planner.compose import (
    BASE_HZ,
    POSE_HZ,
    SAMPLES_PER_SEGMENT,
    frame_sources,
    path_length,
)
from services.mission_planner.kinematics import Flown
from services.mission_planner.planner import Planned, self_difficulty
from services.mission_planner.shapes import Target

F64 = NDArray[np.float64]


def mission_id(scene_id: str, instance_id: str, kind: str, index: int) -> str:
    return f"batch_{scene_id}_{instance_id}_{kind}_{index:04d}"


def target_of(vi: ValidInstance, safety_m: float) -> Target:
    lo, hi = np.array(vi.bbox_3d.min), np.array(vi.bbox_3d.max)
    c, s = (lo + hi) / 2, hi - lo
    return Target((float(c[0]), float(c[1]), float(c[2])), (float(s[0]), float(s[1]), float(s[2])), safety_m)


def _bbox7(t: Target) -> list[float]:
    return [0.0, 0.0, 0.0, *(round(v, 4) for v in t.size), 0.0]


def _r(v: F64) -> list[float]:
    return [round(float(x), 4) for x in v]


def describe(
    lib: Library,
    planned: Planned,
    flown: Flown,
    vi: ValidInstance,
    scene_id: str,
    traj_id: str,
    kind: str,
) -> tuple[ComposedSegments, ConstraintReport]:
    """The mission as ``flown`` (timed within the kinematic limits): segment waypoint ranges,
    duration and the kinematic check are the flight's."""
    t = target_of(vi, lib.safety_distance_m)
    traj = planned.trajectory
    wp = flown.waypoints
    landmark = vi.instance_id
    desc = vi.landmark_description or vi.class_name
    category = vi.landmark_category or vi.class_name
    elements, segments = [], []
    for i, (el, seg, (first, last), adapt, lift) in enumerate(
        zip(
            planned.elements,
            traj.segments,
            flown.segments,
            planned.adaptations,
            planned.segment_lifts,
            strict=True,
        )
    ):
        spec = lib.elements[seg.element]
        ei_id = f"ei_{i:02d}_{seg.element}"
        params = {**seg.params, **{k: round(v, 4) for k, v in seg.effective.items()}}
        elements.append(
            ElementInstance(
                element_instance_id=ei_id,
                element_class=seg.element,
                element_display_name=behavior_label(lib, seg.element, seg.camera_mode),
                description=spec.description,
                family=spec.family,
                camera_mode=seg.camera_mode,
                target_instance_id=landmark,
                params=params,
                class_instance_index=sum(1 for e in planned.elements[:i] if e.step.element == seg.element),
                seed=planned.seed,
                obstacle_adaptation=adapt,
                target_center_3d=list(t.center),
                target_bbox_3d=_bbox7(t),
                target_category=category,
                target_description=desc,
            )
        )
        label = behavior_label(lib, seg.element, seg.camera_mode)
        segments.append(
            MissionSegment(
                segment_id=f"seg_{i:02d}",
                element_instance_id=ei_id,
                element_class=seg.element,
                element_display_name=label,
                target_instance_id=landmark,
                params=params,
                start=_r(wp[first]),
                end=_r(wp[last]),
                num_points=last - first + 1,
                shared_start_with_previous=i > 0,
                waypoint_start_idx=first,
                waypoint_end_idx=last,
                projected_start=el.bridged,
                project_distance_m=seg.project_distance_m,
                repair=RepairStats(
                    repair_applied=lift.lifted_points > 0,
                    lifted_points=lift.lifted_points,
                    max_lift_m=lift.max_lift_m,
                ),
                behavior_id=behavior_id(seg.element, seg.camera_mode),
                event_id=f"evt_{i:02d}",
                event_label=label,
                mode_key=seg.camera_mode,
                mode_name="look forward" if seg.camera_mode == "look_forward" else "track landmark",
                target_class_name=vi.class_name,
                target_description=desc,
            )
        )
    n_frames = len(frame_sources(len(wp)))
    score, band = self_difficulty(n_frames / BASE_HZ, 1, len(segments))
    summary = MissionSummary(
        segment_count=len(segments),
        raw_points=len(traj.raw),
        waypoints=len(wp),
        fps=float(BASE_HZ),
        source_pose_fps=float(POSE_HZ),
        base_pose_fps=float(BASE_HZ),
        samples_per_segment=SAMPLES_PER_SEGMENT,
        duration_sec=round(flown.duration_s, 3),
        path_length_m=round(path_length(wp), 3),
    )
    identity = {
        "scene_id": scene_id,
        "traj_id": traj_id,
        "task_type": lib.set_display(planned.set_name),
        "task_subtype": planned.set_name,
        "mission_kind": kind,
        "task_difficulty": band,
        "task_difficulty_score": score,
        "instance_id": landmark,
        "rendered_instance_id": rendered_id(vi),
    }
    composed = ComposedSegments(
        **identity,
        set_class=planned.set_name,
        set_instance=SetInstance(
            set_id=planned.set_name,
            set_name=lib.set_display(planned.set_name),
            landmark_order=[landmark],
            max_total_elements=len(segments),
            element_template=[s.element_class for s in segments],
        ),
        element_instances=elements,
        element_plan=[e.element_instance_id for e in elements],
        mode_sequence=[s.mode_key for s in segments],
        event_sequence=[s.event_id for s in segments],
        behavior_sequence=[s.behavior_id for s in segments],
        seed=planned.seed,
        attempt=planned.attempt,
        summary=summary,
        segments=segments,
    )
    chk = planned.check
    report = ConstraintReport(
        **identity,
        landmark_class_id=vi.class_id,
        landmark_class_name=vi.class_name,
        landmark_subcategory=vi.landmark_subcategory,
        landmark_description=desc,
        landmark_center_3d=list(t.center),
        landmark_bbox_3d=_bbox7(t),
        event_count=len(segments),
        flight_description=flight_description(segments, flown.duration_s, desc),
        limits={**LIMITS.as_dict(), "safety_distance": lib.safety_distance_m},
        checks=Checks(
            kinematics=flown.check,
            collision=CollisionCheck(
                collision_free=chk.collision_free,
                min_distance=chk.min_distance_m,
                violation_count=chk.violation_count,
                violations=[
                    {"index": v.index, "kind": v.kind, "distance_m": v.distance_m} for v in chk.violations
                ],
            ),
            repair=RepairReport(
                repaired_segments=sum(1 for s in segments if s.repair.repair_applied),
                lifted_points=planned.repair.lifted_points,
                lifted_fraction=planned.repair.lifted_fraction,
                max_lift_m=planned.repair.max_lift_m,
            ),
        ),
        acceptance={
            "attempts": planned.attempt + 1.0,
            "collision_free": float(chk.collision_free),
            "within_kinematic_limits": float(bool(flown.check.within_limits)),
        },
        accepted=planned.accepted and bool(flown.check.within_limits),
        files={
            "waypoints": keys.WAYPOINTS,
            "forwards": keys.FORWARDS,
            "composed_path_raw": keys.RAW_PATH,
            "poses": keys.POSES,
            "composed_segments": keys.COMPOSED_SEGMENTS,
            "final_task": f"{keys.FINAL_TASK}/",
        },
        summary=summary,
    )
    return composed, report


def flight_description(segments: list[MissionSegment], duration_s: float, landmark: str) -> str:
    steps = ", then ".join(
        f"{s.event_label.lower()} for {(s.waypoint_end_idx - s.waypoint_start_idx) / POSE_HZ:.1f} s"
        for s in segments
    )
    return f"Around {landmark}: {steps} ({duration_s:.1f} s in all)."
