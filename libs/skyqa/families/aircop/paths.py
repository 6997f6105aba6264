"""Where a group's views ship, as the planner writes them and the QC reads them back."""

from __future__ import annotations

from collections.abc import Sequence


def view_path(group_id: str, uav: str) -> str:
    return f"image_tasks/groups/{group_id}/{uav}.jpg"


def marked_path(group_id: str, uav: str, box: Sequence[float]) -> str:
    """The view with a region drawn on it: one file per region, whichever row names it."""
    corners = "_".join(f"{round(float(v) * 100):03d}" for v in box)
    return f"image_tasks/groups/{group_id}/{uav}_box_{corners}.jpg"
