"""How a row's media reach a model: still size, re-encoding quality and video frame sampling.

Each task family declares the policy its source benchmark evaluates with
(``TaskFamily.media_policy``); an endpoint may state its own limits (``ModelEndpoint``:
``max_pixels``, ``max_frames``, ``max_request_bytes``) and sampling (``video_frames`` or
``video_sample_fps``). What a model is sent is the family's policy with the endpoint's sampling
and clipped by its limits (:func:`effective`); the evaluator records that policy per model and
family in every evaluation's leaderboard (``media_policy``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from skyqa.errors import InvalidInput

MAX_FRAMES = 256  # most frames any policy sends of one video
JPEG_QUALITY = 80  # UAV-DualCog's export and upload quality


@dataclass(frozen=True)
class Frames:
    """A video as frames: ``count`` spread uniformly over it with both ends, or ``fps`` frames
    per second of video (every frame at the video's own rate or more); at most ``cap``."""

    count: int = 0
    fps: float = 0.0
    cap: int = MAX_FRAMES

    def __post_init__(self) -> None:
        if (self.count > 0) == (self.fps > 0) or self.count < 0 or self.fps < 0:
            raise InvalidInput(f"frame sampling needs exactly one of a count and a rate, got {self}")
        if not 1 <= self.cap <= MAX_FRAMES:
            raise InvalidInput(f"a frame cap is 1..{MAX_FRAMES}, got {self.cap}")

    def indices(self, total: int, video_fps: float) -> list[int]:
        """The frame indices sent of a ``total``-frame video at ``video_fps``: round(i (N-1) /
        (n-1)) for i < n, where n is the count or the rate's frames over the video's length."""
        if video_fps <= 0:
            raise InvalidInput(f"a video needs a positive frame rate, got {video_fps}")
        if total <= 0:
            return []
        n = self.count or round((total - 1) / video_fps * self.fps) + 1
        n = max(1, min(n, self.cap, total))
        return sorted({round(i * (total - 1) / max(1, n - 1)) for i in range(n)})


@dataclass(frozen=True)
class MediaPolicy:
    """``max_pixels``: the largest width x height of any image sent (a still, a quadrant, a
    video frame), larger ones are scaled down keeping their aspect; 0: as stored, so a stored
    still goes byte for byte. ``frames``: how a video is sampled; None for a family whose rows
    show no video. ``max_request_bytes``: the most bytes of media one request carries; 0: no
    limit besides the transport's. ``source``: the source benchmark's setting this follows."""

    max_pixels: int = 0
    jpeg_quality: int = JPEG_QUALITY
    frames: Frames | None = None
    max_request_bytes: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if self.max_pixels < 0 or self.max_request_bytes < 0:
            raise InvalidInput(f"media limits are 0 (none) or positive, got {self}")
        if not 1 <= self.jpeg_quality <= 95:
            raise InvalidInput(f"a JPEG quality is 1..95, got {self.jpeg_quality}")

    def record(self) -> dict[str, Any]:
        """The policy as evaluation metadata (JSON)."""
        return asdict(self)


def _clip(own: int, limit: int) -> int:
    """The stricter of two limits, where 0 means none."""
    return min(v for v in (own, limit) if v) if own or limit else 0


def effective(
    family: MediaPolicy,
    *,
    max_pixels: int = 0,
    max_frames: int = 0,
    max_request_bytes: int = 0,
    video_frames: int = 0,
    video_sample_fps: float = 0.0,
) -> MediaPolicy:
    """The family's policy as one endpoint receives it: the endpoint's own sampling when it
    states one (a frame count before a rate), then every limit the stricter of the two."""
    frames = family.frames
    if frames is not None:
        if video_frames:
            frames = Frames(count=video_frames, cap=frames.cap)
        elif video_sample_fps:
            frames = Frames(fps=video_sample_fps, cap=frames.cap)
        cap = _clip(frames.cap, max_frames)
        frames = replace(frames, cap=cap, count=min(frames.count, cap))
    return replace(
        family,
        max_pixels=_clip(family.max_pixels, max_pixels),
        frames=frames,
        max_request_bytes=_clip(family.max_request_bytes, max_request_bytes),
    )
