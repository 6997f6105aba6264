"""Reasoning-Structured-Videos trajectories at the card's size: one 40-action, 360-frame
1280x720 trajectory rendered end to end (capsule sweep, frames, H.264 at crf 28, lossless key
frames, execution record), as trajectories per hour on this machine and as a share of the
same-run ray-cast ceiling."""

from __future__ import annotations

import tempfile
import time
from typing import Any

import numpy as np
from skyqa.actions import ActionSpace, Capsule, Kinematics, build
from skyqa.actions.roots import grid_roots, path_clear
from skyqa.blob import LocalBlobStore
from skyqa.sim import BuiltinSimulator

from services.mission_planner.trajectories import Video, plans_for, video_job
from services.renderer.trajectory import render_trajectory


def trajectory_video(
    sim: BuiltinSimulator, ceiling: float, width: int = 1280, height: int = 720
) -> dict[str, Any]:
    kin = Kinematics(ActionSpace(), Capsule())
    built = build("inverse_hard", kin, np.random.default_rng(0))
    roots = grid_roots(kin, sim, sim.extent(), lambda xy: np.zeros(len(xy)), spacing_m=8.0)
    root = next(r for r in roots[:: max(1, len(roots) // 200)] if path_clear(kin, built.actions, r, sim, 0.3))
    (plan,) = plans_for(
        built, "inverse_hard", "bench_inverse_hard", 0, 0, root, kin, Video(width, height, 79.0, 16.0, 28)
    )
    job = video_job("bench", sim.scene_id, "builtin", plan)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        done = render_trajectory(job, sim, LocalBlobStore(tmp))
        seconds = time.perf_counter() - t
    frames = kin.space.frames
    return {
        "width": width,
        "height": height,
        "frames": frames,
        "seconds": round(seconds, 2),
        "frames_per_s": frames / seconds,
        "trajectories_per_hour": 3600.0 / seconds,
        "ratio_of_ceiling_per_pixel": frames * width * height / seconds / ceiling,
        "video_mb": round(done.video.size / 1e6, 2),
    }
