"""The classical-CV quality baseline: with no clean render to compare with, it grades a clean
view well and a heavily degraded one badly, using the other views of the moment as reference."""

from __future__ import annotations

import numpy as np
import pytest
from skyqa import degrade as D
from skyqa.sim import BuiltinSimulator, CameraSpec, Pose, load_scene

from services.evaluator.quality_cv import estimate_quality, noise_sigma

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def views() -> list[np.ndarray]:
    sim = BuiltinSimulator(load_scene("tiny_town"))
    poses = [
        Pose(0.0, -60.0, 35.0, 90.0, -35.0),
        Pose(60.0, 0.0, 40.0, 180.0, -40.0),
        Pose(-50.0, 10.0, 30.0, 0.0, -30.0),
    ]
    return [sim.render(p, CameraSpec(320, 240, 90.0)).rgb[:, :, ::-1].copy() for p in poses]  # BGR


def test_clean_views_grade_well_and_heavy_degradations_badly(views: list[np.ndarray]) -> None:
    target, others = views[0], views[1:]
    clean = estimate_quality(target, others)
    assert clean >= 3
    for kind in ("noise", "blur", "low_light", "masking"):
        d = D.draw(kind, 1.0, seed=2)
        assert estimate_quality(D.apply(target, d), others) <= min(2, clean - 1), kind


def test_the_noise_estimate_follows_the_noise_added(views: list[np.ndarray]) -> None:
    grey = views[0].mean(axis=2).astype(np.float32)
    rng = np.random.default_rng(0)
    base = noise_sigma(grey)
    estimates = [noise_sigma(grey + rng.normal(0, s, grey.shape).astype(np.float32)) for s in (5.0, 20.0)]
    assert base < estimates[0] < estimates[1] and abs(estimates[1] - 20.0) < 6.0
