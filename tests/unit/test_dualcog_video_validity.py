"""The video family's visibility counts cannot be answered without the video (skyqa issue #42):
the 40-landmark run's released counts were guessed by the other rows' median (0.375 against
a chance of 0.17), and a few of its rows asked about a landmark its own mission never showed
(gold 0: the mission failed)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from partial_models import partial_model
from rows import count_row
from skyqa.contracts.missions import EnvTrack, MissionIndexRow, TaskData, TaskTracks
from skyqa.contracts.qa import VideoRow
from skyqa.families import Checked
from skyqa.families.dualcog_video import FAMILY, checks
from skyqa.families.dualcog_video.balance import count_surplus

pytestmark = pytest.mark.unit

# the counts the run's landmarks with two working missions showed, per mission kind: a short
# atomic mission tracking its landmark is in view once, a composite one several times
RUN = {"atomic": {1: 7, 2: 1, 3: 1}, "composite": {1: 4, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}}
# the same shape at a release's size
LARGE = {"atomic": {1: 40, 2: 8, 3: 5, 4: 1}, "composite": {1: 14, 2: 10, 3: 8, 4: 6, 5: 3, 6: 2}}
# a release's landmarks, each with one mission of each kind (44 of them)
LANDMARKS = {"atomic": {1: 30, 2: 8, 3: 5, 4: 1}, "composite": {1: 14, 2: 10, 3: 8, 4: 6, 5: 3, 6: 3}}


def rows_of(counts: dict[str, dict[int, int]]) -> list[tuple[str, str, str, int]]:
    """Visibility rows, each of a landmark of its own."""
    return [
        (f"{kind}_{count}_{i}", f"lm_{kind}_{count}_{i}", kind, count)
        for kind, by in counts.items()
        for count, n in by.items()
        for i in range(n)
    ]


def kept(counts: dict[str, dict[int, int]]) -> list[tuple[str, str, int]]:
    rows = rows_of(counts)
    dropped = count_surplus(rows)
    return [(s, k, c) for s, _, k, c in rows if s not in dropped]


def paired(counts: dict[str, dict[int, int]], seed: int) -> list[tuple[str, str, str, int]]:
    """The same counts with each landmark flying one atomic and one composite mission, paired
    at random (as the run pairs them: by landmark, not by count)."""
    atomic = [r for r in rows_of(counts) if r[2] == "atomic"]
    composite = [r for r in rows_of(counts) if r[2] == "composite"]
    order = np.random.default_rng(seed).permutation(len(composite))
    out = []
    for n, (a, k) in enumerate(zip(atomic, order, strict=True)):
        c = composite[k]
        out += [(a[0], f"lm{n}", "atomic", a[3]), (c[0], f"lm{n}", "composite", c[3])]
    return out


def blind_scores(rows: list[tuple[str, str, int]]) -> tuple[float, float, float]:
    """Leave-one-out accuracy of the most frequent count of the row's mission kind and of the
    median count, and the gate's chance (one over the number of counts released)."""
    mode = median = 0
    for i, (_, kind, count) in enumerate(rows):
        others = rows[:i] + rows[i + 1 :]
        same = Counter(c for _, k, c in others if k == kind) or Counter(c for _, _, c in others)
        mode += min(same, key=lambda c: (-same[c], c)) == count
        median += round(float(np.median([c for _, _, c in others]))) == count
    return mode / len(rows), median / len(rows), 1 / len({c for _, _, c in rows})


@pytest.mark.parametrize("counts", [RUN, LARGE])
def test_released_counts_are_even_per_mission_kind_over_one_count_space(
    counts: dict[str, dict[int, int]],
) -> None:
    out = kept(counts)
    by_kind = {kind: Counter(c for _, k, c in out if k == kind) for kind in counts}
    spaces = {frozenset(seen) for seen in by_kind.values()}
    assert len(spaces) == 1 and len(next(iter(spaces))) >= 3  # one space, every kind shows all of it
    for seen in by_kind.values():
        assert len(set(seen.values())) == 1, by_kind  # each count as frequent as every other
    mode, median, chance = blind_scores(out)
    assert mode <= chance and median <= chance, (mode, median, chance)


def test_a_count_only_one_mission_kind_shows_is_not_released() -> None:
    from skyqa.families.dualcog_video.balance import OUTSIDE

    dropped = count_surplus(rows_of(RUN))
    assert {dropped[s] for s in ("composite_4_0", "composite_5_0", "composite_6_0")} == {OUTSIDE}
    assert dropped == count_surplus(list(reversed(rows_of(RUN))))  # stable whatever the order


def test_counts_that_are_all_the_same_are_not_released() -> None:
    """procedural_4242_8 at 40 landmarks: eleven visibility rows, every one with count 1 (an
    orbit and a short composite each show their landmark once); "1" answered every row blind."""
    from skyqa.families.dualcog_video.balance import ONE_COUNT, OUTSIDE

    rows = rows_of({"atomic": {1: 9}, "composite": {1: 2, 2: 1}})
    dropped = count_surplus(rows)
    assert kept({"atomic": {1: 9}, "composite": {1: 2, 2: 1}}) == []
    assert dropped["composite_2_0"] == OUTSIDE and {dropped[s] for s, _, _, c in rows if c == 1} == {
        ONE_COUNT
    }
    assert kept({"atomic": {1: 3, 2: 3}, "composite": {1: 1, 2: 1}}) != []  # two counts: balanced, kept


def test_the_family_balances_its_visibility_rows() -> None:
    rows = [
        partial_model(
            VideoRow,
            sample_id=sid,
            form="env_visibility_reasoning",
            mission_kind=kind,
            landmark_id=unit,
            gold_environment_answer={"visible_count": count, "visible_intervals_sec": []},
        )
        for sid, unit, kind, count in paired(RUN, 0)
    ]
    assert FAMILY.balance(rows) == count_surplus(paired(RUN, 0))


@pytest.mark.parametrize("seed", range(6))
def test_a_landmarks_rows_stay_or_go_together_and_stay_balanced(seed: int) -> None:
    """A landmark's visibility rows (its atomic and its composite mission) are kept or left out
    as one, and what is kept is still even per mission kind, so the blind priors stay at chance."""
    rows = paired(LANDMARKS, seed)
    dropped = count_surplus(rows)
    by_unit: dict[str, set[bool]] = {}
    for s, unit, _, _ in rows:
        by_unit.setdefault(unit, set()).add(s in dropped)
    assert all(len(fates) == 1 for fates in by_unit.values()), "a landmark split"
    out = [(s, k, c) for s, _, k, c in rows if s not in dropped]
    assert len(out) >= 12  # the balance keeps a useful share, not nothing
    by_kind = {kind: Counter(c for _, k, c in out if k == kind) for kind in LANDMARKS}
    assert len({frozenset(b) for b in by_kind.values()}) == 1 and len(by_kind["atomic"]) >= 2
    assert all(len(set(b.values())) == 1 for b in by_kind.values()), by_kind
    mode, median, chance = blind_scores(out)
    assert mode <= chance and median <= chance, (mode, median, chance)


def test_the_paired_balance_keeps_the_most_landmarks() -> None:
    """Against every choice of landmarks of a small run: none keeps more while even."""
    import itertools

    rows = paired({"atomic": {1: 4, 2: 2, 3: 1}, "composite": {1: 2, 2: 3, 3: 2}}, 1)
    dropped = count_surplus(rows)
    units = sorted({u for _, u, _, _ in rows})

    def even(chosen: set[str]) -> bool:
        by = {
            k: Counter(c for _, u, kk, c in rows if u in chosen and kk == k) for k in ("atomic", "composite")
        }
        spaces = {frozenset(b) for b in by.values()}
        return (
            len(spaces) == 1
            and len(next(iter(spaces))) >= 2
            and all(len(set(b.values())) == 1 for b in by.values())
        )

    best = max(
        (len(c) for n in range(len(units) + 1) for c in itertools.combinations(units, n) if even(set(c))),
        default=0,
    )
    assert len({u for s, u, _, _ in rows if s not in dropped}) == best > 0


def test_a_landmark_one_of_whose_missions_never_shows_it_is_not_asked() -> None:
    def task(count: int) -> TaskData:
        env = partial_model(EnvTrack, visible_count=count)
        return partial_model(TaskData, task_tracks=partial_model(TaskTracks, environmental_awareness=env))

    missions = [
        partial_model(MissionIndexRow, traj_id=f"{lm}_{kind}", instance_id=lm)
        for lm in ("seen", "blind")
        for kind in ("atomic", "composite")
    ]
    tasks = {
        "seen_atomic": task(1),
        "seen_composite": task(3),
        "blind_atomic": task(0),
        "blind_composite": task(2),
    }
    from skyqa.families.dualcog_video.family import failed_missions

    assert failed_missions(missions, tasks) == {"blind_atomic": "blind"}


def test_a_failed_mission_gets_no_visibility_row() -> None:
    """The generator refuses to ask about a landmark its mission video never shows."""
    from skyqa.contracts.missions import ComposedSegments
    from skyqa.errors import InvalidInput
    from skyqa.families.dualcog_video.tasks import visibility_row

    env = partial_model(EnvTrack, visible_count=0)
    task = partial_model(TaskData, task_tracks=partial_model(TaskTracks, environmental_awareness=env))
    composed = partial_model(ComposedSegments, scene_id="s", traj_id="lm_atomic")
    with pytest.raises(InvalidInput, match="never shows its landmark"):
        visibility_row(composed, task, {"landmark_description": "red tower"})


def test_the_release_counts_landmarks_lost_to_a_failed_mission() -> None:
    """The card's funnel counts each landmark a failed mission cost once, whether the plan
    skipped it or the QC refused its row."""
    from skyqa.families.dualcog_video.family import NOT_SEEN

    from services.qa_generator.release import select

    incomplete = {"lm1": NOT_SEEN, "lm2": checks.NEVER_SEEN, "lm3": "2 video rows (needs 4)"}
    _, _, counts = select([FAMILY], {FAMILY.name: Checked([])}, {}, {}, {FAMILY.name: incomplete}, {})
    assert counts["failed_mission_landmarks"] == 2


def test_qc_fails_a_mission_video_that_never_shows_its_landmark() -> None:
    """A re-derived count of 0 fails the row (which costs its landmark), not passes it as an
    answer: the landmark the question shows is not in the video."""
    shares = [0.0] * 40
    row = count_row(shares, 0, [])  # a stored gold saying it never appears
    verdict, ambiguous = checks.check_video_rows([row], {"m": checks.Shares(shares)})
    never = "the landmark never appears in its mission video (the mission failed)"
    assert verdict.reasons == {"m_env": never} and not ambiguous.reasons


def test_qc_refuses_a_gold_count_of_zero_whatever_the_frames_show() -> None:
    """A stored gold of 0 is refused before the frames are read: the row would ask about a
    landmark its video does not show, even where the frames disagree with the gold."""
    shares = [0.0] * 10 + [0.05] * 20 + [0.0] * 10
    row = count_row(shares, 0, [])  # a stored gold saying it never appears
    verdict, _ = checks.check_video_rows([row], {"m": checks.Shares(shares)})
    assert verdict.reasons == {"m_env": checks.NEVER_SEEN}
    one = row.model_copy(
        update={"gold_environment_answer": {"visible_count": 1, "visible_intervals_sec": [[1.0, 3.0]]}}
    )
    assert (
        checks.check_video_rows([one], {"m": checks.Shares(shares)})[0].reasons == {}
    )  # the same row with its true gold passes
