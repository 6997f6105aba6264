"""What a model is sent of a row's media: its family's media policy as the endpoint receives it
(:func:`skyqa.media_policy.effective`) under a condition's media kinds (``conditions.MEDIA``).

A still within the policy's pixel limit goes byte for byte as stored (JPEG or PNG), never
decoded. One over it is decoded at the smallest JPEG DCT scale that still covers the target
size (``Image.draft``: an 8192x6144 still sent at 640x480 is decoded at 1024x768) and
re-encoded at the policy's quality. Quadrants are cut from the decoded still at its own
resolution (UltraVR V3). A video is decoded one frame at a time and only up to its last
sampled frame. A request over the policy's byte limit has every image scaled down until it
fits, or is refused with :class:`MediaTooLarge`.
"""

from __future__ import annotations

import io
import math
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace

from PIL import Image
from skyqa.errors import InvalidInput
from skyqa.media_policy import MediaPolicy
from skyqa.video import decode_at, frame_count

THUMBNAIL_MAX = (160, 120)  # UltraVR V1's global view
QUADRANTS = ("top-left", "top-right", "bottom-left", "bottom-right")
MIME = {"JPEG": "image/jpeg", "PNG": "image/png"}  # what goes as stored
SHRINK_TRIES = 4
SHRINK_MARGIN = 0.9  # JPEG bytes do not fall exactly with pixels
MIN_PIXELS = 64 * 64  # below this a request is refused rather than made useless


class MediaTooLarge(InvalidInput):
    reason = "media_too_large"


@dataclass(frozen=True)
class Part:
    """One image of a request, as sent."""

    label: str
    data: bytes
    mime: str
    size: tuple[int, int]


@dataclass(frozen=True)
class Source:
    """One of a row's media in prompt order; ``fps`` set: a video."""

    label: str
    data: bytes
    fps: float | None = None


def _target(size: tuple[int, int], max_pixels: int) -> tuple[int, int] | None:
    """The size an image is scaled to under ``max_pixels``, keeping its aspect; None: it fits."""
    w, h = size
    if not max_pixels or w * h <= max_pixels:
        return None
    s = math.sqrt(max_pixels / (w * h))
    return max(1, math.floor(w * s)), max(1, math.floor(h * s))


def _jpeg(img: Image.Image, label: str, quality: int) -> Part:
    buf = io.BytesIO()
    img.convert("RGB").save(buf, "JPEG", quality=quality)
    return Part(label, buf.getvalue(), "image/jpeg", img.size)


def _scaled(img: Image.Image, max_pixels: int) -> Image.Image:
    target = _target(img.size, max_pixels)
    return img if target is None else img.resize(target, Image.Resampling.LANCZOS)


def still(data: bytes, label: str, policy: MediaPolicy) -> Part:
    """The still as the policy sends it: as stored when it fits, else scaled down."""
    img = Image.open(io.BytesIO(data))  # reads the header only
    mime = MIME.get(img.format or "")
    target = _target(img.size, policy.max_pixels)
    if target is None and mime is not None:
        return Part(label, data, mime, img.size)
    if target is not None:
        img.draft("RGB", target)  # a JPEG decodes at the smallest DCT scale at least this big
    return _jpeg(_scaled(img.convert("RGB"), policy.max_pixels), label, policy.jpeg_quality)


def thumbnail(data: bytes, label: str, policy: MediaPolicy) -> Part:
    stored = Image.open(io.BytesIO(data))
    stored.draft("RGB", THUMBNAIL_MAX)
    img = stored.convert("RGB")
    img.thumbnail(THUMBNAIL_MAX)
    return _jpeg(img, f"{label} (thumbnail)", policy.jpeg_quality)


def quadrants(data: bytes, label: str, policy: MediaPolicy) -> list[Part]:
    """The still's four quadrants at its own resolution (an endpoint's pixel limit still holds)."""
    img = Image.open(io.BytesIO(data)).convert("RGB")
    w, h = img.size
    out = []
    for name, (x, y) in zip(QUADRANTS, ((0, 0), (1, 0), (0, 1), (1, 1)), strict=True):
        part = img.crop((x * w // 2, y * h // 2, (x + 1) * w // 2, (y + 1) * h // 2))
        out.append(_jpeg(_scaled(part, policy.max_pixels), f"{label}, {name} quadrant", policy.jpeg_quality))
    return out


def frames(mp4: bytes, video_fps: float, policy: MediaPolicy) -> list[Part]:
    """The policy's frames of a video, each labelled with its time."""
    if policy.frames is None:
        raise InvalidInput("a video row in a family whose media policy samples no video")
    out = []
    with tempfile.NamedTemporaryFile(suffix=".mp4") as fh:
        fh.write(mp4)
        fh.flush()
        wanted = policy.frames.indices(frame_count(fh.name), video_fps)
        for i, img in decode_at(fh.name, wanted):
            label = f"video frame at {i / video_fps:.1f} s"
            out.append(_jpeg(_scaled(img, policy.max_pixels), label, policy.jpeg_quality))
    return out


def parts(sources: Sequence[Source], kinds: tuple[str, ...], policy: MediaPolicy) -> list[Part]:
    """Every image a request carries, in prompt order: each still, and each sampled frame of a
    video, in each of ``kinds`` (see ``conditions.MEDIA``)."""
    out: list[Part] = []
    if not kinds:
        return out  # text only: no video is decoded for nothing
    for s in sources:
        shown = [s] if s.fps is None else [Source(p.label, p.data) for p in frames(s.data, s.fps, policy)]
        for one in shown:
            for kind in kinds:
                if kind == "full":
                    out.append(still(one.data, one.label, policy))
                elif kind == "thumbnail":
                    out.append(thumbnail(one.data, one.label, policy))
                else:
                    out += quadrants(one.data, one.label, policy)
    return out


def wire_bytes(ps: Sequence[Part], encoded: bool) -> int:
    """Media bytes on the wire: base64 text for an OpenAI-compatible endpoint (``encoded``)."""
    return sum(4 * math.ceil(len(p.data) / 3) if encoded else len(p.data) for p in ps)


def within_bytes(
    sources: Sequence[Source], kinds: tuple[str, ...], policy: MediaPolicy, encoded: bool
) -> tuple[list[Part], MediaPolicy]:
    """The request's images and the policy they were made under: the given one, or, over its
    byte limit, one whose pixel limit scales every image down until they fit."""
    out = parts(sources, kinds, policy)
    limit = policy.max_request_bytes
    for _ in range(SHRINK_TRIES):
        size = wire_bytes(out, encoded)
        if not limit or size <= limit or not out:
            return out, policy
        largest = max(p.size[0] * p.size[1] for p in out)
        pixels = math.floor(largest * limit / size * SHRINK_MARGIN)
        if pixels < MIN_PIXELS:
            break
        policy = replace(policy, max_pixels=pixels)
        out = parts(sources, kinds, policy)
    size = wire_bytes(out, encoded)
    if size <= limit:
        return out, policy
    raise MediaTooLarge(
        f"the request's {len(out)} images take {size} bytes, over the endpoint's "
        f"max_request_bytes {limit} even scaled down; not sent"
    )
