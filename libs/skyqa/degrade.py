"""Recorded, seeded image degradations and the measured rules that grade them.

AirCopBench derives degraded views from clean ones (noise injection for a failing sensor,
partial masking for lost data) and has people label each view's quality on five levels and its
usability for detection. Here a degradation is a recorded transform (kind, strength, seed and,
for masking, the lost rectangle): applying it again gives the same bytes. Quality comes from
what the transform measurably did to the clean render, each measure mapped to a level by the
thresholds below and the view taking its worst level:

=============  ==========================================  ============================
measure        what                                        levels 4..1 from (else 0)
=============  ==========================================  ============================
lost           share of the image masked out               < 1 %, 10 %, 25 %, 45 %
brightness     mean luma, degraded / clean                 >= 0.80, 0.60, 0.40, 0.25
sharpness      mean gradient magnitude, degraded / clean,  >= 0.90, 0.75, 0.60, 0.50
               when below 1 (blur)
fidelity       PSNR to the clean render                    >= 40, 32, 26, 20 dB
=============  ==========================================  ============================

Sharpness and fidelity are taken on the kept pixels after the degraded luma is mapped onto the
clean one quantile by quantile, so a darker or steeper tone curve (low light) counts against
brightness only, and what no tone curve undoes (noise, blur, blocks) against the other two.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import cv2
import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw

from skyqa.contracts.base import Contract
from skyqa.contracts.degradation import KINDS, Degradation, Kind

LEVELS = ("Very poor", "Poor", "Fair", "Good", "Excellent")  # quality 0..4
LOST = (0.01, 0.10, 0.25, 0.45)  # upper bounds of levels 4, 3, 2, 1
BRIGHTNESS = (0.80, 0.60, 0.40, 0.25)  # lower bounds of levels 4, 3, 2, 1
SHARPNESS = (0.90, 0.75, 0.60, 0.50)
FIDELITY_DB = (40.0, 32.0, 26.0, 20.0)
REFERENCE_WIDTH = 640.0  # blur radii scale with the image width from this one
JPEG_QUALITY = 95  # degraded views ship as JPEG; quality is measured on what ships
__all__ = [
    "KINDS",
    "LEVELS",
    "Degradation",
    "Kind",
    "Measured",
    "apply",
    "degraded_jpeg",
    "draw",
    "lost_mask",
    "measure",
]


class Measured(Contract):
    lost: float
    brightness: float
    sharpness: float
    fidelity_db: float
    quality: int  # 0 (Very poor) .. 4 (Excellent)
    quality_label: str
    limited_by: str  # the measure that set the level ("" when Excellent)


def draw(kind: Kind, strength: float, seed: int) -> Degradation:
    """The recorded degradation; masking's rectangle (10 % to 60 % of the image) is drawn here."""
    if not 0.0 <= strength <= 1.0 or not math.isfinite(strength):
        raise ValueError(f"degradation strength must be 0..1, got {strength}")
    region: list[float] = []
    if kind == "masking":
        rng = np.random.default_rng(seed)
        area = 0.10 + 0.50 * strength
        aspect = float(rng.uniform(0.5, 2.0))
        w, h = min(1.0, math.sqrt(area * aspect)), min(1.0, math.sqrt(area / aspect))
        x0, y0 = float(rng.uniform(0.0, 1.0 - w)), float(rng.uniform(0.0, 1.0 - h))
        region = [round(x0, 4), round(y0, 4), round(x0 + w, 4), round(y0 + h, 4)]
    return Degradation(kind=kind, strength=round(strength, 4), seed=seed, region=region)


def apply(rgb: NDArray[np.uint8], d: Degradation) -> NDArray[np.uint8]:
    """The degraded image; the same degradation of the same image gives the same pixels."""
    img = rgb.astype(np.float32)
    s, h, w = d.strength, rgb.shape[0], rgb.shape[1]
    if d.kind == "noise":  # a failing sensor: Gaussian noise of 3 to 50 levels
        img += np.random.default_rng(d.seed).normal(0.0, 3.0 + 47.0 * s, img.shape).astype(np.float32)
    elif d.kind == "blur":  # defocus or motion: Gaussian blur of 0.5 to 5 px at 640 wide
        sigma = (0.5 + 4.5 * s) * w / REFERENCE_WIDTH
        img = np.asarray(cv2.GaussianBlur(img, (0, 0), sigmaX=sigma, sigmaY=sigma), dtype=np.float32)
    elif d.kind == "low_light":  # underexposure: a darker gain and a steeper tone curve
        img = (255.0 * (img / 255.0) ** (1.0 + 1.2 * s) * (1.0 - 0.75 * s)).astype(np.float32)
    elif d.kind == "compression":  # JPEG at quality 70 down to 5
        buf = io.BytesIO()
        Image.fromarray(rgb).save(buf, "JPEG", quality=round(70 - 65 * s))
        img = np.asarray(Image.open(buf).convert("RGB"), dtype=np.float32)
    elif d.kind == "masking":  # lost data: the rectangle goes black
        x0, y0, x1, y1 = _pixels(d.region, w, h)
        img[y0:y1, x0:x1] = 0.0
    out: NDArray[np.uint8] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out


def _pixels(region: list[float], w: int, h: int) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = region
    return round(x0 * w), round(y0 * h), round(x1 * w), round(y1 * h)


def lost_mask(d: Degradation, w: int, h: int) -> NDArray[np.bool_]:
    mask = np.zeros((h, w), dtype=bool)
    if d.kind == "masking":
        x0, y0, x1, y1 = _pixels(d.region, w, h)
        mask[y0:y1, x0:x1] = True
    return mask


def _luma(rgb: NDArray[np.uint8]) -> NDArray[np.float32]:
    out: NDArray[np.float32] = (rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)).astype(
        np.float32
    )
    return out


def _gradient(luma: NDArray[np.float32]) -> NDArray[np.float32]:
    gx, gy = cv2.Sobel(luma, cv2.CV_32F, 1, 0), cv2.Sobel(luma, cv2.CV_32F, 0, 1)
    out: NDArray[np.float32] = np.hypot(gx, gy)
    return out


def _level(value: float, bounds: tuple[float, ...], higher_is_better: bool) -> int:
    for k, b in enumerate(bounds):
        if (value >= b) if higher_is_better else (value < b):
            return 4 - k
    return 0


def measure(clean: NDArray[np.uint8], degraded: NDArray[np.uint8], d: Degradation) -> Measured:
    """What the degradation did to the clean render, and the quality level that follows."""
    h, w = clean.shape[:2]
    kept = ~lost_mask(d, w, h)
    lost = 1.0 - float(kept.mean())
    a, b = _luma(clean), _luma(degraded)
    mean_a = float(a[kept].mean()) if kept.any() else 0.0
    brightness = float(b[kept].mean()) / mean_a if kept.any() and mean_a > 0 else 1.0
    # the degraded luma mapped onto the clean one by quantiles: tone changes undone
    matched = np.interp(b, np.sort(b[kept]), np.sort(a[kept])).astype(np.float32) if kept.any() else b
    grad_a, grad_b = _gradient(a)[kept], _gradient(matched)[kept]
    sharpness = float(grad_b.mean() / grad_a.mean()) if kept.any() and grad_a.mean() > 0 else 1.0
    mse = float(np.mean((matched[kept] - a[kept]) ** 2)) if kept.any() else 0.0
    fidelity = 99.0 if mse <= 1e-9 else min(99.0, 10.0 * math.log10(255.0**2 / mse))
    levels = {
        "lost": _level(lost, LOST, higher_is_better=False),
        "brightness": _level(brightness, BRIGHTNESS, higher_is_better=True),
        "sharpness": _level(min(sharpness, 1.0), SHARPNESS, higher_is_better=True),
        "fidelity": _level(fidelity, FIDELITY_DB, higher_is_better=True),
    }
    worst = min(levels.values())
    limited = "" if worst == 4 else min(levels, key=lambda k: (levels[k], list(levels).index(k)))
    return Measured(
        lost=round(lost, 4),
        brightness=round(brightness, 4),
        sharpness=round(sharpness, 4),
        fidelity_db=round(fidelity, 2),
        quality=worst,
        quality_label=LEVELS[worst],
        limited_by=limited,
    )


MARK_RGB = (255, 0, 0)


def mark_width(width: int, height: int) -> int:
    """The line width of a drawn region, in pixels."""
    return max(2, round(min(width, height) / 160))


def degraded_jpeg(clean_jpeg: bytes, d: Degradation, marked: Sequence[float] = ()) -> tuple[bytes, Measured]:
    """The degraded view as it ships (JPEG) and what it measures against the clean frame;
    ``marked``: a red box drawn on it after the degradation (a region a question names, so
    noise or blur never hides it), its line inside the box's bounds."""
    clean = np.asarray(Image.open(io.BytesIO(clean_jpeg)).convert("RGB"))
    img = Image.fromarray(apply(clean, d))
    if marked:
        w, h = img.size
        x0, y0, x1, y1 = (float(v) for v in marked)
        line = mark_width(w, h)
        ImageDraw.Draw(img).rectangle([x0 * w, y0 * h, x1 * w - 1, y1 * h - 1], outline=MARK_RGB, width=line)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=JPEG_QUALITY)
    data = buf.getvalue()
    shipped = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    return data, measure(clean, shipped, d)
