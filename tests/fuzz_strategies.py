"""Hypothesis strategies for scan requests as a client might send them (shared by the fuzz tests)."""

from __future__ import annotations

from hypothesis import strategies as st
from skyqa.v1 import scan_pb2

FIELDS = [f.name for f in scan_pb2.ScanRequest.DESCRIPTOR.fields]
SUB = {
    "bound": ["xmin", "xmax", "ymin", "ymax", "zmin", "zmax"],
    "camera": ["width", "height", "fov_deg", "pitch_deg", "jpeg_quality"],
    "lidar": ["channels", "range_m", "horizontal_samples", "mount_pitch_deg"],
    "video": ["width", "height", "bitrate", "fov_deg"],
    "fusion": ["voxel_size_m", "instance_voxel_size_m", "coverage_grid_m"],
    "evaluation": ["conditions", "models", "budget"],
}
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["tiny_town", "demo_city", "preview", "release", "auto", "human", "NaN", "-Infinity"]),
)
json_values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=12,
)
nested = st.fixed_dictionaries(
    {},
    optional={
        k: st.dictionaries(st.sampled_from(v), json_values, max_size=4) | json_values for k, v in SUB.items()
    },
)
requests = st.builds(
    lambda base, extra: {**base, **extra},
    st.fixed_dictionaries({"scene_id": st.sampled_from(["tiny_town", "demo_city", "", "../x", "a" * 200])}),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6) | nested,
)
