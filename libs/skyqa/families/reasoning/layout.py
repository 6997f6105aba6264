"""Where a released trajectory's files are, derived from its split, stem and id alone (never
from paths a stored row carries), and the stored file each is copied from."""

from __future__ import annotations

from skyqa import keys
from skyqa.contracts.rsv import TrajectoryRow

FOLDER = "reasoning_videos"
META = "card_meta.json"  # the meta as released, next to the trajectory's final task


def video_path(split: str, stem: str) -> str:
    return f"{FOLDER}/{split}/{stem}.mp4"


def meta_path(split: str, stem: str) -> str:
    return f"{FOLDER}/{split}/{stem}_meta.json"


def keyframe_path(split: str, stem: str, frame: int) -> str:
    return f"{FOLDER}/{split}/keyframes/{stem}/frame_{frame:06d}.png"


def final_task(traj_id: str) -> str:
    """The trajectory's rendered folder, relative to the release folder."""
    return f"{keys.mission_rel(traj_id)}/{keys.FINAL_TASK}"


def layout(row: TrajectoryRow) -> dict[str, str]:
    """Release file -> the stored file it copies, both relative to the release folder."""
    final = final_task(row.traj_id)
    out = {
        video_path(row.split, row.stem): f"{final}/{keys.VIDEO}",
        meta_path(row.split, row.stem): f"{final}/{META}",
    }
    out |= {keyframe_path(row.split, row.stem, f): f"{final}/{keys.key_frame(f)}" for f in row.keyframes}
    return out
