"""A no-reference image-quality estimate for AirCopBench-style Quality Assessment rows, the
classical-CV baseline's answer there. It sees what a model sees: the UAV's image and the other
UAVs' images of the same moment, never the clean render or the recorded degradation.

Four estimates, each mapped to a level with the thresholds the release's own quality rule uses
(:mod:`skyqa.degrade`), the image taking the worst: the share of pure-black pixels (lost data),
mean luma and mean gradient magnitude relative to the median of the other views (darkness,
blur), and Immerkær's noise sigma (a Laplacian-difference filter's mean absolute response) as a
PSNR, 20·log10(255/σ).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from numpy.typing import NDArray
from skyqa.degrade import BRIGHTNESS, FIDELITY_DB, LOST, SHARPNESS

KERNEL = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], dtype=np.float32)


def _luma(bgr: NDArray[np.uint8]) -> NDArray[np.float32]:
    out: NDArray[np.float32] = cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY).astype(np.float32)
    return out


def _gradient(luma: NDArray[np.float32]) -> float:
    gx, gy = cv2.Sobel(luma, cv2.CV_32F, 1, 0), cv2.Sobel(luma, cv2.CV_32F, 0, 1)
    return float(np.hypot(gx, gy).mean())


def noise_sigma(luma: NDArray[np.float32]) -> float:
    """Immerkær (1996): sigma = sqrt(pi / 2) / (6 (W - 2) (H - 2)) * sum |I * N|."""
    h, w = luma.shape
    response = np.abs(cv2.filter2D(luma, cv2.CV_32F, KERNEL)[1:-1, 1:-1])
    return float(math.sqrt(math.pi / 2) * response.sum() / (6 * (w - 2) * (h - 2)))


def _level(value: float, bounds: tuple[float, ...], higher_is_better: bool) -> int:
    for k, b in enumerate(bounds):
        if (value >= b) if higher_is_better else (value < b):
            return 4 - k
    return 0


def estimate_quality(image: NDArray[np.uint8], others: list[NDArray[np.uint8]]) -> int:
    """The quality level 0 (Very poor) .. 4 (Excellent) the estimates give; images in OpenCV's
    BGR order."""
    luma = _luma(image)
    lost = float((image.max(axis=2) <= 2).mean())
    refs = [_luma(o) for o in others] or [luma]
    brightness = float(luma.mean()) / max(1e-6, float(np.median([r.mean() for r in refs])))
    sharpness = _gradient(luma) / max(1e-6, float(np.median([_gradient(r) for r in refs])))
    sigma = noise_sigma(luma)
    psnr = 99.0 if sigma <= 1e-6 else 20 * math.log10(255.0 / sigma)
    return min(
        _level(lost, LOST, higher_is_better=False),
        _level(brightness, BRIGHTNESS, higher_is_better=True),
        _level(min(sharpness, 1.0), SHARPNESS, higher_is_better=True),
        _level(psnr, FIDELITY_DB, higher_is_better=True),
    )
