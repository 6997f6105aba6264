"""Reasoning-Structured-Videos-style action trajectories: roots on a grid, constructions that are
exact instances of Inverse, Loop and Equivalence, one action-program video job each.

Roots are every cell of a 2 m grid with 8 headings whose capsule stands clear of the scene. A
construction is drawn from its own seeded stream and placed at the first root (in a seeded
order) where its whole path (both halves of an equivalence pair) stays clear.

What "clear" is checked against decides whether a construction survives rendering. On the
builtin backend the planner opens the scene's own geometry, the meshes the renderer collides
the capsule with, and asks the renderer's own questions (:func:`skyqa.actions.roots.runs_clear`:
the root check and the swept moves of :func:`skyqa.actions.execute`), so a planned relation is
never routed to ``random_walk/`` for a collision. The AirSim backend moves no capsule (the
renderer refuses action programs there), and its geometry is not readable here: roots and
paths keep ``MAP_MARGIN_M`` beyond the capsule from the fused cloud, as before, which has
holes. Random walks are drawn without checking their path, as the kind of path that split holds.
Every plan's frames are measured against the kinematic limits (``skyqa.kinematics``; each
action eases from rest to rest over enough frames) and a trajectory that breaks one is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from skyqa import keys, scan as scan_rules
from skyqa.actions import Built, Clearance, Kinematics, NoConstruction, Root, build
from skyqa.actions.motion import camera_pose, execute
from skyqa.actions.roots import grid_roots, path_clear, runs_clear
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.kinematics import KinematicsCheck
from skyqa.contracts.rsv import (
    RANDOM_WALK,
    SPLITS,
    Execution,
    IdentityPair,
    TrajectoryIndexRow,
    TrajectoryPlan,
)
from skyqa.kinematics import measure
from skyqa.protojson import to_json
from skyqa.v1 import common_pb2, render_pb2, scan_pb2

from services.mission_planner.group_missions import seed_of
from services.mission_planner.safety import ObstacleMap

MAP_MARGIN_M = 0.3  # the fused cloud has holes: what a path keeps beyond the capsule from it
PLACEMENTS = 400  # roots tried per construction before it is rejected


class CloudClearance:
    """The fused cloud as a scene a capsule can collide with."""

    def __init__(self, obstacles: ObstacleMap) -> None:
        self.tree = obstacles.tree

    def clearance(self, points: NDArray[np.float64]) -> NDArray[np.float64]:
        d, _ = self.tree.query(points, k=1)
        out: NDArray[np.float64] = np.asarray(d, dtype=np.float64)
        return out


@dataclass(frozen=True)
class Geometry:
    """What roots and paths are checked against: the scene's own geometry (``exact``: the
    renderer's test, no margin) or the fused map (a margin, and paths sampled at frames)."""

    scene: Clearance
    exact: bool
    where: str  # for rejection reasons

    @property
    def margin_m(self) -> float:
        return 0.0 if self.exact else MAP_MARGIN_M

    def path_ok(self, kin: Kinematics, actions: list[str], root: Root) -> bool:
        if self.exact:
            return runs_clear(kin, actions, root, self.scene)
        return path_clear(kin, actions, root, self.scene, self.margin_m)


def scene_geometry(backend: str, scene_id: str, scenes_dir: Path | None) -> Clearance | None:
    """The geometry the renderer moves the capsule through, or None where the backend has none
    to read (AirSim: it moves no capsule body). The builtin simulator is opened without its
    shadow map: only its distance queries are used."""
    if backend != "builtin":
        return None
    # Open3D loads here, on the first run planned with trajectories, not when the service starts
    from skyqa.sim import BuiltinSimulator, load_scene

    return BuiltinSimulator(load_scene(scene_id, scenes_dir), shadows=False)


def traj_id_of(scene_id: str, split: str, k: int, role: str = "") -> str:
    return f"{scene_id}_rsv_{split}_{k:03d}" + (f"_{role[-1]}" if role else "")


@dataclass(frozen=True)
class Video:
    width: int
    height: int
    fov_deg: float
    fps: float
    crf: int


def plans_for(
    built: Built, split: str, base_id: str, number: int, seed: int, root: Root, kin: Kinematics, video: Video
) -> list[TrajectoryPlan]:
    """The plan of a construction placed at ``root``: one, or an equivalence pair's two
    (``<base_id>_A`` and ``_B``, consecutive numbers)."""
    pairs = [
        IdentityPair(first=a, second=b, partner=bool(built.partner), tolerance_m=t)
        for a, b, t in built.identities
    ]
    common = dict(
        split=split,
        construction=built.construction,
        seed=seed,
        root=(root.x, root.y, root.z, root.yaw_deg, root.pitch_deg),
        space=kin.space,
        capsule=kin.capsule,
        identities=pairs,
        anchors=built.anchors,
        witness=built.witness,
        closure_residual_m=built.residual_m,
        width=video.width,
        height=video.height,
        fov_deg=video.fov_deg,
        fps=video.fps,
        crf=video.crf,
    )
    if not built.partner:
        return [TrajectoryPlan(traj_id=base_id, number=number, actions=built.actions, **common)]
    a, b = f"{base_id}_A", f"{base_id}_B"
    return [
        TrajectoryPlan(traj_id=a, number=number, actions=built.actions, pair_id=base_id, role="path_A",
                       partner=b, partner_number=number + 1, **common),
        TrajectoryPlan(traj_id=b, number=number + 1, actions=built.partner, pair_id=base_id, role="path_B",
                       partner=a, partner_number=number, **common),
    ]  # fmt: skip


def plan_all(
    run_id: str,
    scene_id: str,
    scan: scan_pb2.ScanRequest,
    obstacles: ObstacleMap,
    store: BlobStore,
    scenes_dir: Path | None = None,
) -> tuple[list[str], dict[str, str], list[render_pb2.VideoJob]]:
    """Plan, write and make video jobs for the run's trajectories; returns the planned ids, the
    rejected ones with their reason, and the jobs."""
    rs = scan.reasoning
    if not rs.per_split and not rs.random_walks:
        return [], {}, []
    backend = scan.backend or "builtin"
    scene = scene_geometry(backend, scene_id, scenes_dir)
    geometry = (
        Geometry(CloudClearance(obstacles), exact=False, where="on the fused map")
        if scene is None
        else Geometry(scene, exact=True, where="in the scene")
    )
    plans, rejected = plan_trajectories(scene_id, scan, obstacles, geometry)
    jobs = []
    for plan in plans:
        store.put(
            keys.mission_file(run_id, plan.traj_id, keys.TRAJECTORY_PLAN), dump_json(plan), "application/json"
        )
        job = video_job(run_id, scene_id, backend, plan)
        store.put(
            keys.mission_file(run_id, plan.traj_id, keys.RENDER_REQUEST),
            to_json(job, indent=1),
            "application/json",
        )
        jobs.append(job)
    return [p.traj_id for p in plans], rejected, jobs


def plan_trajectories(
    scene_id: str, scan: scan_pb2.ScanRequest, obstacles: ObstacleMap, geometry: Geometry
) -> tuple[list[TrajectoryPlan], dict[str, str]]:
    """The run's trajectory plans, placed on roots and paths ``geometry`` keeps clear, and the
    rejected trajectories with their reason (nothing is written)."""
    rs = scan.reasoning
    space, capsule = scan_rules.action_space(scan)
    kin = Kinematics(space, capsule)
    altitude = rs.altitude_m if rs.HasField("altitude_m") else None
    lo, hi = obstacles.tree.mins, obstacles.tree.maxes
    roots = grid_roots(
        kin,
        geometry.scene,
        (lo[0], hi[0], lo[1], hi[1]),
        obstacles.ground_z,
        altitude_m=altitude,
        margin_m=geometry.margin_m,
    )
    plans: list[TrajectoryPlan] = []
    rejected: dict[str, str] = {}
    number = 0
    wanted = [(s, k) for s in SPLITS for k in range(rs.per_split)] + [
        (RANDOM_WALK, k) for k in range(rs.random_walks)
    ]
    for split, k in wanted:
        role = "path_A" if split.startswith("equivalence") else ""
        traj_id = traj_id_of(scene_id, split, k, role)
        seed = seed_of(scan.seed, traj_id)
        rng = np.random.default_rng(seed)
        try:
            built = build(split, kin, rng, k)
        except NoConstruction as exc:
            rejected[traj_id] = str(exc)
            continue
        root = _place(kin, built, roots, rng, geometry, checked=split != RANDOM_WALK)
        if root is None:
            rejected[traj_id] = f"no root of {len(roots)} keeps the whole path clear {geometry.where}"
            continue
        video = Video(rs.width, rs.height, rs.fov_deg, rs.fps, rs.crf)
        made = plans_for(built, split, traj_id_of(scene_id, split, k), number, seed, root, kin, video)
        for plan in made:
            plan.kinematics = flight_check(kin, plan.actions, root, rs.fps)
        broken = [p.kinematics for p in made if p.kinematics and not p.kinematics.within_limits]
        if broken:
            rejected[traj_id] = f"its frames break the kinematic limits {', '.join(broken[0].exceeded)}"
            continue
        plans += made
        number += len(made)
    return plans, rejected


def flight_check(kin: Kinematics, actions: list[str], root: Root, fps: float) -> KinematicsCheck:
    """The camera's frames, moved through nothing, measured against the kinematic limits."""
    frames = execute(kin, actions, root, None).frames
    cams = np.array([camera_pose(f, kin.capsule) for f in frames])
    return measure(cams[:, :3], cams[:, 3], cams[:, 4], fps)


def _place(
    kin: Kinematics,
    built: Built,
    roots: list[Root],
    rng: np.random.Generator,
    geometry: Geometry,
    checked: bool,
) -> Root | None:
    """The first root in a seeded order where every path of ``built`` (both halves of an
    equivalence pair, from the one root they share) stays clear."""
    if not roots:
        return None
    order = rng.permutation(len(roots))
    if not checked:
        return roots[int(order[0])]
    for i in order[:PLACEMENTS]:
        root = roots[int(i)]
        if all(geometry.path_ok(kin, seq, root) for seq in (built.actions, built.partner) if seq):
            return root
    return None


def video_job(run_id: str, scene_id: str, backend: str, plan: TrajectoryPlan) -> render_pb2.VideoJob:
    x, y, z, yaw, pitch = plan.root
    keep = {0, plan.space.frames - 1, *plan.anchors}
    for pair in plan.identities:
        keep |= {pair.first, pair.second}
    return render_pb2.VideoJob(
        run_id=run_id,
        job_id=plan.traj_id,
        scene_id=scene_id,
        backend=backend,
        width=plan.width,
        height=plan.height,
        fov_deg=plan.fov_deg,
        fps=plan.fps,
        bitrate=1_000_000,  # unused: the program's crf sets the quality
        jpeg_quality=90,
        output_prefix=keys.final_task(run_id, plan.traj_id),
        requester="mission",
        correlation=plan.traj_id,
        program=render_pb2.ActionProgram(
            actions=plan.actions,
            root=common_pb2.Pose(x=x, y=y, z=z, yaw_deg=yaw, pitch_deg=pitch),
            translation_m=plan.space.translation_m,
            yaw_deg=plan.space.yaw_deg,
            pitch_deg=plan.space.pitch_deg,
            max_pitch_deg=plan.space.max_pitch_deg,
            frames_per_action=plan.space.frames_per_action,
            capsule_radius_m=plan.capsule.radius_m,
            capsule_half_height_m=plan.capsule.half_height_m,
            camera_offset_m=plan.capsule.camera_offset_m,
            keep_frames=sorted(keep),
            crf=plan.crf,
        ),
    )


def is_trajectory(store: BlobStore, run_id: str, job_id: str) -> bool:
    return store.exists(keys.mission_file(run_id, job_id, keys.TRAJECTORY_PLAN))


def index_row(store: BlobStore, run_id: str, traj_id: str) -> TrajectoryIndexRow:
    plan = load_json(TrajectoryPlan, store.get(keys.mission_file(run_id, traj_id, keys.TRAJECTORY_PLAN)))
    out = keys.final_task(run_id, traj_id)
    return TrajectoryIndexRow(
        traj_id=traj_id,
        split=plan.split,
        plan=keys.mission_file(run_id, traj_id, keys.TRAJECTORY_PLAN),
        execution=f"{out}/{keys.EXECUTION}",
        video=f"{out}/{keys.VIDEO}",
    )


def check_rendered(done: render_pb2.VideoDone, store: BlobStore) -> None:
    """The renderer's record must be readable and belong to this trajectory (the QA stage
    validates what it says)."""
    record = load_json(Execution, store.get(done.execution.key), "execution record")
    if record.traj_id != done.job_id:
        raise ValueError(f"execution record of {record.traj_id} delivered for {done.job_id}")
