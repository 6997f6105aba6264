"""UltraVR-style survey views at 8192x6144: a nadir and an oblique view of demo_city rendered as
the renderer's survey path renders them (row bands, every instance measured, JPEG stored), as
views per minute and as a share of the same-run ray-cast ceiling, and the peak resident memory
that rendering adds, against whole-frame renders of the same views in a process of their own.

Each measurement runs in a fresh process (``python -m bench.surveys child MODE W H``): the peak
(VmHWM) after the scene is loaded is the baseline, the peak after rendering minus it is what
the rendering needed.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCENE = "demo_city"
GSD_M = 0.04


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(mode: str, width: int, height: int) -> dict[str, Any]:
    from skyqa.blob import LocalBlobStore
    from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene
    from skyqa.v1 import common_pb2, render_pb2

    from services.mission_planner.surveys import SMALL, altitude_for
    from services.renderer.survey import render_survey

    scene = load_scene(SCENE)
    sim = BuiltinSimulator(scene)
    x0, x1, y0, y1 = sim.extent()
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    h = altitude_for(GSD_M, width, 90.0)
    poses = [
        Pose(cx, cy, h, 90.0, -90.0, 0.0),
        Pose(cx - h / math.tan(math.radians(45)), cy, h, 0.0, -45.0, 0.0),
    ]
    baseline = _peak_mb()
    t = time.perf_counter()
    if mode == "band":
        job = render_pb2.VideoJob(
            run_id="bench", job_id="survey", requester="mission", scene_id=SCENE, width=width, height=height,
            fov_deg=90.0, fps=1.0, jpeg_quality=85, output_prefix="runs/bench/survey", survey=True,
        )  # fmt: skip
        for p in poses:
            job.poses.append(common_pb2.Pose(x=p.x, y=p.y, z=p.z, yaw_deg=p.yaw_deg, pitch_deg=p.pitch_deg))
        for o in scene.objects:
            if o.semantic.name in SMALL:
                job.targets.add(instance_id=o.instance_id, center=list(o.center), size=list(o.size))
        with tempfile.TemporaryDirectory() as tmp:
            render_survey(job, sim, LocalBlobStore(tmp))
    else:
        for p in poses:
            sim.render(p, CameraSpec(width, height, 90.0))
    seconds = time.perf_counter() - t
    return {"views": len(poses), "seconds": seconds, "added_peak_mb": _peak_mb() - baseline}


def _run(mode: str, width: int, height: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.surveys", "child", mode, str(width), str(height)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def survey_views(ceiling: float, width: int = 8192, height: int = 6144) -> dict[str, Any]:
    band, whole = _run("band", width, height), _run("whole", width, height)
    pixels = band["views"] * width * height
    return {
        "width": width,
        "height": height,
        "views": band["views"],
        "seconds": round(band["seconds"], 2),
        "views_per_minute": 60.0 * band["views"] / band["seconds"],
        "megapixels_per_s": pixels / band["seconds"] / 1e6,
        "ratio_of_ceiling_per_pixel": pixels / band["seconds"] / ceiling,
        "peak_mb_banded": round(band["added_peak_mb"], 1),
        "peak_mb_whole_frame": round(whole["added_peak_mb"], 1),
        "whole_frame_seconds": round(whole["seconds"], 2),
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:  # alone: with the ceiling measured now, as ``make bench`` does at its start
        from skyqa.sim import BuiltinSimulator, load_scene

        from bench.run import raycast_ceiling

        ceiling = raycast_ceiling(BuiltinSimulator(load_scene(SCENE)))["rays_per_s"]
        print(json.dumps({"ceiling_rays_per_s": ceiling, **survey_views(ceiling)}, indent=1))
