"""The sighting rule that decides a mission video's visible count, and the margin that makes a
count safe to ask about."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rows import count_row
from skyqa.families.dualcog_video import checks
from skyqa.geometry import visibility as vis

pytestmark = pytest.mark.unit

SEEN, UNSEEN = 0.01, 0.0  # 5x and 0x the visible share


def frames(*parts: tuple[float, int]) -> list[float]:
    return [share for share, n in parts for _ in range(n)]


def test_a_frame_is_visible_on_its_instance_pixels() -> None:
    assert vis.frame_visible(154, 320, 240)  # 0.2 % of 76800 is 153.6
    assert not vis.frame_visible(153, 320, 240)


def test_a_short_gap_does_not_split_a_sighting_and_a_short_glimpse_is_not_one() -> None:
    # 10 fps: 0.5 s is 5 frames
    pole = frames((SEEN, 20), (UNSEEN, 3), (SEEN, 20))
    assert vis.sightings(pole, 10) == [(0, 42)]
    glimpse = frames((UNSEEN, 10), (SEEN, 3), (UNSEEN, 10), (SEEN, 8))
    assert vis.sightings(glimpse, 10) == [(23, 30)]
    twice = frames((SEEN, 10), (UNSEEN, 10), (SEEN, 10))
    assert vis.sightings(twice, 10) == [(0, 9), (20, 29)]
    assert vis.sightings(frames((UNSEEN, 30)), 10) == []


def test_a_clear_count_is_robust() -> None:
    assert vis.count_is_robust(frames((SEEN, 10), (UNSEEN, 10), (SEEN, 10)), 10)
    assert vis.count_is_robust(frames((UNSEEN, 30)), 10)


@pytest.mark.parametrize(
    "shares",
    [
        # the landmark hovers at the share threshold: 1.2x the share, twice
        frames((0.0024, 10), (UNSEEN, 10), (0.0024, 10)),
        # a gap of 0.4 s: bridged at 0.5 s, two sightings at 0.33 s
        frames((SEEN, 10), (UNSEEN, 4), (SEEN, 10)),
        # a glimpse of 0.6 s: a sighting at 0.5 s, not one at 0.75 s
        frames((UNSEEN, 10), (SEEN, 6), (UNSEEN, 10)),
    ],
)
def test_a_count_that_changes_within_the_margin_is_not_robust(shares: list[float]) -> None:
    assert not vis.count_is_robust(shares, 10)


def test_qc_rederives_the_count_from_the_segmentation_frames() -> None:
    shares = frames((SEEN, 10), (UNSEEN, 10), (SEEN, 10))
    right = count_row(shares, 2, [[0.0, 1.0], [2.0, 3.0]])
    verdict, ambiguous = checks.check_video_rows([right], {"m": checks.Shares(shares)})
    assert not verdict.reasons and not ambiguous.reasons
    # the renderer's flags would say the same; the stored frames show one sighting only
    wrong = count_row(shares, 2, [[0.0, 1.0], [2.0, 3.0]])
    verdict, _ = checks.check_video_rows([wrong], {"m": checks.Shares(frames((SEEN, 10), (UNSEEN, 20)))})
    assert verdict.reasons == {"m_env": "visible count disagrees with the segmentation frames"}
    moved = count_row(shares, 2, [[0.0, 1.0], [2.5, 3.0]])
    assert checks.check_video_rows([moved], {"m": checks.Shares(shares)})[0].reasons
    verdict, _ = checks.check_video_rows([right], {})
    assert verdict.reasons == {"m_env": "segmentation frames missing or unreadable"}
    still = right.model_copy(update={"fps": 0.0})
    assert checks.check_video_rows([still], {"m": checks.Shares(shares)})[0].reasons == {
        "m_env": "frame rate must be positive"
    }


def test_qc_sets_aside_a_count_within_the_margin() -> None:
    # a 0.4 s gap: two sightings by the rule, but one at a 1.5x longer bridge
    shares = frames((SEEN, 10), (UNSEEN, 4), (SEEN, 10))
    row = count_row(shares, 1, [[0.0, 2.4]])
    verdict, ambiguous = checks.check_video_rows([row], {"m": checks.Shares(shares)})
    assert not verdict.reasons
    assert ambiguous.reasons == {"m_env": "visible count within the margin of the sighting rule"}


def test_stored_segmentation_frames_that_are_missing_or_corrupt_reject_the_row(tmp_path: Path) -> None:
    from skyqa import keys, media
    from skyqa.blob import LocalBlobStore
    from skyqa.families.dualcog_video.checks import pixel_shares

    store = LocalBlobStore(tmp_path)
    root = f"{keys.mission_root('run', 'm')}/final_task/seg"
    instance = np.zeros((10, 10), np.uint32)
    instance[:5, :2] = 7
    store.put(f"{root}/frame_000000.png", media.encode_segmentation(instance * 0, instance), "image/png")
    assert pixel_shares(store, "run", "m", 1, 7) == checks.Shares([0.1], [0.0])
    assert pixel_shares(store, "run", "m", 2, 7) is None  # frame 1 was never stored
    assert pixel_shares(store, "run", "m", 1, None) is None  # no instance id for the mission
    store.put(f"{root}/frame_000001.png", b"\x89PNG not really", "image/png")
    assert pixel_shares(store, "run", "m", 2, 7) is None
    # what was stored is still there
    assert media.decode_segmentation(store.get(f"{root}/frame_000000.png"))[1].sum() == 70
