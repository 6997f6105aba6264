from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from skyqa.vocab.behaviors import LIBRARY_PATH, Library, load_library

ELEMENTS = {
    "gradual_approach",
    "gradual_depart",
    "circular_orbit",
    "spiral_orbit",
    "square_orbit",
    "triangular_orbit",
    "figure8_orbit",
    "sky_rise",
    "comet",
    "surface_mapping",
}


def test_library_has_ten_atomic_elements_ten_wrappers_and_five_composites() -> None:
    lib = load_library()
    assert set(lib.elements) == ELEMENTS
    assert {s.steps[0].element for s in (lib.sets[n] for n in lib.set_names("atomic"))} == ELEMENTS
    assert sorted(lib.set_names("composite")) == [
        "circular_inspection",
        "spiral_inspection",
        "square_inspection",
        "surface_mapping_inspection",
        "triangular_inspection",
    ]
    for name in lib.set_names("composite"):
        steps = lib.sets[name].steps
        assert steps[0].element == "gradual_approach" and steps[-1].element == "gradual_depart"
    # the reference's parameter table, spot-checked
    spiral = lib.elements["spiral_orbit"].params
    assert (spiral["rise_m"].min, spiral["rise_m"].max, spiral["rise_m"].default, spiral["rise_m"].step) == (
        8,
        80,
        24,
        4,
    )
    assert lib.elements["circular_orbit"].params["direction"].choices == ["cw", "ccw"]
    assert lib.safety_distance_m == 2.0


def test_sampling_is_uniform_on_the_step_grid_within_range_and_seeded() -> None:
    lib = load_library()
    step = lib.sets["atomic_comet"].steps[0]
    spec = lib.elements["comet"].params
    draws = [lib.sample_step(step, np.random.default_rng(s)) for s in range(300)]
    for name in ("extension_m", "semi_major_m", "eccentricity", "arc_deg", "speed_mps"):
        p = spec[name]
        assert p.min is not None and p.max is not None and p.step is not None  # a numeric parameter
        values = np.array([float(d[name]) for d in draws])
        assert values.min() >= p.min and values.max() <= p.max
        k = (values - p.min) / p.step
        assert np.allclose(k, np.round(k), atol=1e-6), name
        assert len(set(values)) > 3  # not stuck on the default
    assert lib.sample_step(step, np.random.default_rng(5)) == lib.sample_step(step, np.random.default_rng(5))


def test_auto_rules_narrow_the_range_and_fixed_params_hold() -> None:
    lib = load_library()
    orbit = lib.sets["circular_inspection"].steps[1]
    arcs = {float(lib.sample_step(orbit, np.random.default_rng(s))["arc_deg"]) for s in range(200)}
    assert arcs <= {180.0, 270.0, 360.0, 450.0, 540.0} and len(arcs) >= 4
    fig8 = lib.sets["atomic_figure8_orbit"].steps[0]
    assert all(lib.sample_step(fig8, np.random.default_rng(s))["gaze_pitch_deg"] == 0 for s in range(20))


def test_a_library_with_an_unknown_element_or_bad_range_is_refused(tmp_path: Path) -> None:
    text = LIBRARY_PATH.read_text()
    import yaml

    doc = yaml.safe_load(text)
    doc["sets"]["atomic_comet"]["steps"][0]["element"] = "barrel_roll"
    with pytest.raises(ValidationError, match="unknown element 'barrel_roll'"):
        Library.model_validate(doc)
    doc = yaml.safe_load(text)
    doc["elements"]["comet"]["params"]["arc_deg"]["default"] = 9999
    with pytest.raises(ValidationError, match="outside"):
        Library.model_validate(doc)
