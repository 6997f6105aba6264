"""Object-key validation and the run layout: every store key a stage writes or reads.

Keys mirror the UAV-DualCog handoff tree under one prefix per run, so a release folder is
exactly ``runs/<run_id>/`` copied out of the bucket. Stages agree on where a file lives only
through this module; a key written in two places could drift apart in one.
"""

from __future__ import annotations

import re

from skyqa.errors import InvalidInput, InvalidKey

_SEGMENT = re.compile(r"^[A-Za-z0-9._=+-]+$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,95}$")
MAX_KEY_LENGTH = 1024


def validate_key(key: str) -> str:
    """Return ``key`` if it is a safe relative object key, else raise :class:`InvalidKey`.

    Rejects absolute keys, ``..`` and ``.`` segments, empty segments, backslashes and
    characters outside a conservative set, so a key can never escape the store root.
    """
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(f"object key must be 1..{MAX_KEY_LENGTH} characters, got {len(key)}")
    if key.startswith("/") or "\\" in key:
        raise InvalidKey(f"object key must be relative and use '/': {key!r}")
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidKey(f"object key has an empty, '.' or '..' segment: {key!r}")
        if not _SEGMENT.match(segment):
            raise InvalidKey(f"object key segment {segment!r} has characters outside [A-Za-z0-9._=+-]")
    return key


def validate_id(value: str, what: str) -> str:
    """Validate a run id, scene id or similar token used inside keys and subjects."""
    if not _ID.match(value):
        raise InvalidInput(
            f"{what} {value!r} must start with a letter or digit and contain only "
            "letters, digits, '_' and '-' (at most 96 characters)"
        )
    return value


def is_valid_id(value: str) -> bool:
    return bool(_ID.match(value))


def run_prefix(run_id: str) -> str:
    return f"runs/{validate_id(run_id, 'run id')}"


def release_path(key: str) -> str:
    """A run's store key as handoff files write it: relative to the release folder (the run
    prefix), so the file still points at the right file once the folder is copied out."""
    parts = validate_key(key).split("/", 2)
    if len(parts) < 3 or parts[0] != "runs":
        raise InvalidKey(f"{key!r} is not a key inside a run")
    return parts[2]


def stored(run_id: str, path: str) -> str:
    """The store key of a path a handoff file names. Runs written before paths became release
    relative hold full keys, which are returned as they are."""
    prefix = f"{run_prefix(run_id)}/"
    return validate_key(path if path.startswith(prefix) else prefix + path)


def scan_request(run_id: str) -> str:
    """The run's full ScanRequest (protobuf JSON), written by capture when the scan is accepted."""
    return f"{run_prefix(run_id)}/scan_request.json"


def scene_root(run_id: str, scene_id: str) -> str:
    return f"{run_prefix(run_id)}/scene_data/{validate_id(scene_id, 'scene id')}"


def pcd_map(run_id: str, scene_id: str) -> str:
    return f"{scene_root(run_id, scene_id)}/pcd_map"


def chunk_prefix(run_id: str, scene_id: str, backend: str) -> str:
    return f"{pcd_map(run_id, scene_id)}/raw/{validate_id(backend, 'backend')}"


def fused_cloud_npy(run_id: str, scene_id: str) -> str:
    """Stage 1's compact semantic cloud (structured npy), which later stages read."""
    return f"{pcd_map(run_id, scene_id)}/{scene_id}.semantic_lidar_compact.npy"


def scene_file(run_id: str, scene_id: str, suffix: str) -> str:
    """``pcd_map/<scene>.<suffix>``: the per-scene Stage 1 files named after the scene."""
    return f"{pcd_map(run_id, scene_id)}/{scene_id}.{suffix}"


# -- Stage 1: capture and fusion -----------------------------------------------------------

CHUNK_FILES = ("rgb.jpg", "seg.png", "depth.png", "lidarseg.npy")


def frames_manifest(run_id: str, scene_id: str) -> str:
    return f"{pcd_map(run_id, scene_id)}/frames_manifest.jsonl"


def capture_manifests(run_id: str, scene_id: str) -> str:
    """The prefix of the per-job manifests that capture merges into the frames manifest."""
    return f"{pcd_map(run_id, scene_id)}/manifests/"


def capture_job_manifest(run_id: str, scene_id: str, job_index: int) -> str:
    return f"{capture_manifests(run_id, scene_id)}manifest_job_{job_index:05d}.jsonl"


def chunk_files(run_id: str, scene_id: str, backend: str, frame_idx: int) -> dict[str, str]:
    prefix = chunk_prefix(run_id, scene_id, backend)
    return {name: f"{prefix}/chunk_{frame_idx:06d}.{name}" for name in CHUNK_FILES}


def classes(run_id: str, scene_id: str) -> str:
    return scene_file(run_id, scene_id, "classes.json")


def fusion_outputs(run_id: str, scene_id: str) -> dict[str, str]:
    return {
        "cloud_pcd": scene_file(run_id, scene_id, "semantic_lidar.pcd"),
        "cloud_npy": fused_cloud_npy(run_id, scene_id),
        "instances": scene_file(run_id, scene_id, "instances.json"),
        "meta": scene_file(run_id, scene_id, "meta.json"),
        "preview_topdown": scene_file(run_id, scene_id, "preview_topdown.png"),
        "preview_oblique": scene_file(run_id, scene_id, "preview_oblique.png"),
    }


# -- Stage 2: landmarks and their review ---------------------------------------------------


def landmarks_raw(run_id: str, scene_id: str) -> str:
    return f"{scene_root(run_id, scene_id)}/landmarks_raw"


def landmark_plan(run_id: str, scene_id: str) -> str:
    return f"{landmarks_raw(run_id, scene_id)}/parts/plan.json"


def landmark_part(run_id: str, scene_id: str, candidate: str) -> str:
    return f"{landmarks_raw(run_id, scene_id)}/parts/{candidate}.json"


def landmark_views(run_id: str, scene_id: str, candidate: str) -> str:
    return f"{landmarks_raw(run_id, scene_id)}/rgb_views/{candidate}"


def landmark_instances(run_id: str, scene_id: str) -> str:
    return f"{landmarks_raw(run_id, scene_id)}/{scene_id}.instances.json"


def review_root(run_id: str, scene_id: str) -> str:
    return f"{scene_root(run_id, scene_id)}/landmarks_review"


def review_state(run_id: str, scene_id: str) -> str:
    return f"{review_root(run_id, scene_id)}/{scene_id}.web_review_state.json"


def valid_instances(run_id: str, scene_id: str) -> str:
    return f"{review_root(run_id, scene_id)}/{scene_id}.valid_instances.json"


def review_log(run_id: str, scene_id: str) -> str:
    return f"{review_root(run_id, scene_id)}/{scene_id}.review_log.jsonl"


def review_log_rows(run_id: str, scene_id: str) -> str:
    """The prefix of the review log's rows, one object per row so no append races another."""
    return f"{review_root(run_id, scene_id)}/log/"


def review_log_row(run_id: str, scene_id: str, seq: int) -> str:
    return f"{review_log_rows(run_id, scene_id)}{seq:06d}.json"


# -- still views, rendered for any stage under the prefix its render job names -----------------

STILL_FILES = {"rgb": "rgb.jpg", "segmentation": "seg.png", "depth": "depth.png"}


def still_view(prefix: str, view_id: str, modality: str) -> str:
    return f"{prefix}/{view_id}.{STILL_FILES[modality]}"


# -- Stage 3: missions -----------------------------------------------------------------------


def video_tasks(run_id: str) -> str:
    return f"{run_prefix(run_id)}/video_tasks"


def mission_plan(run_id: str) -> str:
    return f"{video_tasks(run_id)}/mission_plan.json"


def missions_index(run_id: str) -> str:
    return f"{video_tasks(run_id)}/missions_index.json"


def mission_root(run_id: str, traj_id: str) -> str:
    return f"{run_prefix(run_id)}/{mission_rel(traj_id)}"


def mission_rel(traj_id: str) -> str:
    """A mission's folder relative to the release folder."""
    return f"video_tasks/missions/{validate_id(traj_id, 'mission id')}"


# the files of one mission folder, next to its final task
WAYPOINTS = "waypoints.npy"
FORWARDS = "forwards.npy"
RAW_PATH = "composed_path_raw.npy"
POSES = "poses.csv"
COMPOSED_SEGMENTS = "composed_segments.json"
CONSTRAINT_REPORT = "constraint_report.json"
RENDER_REQUEST = "render_request.json"
NAVIGATION_PLAN = "navigation_plan.json"  # a navigation mission's plan; its final task below
GROUP_PLAN = "group_plan.json"  # a UAV group's plan (the missions folder holds groups too)
TRAJECTORY_PLAN = "trajectory_plan.json"  # an action trajectory's plan (and trajectories)
SURVEY_PLAN = "survey_plan.json"  # an ultra-resolution survey's plan
FINAL_TASK = "final_task"


def mission_file(run_id: str, traj_id: str, name: str) -> str:
    return f"{mission_root(run_id, traj_id)}/{name}"


def final_task(run_id: str, traj_id: str) -> str:
    """The renderer's output prefix for a mission and the folder of its final bundle."""
    return mission_file(run_id, traj_id, FINAL_TASK)


# the final task bundle; the renderer writes the video, the visibility rows and the frames
TASK_DATA = "task_data.json"
NAVIGATION_TASK = "navigation_task.json"
GROUP_TASK = "group_task.json"
SURVEY_TASK = "survey_task.json"
SURVEY = "survey.json"  # what the renderer measured in a survey's views
FINAL_FRAMES_MANIFEST = "frames_manifest.json"
FRAME_INDEX_MAP = "frame_index_map.json"
VIDEO = "task_rgb.mp4"
FRAME_VISIBILITY = "frame_visibility.jsonl"
EXECUTION = "execution.json"  # what an action program's body did, step by step


def key_frame(index: int) -> str:
    """A frame an action program keeps losslessly, relative to its job's output prefix."""
    return f"keyframes/frame_{index:06d}.png"


def video_frame(kind: str, index: int) -> str:
    """A frame the video renderer writes, relative to its job's output prefix: ``frames/``
    (JPEG), ``seg/`` (segmentation PNG) or ``archive/`` (full-size JPEG)."""
    ext = "png" if kind == "seg" else "jpg"
    return f"{kind}/frame_{index:06d}.{ext}"


# -- Stage 3-4: QA rows, their assets and the release ---------------------------------------


def image_tasks(run_id: str) -> str:
    return f"{run_prefix(run_id)}/image_tasks"


def qa_plan(run_id: str) -> str:
    return f"{image_tasks(run_id)}/qa_plan.json"


def blind_filter_report(run_id: str) -> str:
    """Like every evaluation output, under ``eval/``: written after the release, not part of it."""
    return f"{run_prefix(run_id)}/eval/blind_filter.json"


def blind_filtered_manifest(run_id: str, scene_id: str) -> str:
    """The image manifest less the rows ``skyqa blind-filter --apply`` flagged."""
    return f"{run_prefix(run_id)}/eval/{scene_id}.image_qa.blind_filtered.jsonl"


# relative to the release folder: rows name their images this way
def reference_overlay(landmark_id: str, view_id: str) -> str:
    return f"image_tasks/assets/reference_bbox/{landmark_id}/{view_id}_ref.jpg"


def env_observations(landmark_id: str) -> str:
    return f"image_tasks/assets/env_observations/{landmark_id}"


def env_first_looks(landmark_id: str) -> str:
    """Where a landmark's environment observations are first rendered at a working size: files
    of their own, which a late first-look job can never write over a shipped one, outside the
    folder the released image rows' files are in."""
    return f"image_tasks/first_looks/{landmark_id}"


def shipped_observations(run_id: str) -> str:
    return f"{image_tasks(run_id)}/shipped_observations.json"


def release_common(run_id: str, scene_id: str) -> dict[str, str]:
    """The release files every run has whatever its task families (each family names its own
    manifests and exports: ``skyqa.families.release_files`` gives them all)."""
    root = run_prefix(run_id)
    return {
        "render_requests": f"{root}/image_tasks/render_requests/{scene_id}.render_requests.json",
        "qc_report": f"{root}/qc_report.json",
        "qc_rows": f"{root}/qc_rows.jsonl",
        "dataset_card": f"{root}/README.md",
        "croissant": f"{root}/croissant.json",
    }


# -- evaluation ------------------------------------------------------------------------------


def eval_outputs(run_id: str, scene_id: str) -> dict[str, str]:
    base = f"{run_prefix(run_id)}/eval"
    return {
        "eval_items": f"{base}/items.jsonl",
        "eval_image_metrics": f"{base}/stage4_metrics_{scene_id}_difficulty.csv",
        "eval_video_metrics": f"{base}/stage3_metrics_{scene_id}_difficulty.csv",
        "leaderboard": f"{base}/leaderboard.json",
        "eval_report": f"{base}/report.html",
    }


def world_outputs(run_id: str) -> dict[str, str]:
    """The world-model evaluation of a release's action trajectories."""
    base = f"{run_prefix(run_id)}/eval"
    return {
        "world_items": f"{base}/world_items.jsonl",
        "world_leaderboard": f"{base}/world_leaderboard.json",
    }
