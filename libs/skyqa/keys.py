"""Object-key validation and the run layout.

Keys mirror the UAV-DualCog handoff tree under one prefix per run, so a release folder is
exactly ``runs/<run_id>/`` copied out of the bucket.
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


def video_tasks(run_id: str) -> str:
    return f"{run_prefix(run_id)}/video_tasks"


def mission_root(run_id: str, traj_id: str) -> str:
    return f"{video_tasks(run_id)}/missions/{validate_id(traj_id, 'mission id')}"
