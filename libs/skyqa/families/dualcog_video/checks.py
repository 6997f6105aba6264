"""QC of the video rows: structure, behavior intervals that tile the video, and each visible
count re-derived from the mission's stored segmentation frames (not the renderer's per-frame
flags). A mission whose video never shows its landmark failed: its row fails, whether its gold
says 0 or the frames do, which costs the landmark (a question about a landmark the video does
not show is not asked).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts.qa import VideoRow
from skyqa.families.frames import per_frame
from skyqa.families.structure import Verdict, check_options
from skyqa.families.twins import TWIN_IN_VIEW, share, sighted
from skyqa.geometry import visibility as vis

NEVER_SEEN = "the landmark never appears in its mission video (the mission failed)"
MISCOUNTED = "a polygon orbit's laps disagree with its edges (a square has 4, a triangle 3)"

# a polygon orbit as options word it: the shape, its edges flown, and how far around that is
_POLYGON = re.compile(r"^(square|triangle) orbit \w+ along (\d+) edges \((.+?)\) with the camera ")
_SIDES = {"square": 4, "triangle": 3}
_PARTS = {
    frac: Fraction(n, d) for frac, n, d in (("¼", 1, 4), ("½", 1, 2), ("¾", 3, 4), ("⅓", 1, 3), ("⅔", 2, 3))
}
_AROUND = re.compile(r"^(?:once|(\d*)([¼½¾⅓⅔]?) times|([¼½¾⅓⅔]) of the way) around$")


def polygon_laps_agree(label: str) -> bool:
    """True unless ``label`` words a square or triangle orbit whose stated laps are not its edges
    over the polygon's sides (read back from the words, not from the label's builder), or
    words one in another form (a count of "sides" or "legs" a person would read as the shape's)."""
    if not label.startswith(("square orbit", "triangle orbit")):
        return True
    m = _POLYGON.match(label)
    around = _AROUND.match(m.group(3)) if m else None
    if m is None or around is None:
        return False
    whole, part, only = around.groups()
    if only:
        stated = _PARTS[only]
    elif whole is None and not part:
        stated = Fraction(1)  # "once around"
    else:
        stated = int(whole or 0) + _PARTS.get(part, Fraction(0))
    return stated > 0 and stated == Fraction(int(m.group(2)), _SIDES[m.group(1)])


def check_video_rows(rows: list[VideoRow], shares: Mapping[str, Shares | None]) -> tuple[Verdict, Verdict]:
    """Structure, and each visible count re-derived from its mission's segmentation frames
    (``shares``: the landmark's and its twins' instance-pixel shares per frame, None when
    unreadable); a count whose video also shows a twin fails, a person could count either. The
    second verdict holds the counts a viewer could fairly answer either way (not robust under
    the rule's margin)."""
    v, ambiguous = Verdict(), Verdict()
    for r in rows:
        if not (r.sample_id and r.video_path and r.prompt_text and r.frame_count > 0):
            v.fail(r.sample_id, "missing required field")
        if r.form == "self_instance_recognition_joint":
            ids = [o.option_id for o in r.choice_options]
            check_options(r.sample_id, [o.label for o in r.choice_options], ids, r.answer_option_ids, v)
            if not 2 <= len(ids) <= 8:
                v.fail(r.sample_id, "joint rows need 2..8 options")
            if not all(polygon_laps_agree(o.label) for o in r.choice_options):
                v.fail(r.sample_id, MISCOUNTED)
            spans = sorted((b["start_sec"], b["end_sec"]) for b in r.behavior_intervals_sec)
            gaps = any(abs(float(b[0]) - float(a[1])) > 1e-6 for a, b in itertools.pairwise(spans))
            if not spans or spans[0][0] != 0 or abs(float(spans[-1][1]) - r.duration_sec) > 1e-6 or gaps:
                v.fail(r.sample_id, "behavior intervals do not tile the video")
            continue
        gold_count = r.gold_environment_answer.get("visible_count")
        if not isinstance(gold_count, int) or gold_count < 1:
            # whatever the frames say: a question about a landmark its video does not show
            # is never asked (the planner skips such a mission's landmark; this holds QC to it)
            v.fail(r.sample_id, NEVER_SEEN)
            continue
        measured = shares.get(r.mission_id)
        if not r.fps > 0:
            v.fail(r.sample_id, "frame rate must be positive")
            continue
        if measured is None or len(measured.landmark) != r.frame_count:
            v.fail(r.sample_id, "segmentation frames missing or unreadable")
            continue
        seen = measured.landmark
        if measured.twins and sighted(seen, measured.twins, r.fps):
            v.fail(r.sample_id, TWIN_IN_VIEW)
            continue
        expected = [[a / r.fps, (b + 1) / r.fps] for a, b in vis.sightings(seen, r.fps)]
        if not expected:
            v.fail(r.sample_id, NEVER_SEEN)
            continue
        gold = r.gold_environment_answer
        ivs = gold.get("visible_intervals_sec", [])
        same = (
            isinstance(ivs, list)
            and len(ivs) == len(expected)
            and all(
                isinstance(iv, list)
                and len(iv) == 2
                and all(abs(float(x) - y) <= 0.5 / r.fps for x, y in zip(iv, e, strict=True))
                for iv, e in zip(ivs, expected, strict=True)
            )
        )
        if gold.get("visible_count") != len(expected) or not same:
            v.fail(r.sample_id, "visible count disagrees with the segmentation frames")
        elif not vis.count_is_robust(seen, r.fps):
            ambiguous.fail(r.sample_id, "visible count within the margin of the sighting rule")
    return v, ambiguous


@dataclass(frozen=True)
class Shares:
    """Per frame of a mission video: the landmark's instance-pixel share and its twins'."""

    landmark: list[float]
    twins: list[float] = field(default_factory=list)  # none: no twin to look for


def pixel_shares(
    store: BlobStore,
    run_id: str,
    mission_id: str,
    frames: int,
    iid: int | None,
    twin_ids: Collection[int] = (),
) -> Shares | None:
    """The instance-pixel shares of ``iid`` and of ``twin_ids`` in each stored segmentation
    frame of a mission, read once, or None when a frame is missing or unreadable (QC then
    rejects the row)."""
    if iid is None:
        return None
    root = keys.final_task(run_id, mission_id)
    frame_keys = [f"{root}/{keys.video_frame('seg', i)}" for i in range(frames)]
    both = per_frame(
        store, frame_keys, lambda instance: (float((instance == iid).mean()), share(instance, twin_ids))
    )
    if both is None:
        return None
    return Shares([a for a, _ in both], [b for _, b in both])
