"""Segmentation palettes of ``skyqa sim serve``: the formats users bring and their mistakes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from skyqa.errors import InvalidInput
from skyqa.sim.airsim_palette import load_palette

pytestmark = pytest.mark.unit


def test_ids_paint_an_id_as_its_own_bytes() -> None:
    p = load_palette("ids")
    assert p.size == 1 << 24
    assert p.rgb(np.array([0, 1, 258, 0x030201])).tolist() == [[0, 0, 0], [1, 0, 0], [2, 1, 0], [1, 2, 3]]
    assert p.default_id(70000) == 70000


def test_airsims_seg_rgbs_txt_and_npy_tables_load(tmp_path: Path) -> None:
    txt = tmp_path / "seg_rgbs.txt"
    txt.write_text("0\t[0, 0, 0]\n1\t[153, 108, 6]\n\n2\t[112, 105, 191]\n")
    p = load_palette(str(txt))
    assert p.size == 3 and p.rgb(np.array([2, 1])).tolist() == [[112, 105, 191], [153, 108, 6]]
    assert [p.default_id(i) for i in (0, 1, 2, 3, 4, 5)] == [0, 1, 2, 1, 2, 1]  # wraps past 0
    npy = tmp_path / "colours.npy"
    np.save(npy, np.array([[1, 2, 3], [4, 5, 6]]))
    assert load_palette(str(npy)).rgb(np.array([1])).tolist() == [[4, 5, 6]]


def test_cosys_is_the_colour_map_the_cosys_client_decodes_with() -> None:
    airsim = pytest.importorskip("cosysairsim")
    p = load_palette("cosys")
    expected = np.asarray(airsim.MultirotorClient.simGetSegmentationColorMap())
    assert p.size == len(expected) and np.array_equal(
        p.rgb(np.array([0, 5, p.size - 1])), expected[[0, 5, -1]]
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("0\t[0, 0, 0]\n1\t(1, 2, 3)\n", r"line 2: expected '<id> \[r, g, b\]'"),
        ("0\t[0, 0, 0]\n2\t[1, 2, 3]\n", "ids 0..N-1 once each"),
        ("0\t[0, 0, 0]\n", "expected 2..16777216 rows"),
        ("0\t[0, 0, 0]\n1\t[1, 2, 300]\n", "colours are integers 0..255"),
        (b"\xff\xfe\x00", "is not text"),
    ],
)
def test_a_bad_palette_file_says_what_is_wrong(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "palette.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InvalidInput, match=message):
        load_palette(str(path))


def test_a_missing_or_malformed_npy_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="ids, cosys or a palette file"):
        load_palette(str(tmp_path / "nope.txt"))
    flat = tmp_path / "flat.npy"
    np.save(flat, np.arange(9))
    with pytest.raises(InvalidInput, match="rows of r, g, b"):
        load_palette(str(flat))
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not numpy")
    with pytest.raises(InvalidInput, match="not a numpy array file"):
        load_palette(str(junk))
    floats = tmp_path / "floats.npy"
    np.save(floats, np.full((4, 3), 0.5))
    with pytest.raises(InvalidInput, match="integers"):
        load_palette(str(floats))
