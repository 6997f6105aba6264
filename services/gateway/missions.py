"""The workbench's mission player: a mission's video with its behavior and target-visibility
intervals, the flown path drawn over the scene's top-down preview, per-frame target boxes and
the constraint report, all read from the mission's stored files (``task_data.json`` first)."""

from __future__ import annotations

import csv
import io
import math
from typing import TYPE_CHECKING, Any

from skyqa import keys
from skyqa.contracts.fusion import FusionMeta
from skyqa.contracts.missions import MissionIndex, TaskData
from skyqa.errors import BlobNotFound, InvalidInput

from services.gateway.rows import NotFound, json_doc
from services.gateway.stored import ParsedCache, contract

if TYPE_CHECKING:
    import numpy as np

# numpy and the preview geometry load with the first mission shown, not when the gateway starts
MAX_PATH_POINTS = 2000
MAX_FRAMES = 1_000_000  # a 27-hour video at 10 FPS; a stored count above it is not believed


def _index(cache: ParsedCache, run_id: str) -> MissionIndex:
    try:
        index: MissionIndex = cache.get(
            keys.missions_index(run_id), contract(MissionIndex, "missions_index.json")
        )
    except BlobNotFound:
        raise NotFound(f"run {run_id!r} has no missions yet") from None
    return index


def mission_list(cache: ParsedCache, run_id: str) -> list[dict[str, Any]]:
    """Flight missions (with behavior timelines) then navigation flights (video and path)."""
    index = _index(cache, run_id)
    out = [
        {
            "traj_id": m.traj_id,
            "kind": m.mission_kind,
            "set_name": m.set_name,
            "landmark": m.instance_id,
            "duration_sec": m.duration_sec,
            "frame_count": m.frame_count,
        }
        for m in index.missions
    ]
    out += [
        {
            "traj_id": n.traj_id,
            "kind": f"navigation ({n.kind})",
            "set_name": " → ".join(n.route),
            "landmark": n.route[-1] if n.route else "",
            "duration_sec": n.duration_sec,
            "frame_count": n.frame_count,
        }
        for n in index.navigation
    ]
    return out


def _poses(data: bytes) -> np.ndarray:
    """``poses.csv`` as rows of (t, x, y, z)."""
    import numpy as np

    try:
        rows = list(csv.DictReader(io.StringIO(data.decode())))
        out = np.array([[float(r["t"]), float(r["x"]), float(r["y"]), float(r["z"])] for r in rows])
    except (UnicodeDecodeError, KeyError, ValueError, TypeError) as exc:
        raise InvalidInput(f"poses.csv is not a pose table (frame,t,x,y,z,...): {exc}") from None
    if out.ndim != 2 or len(out) == 0 or not np.isfinite(out).all():
        raise InvalidInput("poses.csv has no finite poses")
    return out


def flown_path(
    cache: ParsedCache, run_id: str, scene_id: str, traj_id: str, fps: float, frames: int
) -> dict[str, Any]:
    """The drone's position at every video frame, in the top-down preview's pixels (0..1)."""
    import numpy as np
    from skyqa.geometry.preview import topdown_pixels, topdown_size

    meta: FusionMeta = cache.get(
        keys.fusion_outputs(run_id, scene_id)["meta"], contract(FusionMeta, "meta.json")
    )
    lo, hi = meta.bounds_min, meta.bounds_max
    if len(lo) < 2 or len(hi) < 2 or not all(math.isfinite(v) and abs(v) < 1e7 for v in lo[:2] + hi[:2]):
        raise InvalidInput("meta.json's bounds_min and bounds_max are not two finite x, y bounds")
    if not (0 < frames <= MAX_FRAMES and 0 < fps <= 1000):
        raise InvalidInput(
            f"the mission's video says {frames} frames at {fps} FPS, which this page does not draw"
        )
    poses = cache.get(keys.mission_file(run_id, traj_id, keys.POSES), _poses)
    times = np.arange(max(1, frames)) / max(fps, 1e-6)
    at = np.clip(np.searchsorted(poses[:, 0], times), 0, len(poses) - 1)
    w, h = topdown_size(lo, hi)
    px = topdown_pixels(poses[at, 1:3], lo, hi)
    step = max(1, len(px) // MAX_PATH_POINTS)
    return {
        "preview": keys.release_path(keys.fusion_outputs(run_id, scene_id)["preview_topdown"]),
        "frame_step": step,  # point i is video frame i * frame_step
        # in the preview's width and height (0..1; outside: beyond the scanned area)
        "points": [[round(float(x) / w, 5), round(float(y) / h, 5)] for x, y in px[::step]],
    }


def _intervals(spans: list[Any]) -> list[list[float]]:
    return [[s.start_sec, s.end_sec] for s in spans]


def mission_detail(cache: ParsedCache, run_id: str, traj_id: str) -> dict[str, Any]:
    keys.validate_id(traj_id, "mission id")
    index = _index(cache, run_id)
    scene_id = keys.validate_id(index.scene_id, "scene id")
    folder = keys.mission_rel(traj_id)
    flight = next((m for m in index.missions if m.traj_id == traj_id), None)
    nav = next((n for n in index.navigation if n.traj_id == traj_id), None)
    if flight is None and nav is None:
        raise NotFound(f"no mission {traj_id!r} in run {run_id!r}")
    out: dict[str, Any] = {
        "traj_id": traj_id,
        "behaviors": [],
        "visibility": [],
        "boxes": {},
        "constraints": None,
    }
    if flight is not None:
        task: TaskData = cache.get(
            keys.stored(run_id, flight.task_data), contract(TaskData, "task_data.json")
        )
        video = task.video
        fps, frames = video.fps, video.frame_count
        self_track = task.task_tracks.self_state_awareness
        out["behaviors"] = [
            {
                "label": b.event_label,
                "behavior_id": b.behavior_id,
                "target": b.target_instance_id,
                "span": span,
            }
            for b in self_track.behavior_intervals_sec
            for span in _intervals(b.intervals_sec)
        ]
        targets = task.target_presence_targets or {}
        out["visibility"] = [
            {"target": tid, "description": t.target_description, "spans": _intervals(t.intervals_sec)}
            for tid, t in sorted(targets.items())
        ]
        out["boxes"] = {
            tid: {str(b.frame): b.bbox_xyxy_norm for b in t.frame_bboxes_xyxy_norm}
            for tid, t in sorted(targets.items())
        }
        try:
            out["constraints"] = cache.get(
                keys.mission_file(run_id, traj_id, keys.CONSTRAINT_REPORT), json_doc
            )
        except BlobNotFound:
            out["constraints"] = None
        out["video"] = f"{folder}/{keys.FINAL_TASK}/{video.path}"
        out["task_data"] = keys.release_path(keys.stored(run_id, flight.task_data))
        out["description"] = out["constraints"].get("flight_description", "") if out["constraints"] else ""
    else:
        assert nav is not None
        fps, frames = (nav.frame_count / nav.duration_sec if nav.duration_sec else 10.0), nav.frame_count
        out["video"] = keys.release_path(keys.stored(run_id, nav.video))
        out["description"] = f"navigation ({nav.kind}) along {' → '.join(nav.route)}"
    out |= {"fps": fps, "frame_count": frames, "duration_sec": round(frames / fps, 3) if fps else 0.0}
    out["path"] = flown_path(cache, run_id, scene_id, traj_id, fps, frames)
    return out
