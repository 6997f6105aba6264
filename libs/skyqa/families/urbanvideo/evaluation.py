"""How a navigation row is asked and scored: a plain multiple-choice row (see
:mod:`skyqa.families.mcq`) about a video; the text-only prior learns from other missions' rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyqa.contracts.urbanvideo import NavRow
from skyqa.families import mcq
from skyqa.families.base import MediaRef

METRICS = mcq.METRICS
SYSTEM = (
    "You are an aerial agent (a drone). The video is your own first-person view, from the start "
    "of your flight up to now. Answer the multiple-choice question about it. Reply with one JSON "
    'object and nothing else: {"answer_option_id": "<letter>"}'
)


def media(row: NavRow) -> list[MediaRef]:
    return [MediaRef("video", row.video_path, row.fps)]


def prior(row: NavRow, rows: Sequence[NavRow]) -> dict[str, Any]:
    return mcq.prior(row, rows, lambda r: r.mission_id)
