"""Gold positions: balanced per (task, difficulty), seeded, and carrying no information about
the difficulty, the landmark or the row's index; QC reports what pooling would hide."""

from __future__ import annotations

from collections import Counter

from scipy.stats import chi2_contingency
from skyqa.contracts.qa import IMAGE_TASKS
from skyqa.families import Item
from skyqa.families.dualcog_image.placement import LETTERS, Placement
from skyqa.families.dualcog_image.tasks import option_count

from services.qa_generator.qc import letter_balance as balance

# 60 landmarks: most have 4-way + 8-way slots, some only 4-way twice
SLOTS = [["4way", "8way"] if i % 5 else ["4way", "4way"] for i in range(60)]


def positions(p: Placement, task: str) -> list[tuple[int, str, int]]:
    return [(i, d, p.position(i, s, task)) for i, ds in enumerate(SLOTS) for s, d in enumerate(ds)]


def test_every_letter_equally_often_per_task_and_difficulty() -> None:
    p = Placement(7, SLOTS, option_count)
    for task in IMAGE_TASKS:
        for difficulty in ("4way", "8way"):
            counts = Counter(pos for _, d, pos in positions(p, task) if d == difficulty)
            k = option_count(task, difficulty)
            assert max(counts.values()) - min(counts.values()) <= 1 and len(counts) == k, (task, counts)


def test_the_letter_does_not_depend_on_the_difficulty_or_the_index() -> None:
    p = Placement(7, SLOTS, option_count)
    for task in ("self_what", "env_how"):  # four options at both difficulties
        rows = positions(p, task)
        table = [
            [sum(1 for _, d, pos in rows if d == diff and pos == k) for k in range(4)]
            for diff in ("4way", "8way")
        ]
        assert chi2_contingency(table).pvalue > 0.05, (task, table)
        # the old rule, (index * 2 + slot) % 4, made the letter a function of the row's index
        by_rule = sum(
            pos == (i * 2 + s) % 4
            for i, ds in enumerate(SLOTS)
            for s in range(len(ds))
            for pos in [p.position(i, s, task)]
        )
        assert by_rule < 0.45 * len(rows), (task, by_rule)


def test_the_rows_of_one_landmark_and_slot_do_not_share_a_letter() -> None:
    p = Placement(7, SLOTS, option_count)
    shared = sum(
        len({p.position(i, s, t) for t in IMAGE_TASKS}) == 1
        for i, ds in enumerate(SLOTS)
        for s in range(len(ds))
    )
    assert shared < 0.1 * sum(len(ds) for ds in SLOTS)  # chance: 1/64 of slots


def test_the_seed_decides_and_replays() -> None:
    a, b, c = (
        Placement(7, SLOTS, option_count),
        Placement(7, SLOTS, option_count),
        Placement(8, SLOTS, option_count),
    )
    assert positions(a, "env_how") == positions(b, "env_how") != positions(c, "env_how")


def choice(task: str, difficulty: str, gold: str, letters: str, n: int) -> Item:
    """A single-answer row as QC's letter balance sees it."""
    options = tuple((x, x) for x in letters)
    return Item(f"{task}-{difficulty}-{n}", task, "lm", difficulty, "choice", "", options, frozenset(gold))


def rows(letters_4way: str, letters_8way: str, task: str = "env_how") -> list[Item]:
    return [
        choice(task, d, x, LETTERS, n)
        for d, letters in (("4way", letters_4way), ("8way", letters_8way))
        for n, x in enumerate(letters)
    ]


def test_qc_catches_a_letter_that_follows_the_difficulty_while_pooled_counts_look_perfect() -> None:
    # what the old placement produced: every 4-way gold A or C, every 8-way gold B or D
    report = balance(rows("AC" * 10, "BD" * 10))["env_how"]
    assert report["chi2_p"] == 1.0  # pooled, it is perfectly uniform
    assert report["difficulty_independence_p"] < 0.001
    assert report["4way_chi2_p"] < 0.01 and report["8way_chi2_p"] < 0.01
    fair = balance(rows("ABCD" * 5, "DCBA" * 5))["env_how"]
    assert fair["difficulty_independence_p"] > 0.5 and fair["4way_chi2_p"] == 1.0


def test_qc_reports_a_constant_letter() -> None:
    report = balance(rows("A" * 20, ""))["env_how"]
    assert report["A"] == 20 and report["chi2_p"] < 0.001 and report["difficulty_independence_p"] == 1.0


def test_three_option_rows_are_uniform_over_their_own_letters() -> None:
    rows_3 = [choice("env_where", d, x, "ABC", n) for d in ("4way", "8way") for n, x in enumerate("ABC" * 6)]
    report = balance(rows_3)["env_where"]
    assert "D" not in report and report["chi2_p"] == 1.0 and report["4way_chi2_p"] == 1.0
    # beside a 4-option task, the 3-option task reports D too, never as an answer
    mixed = balance([*rows_3, *rows("ABCD", "")])["env_where"]
    assert mixed["D"] == 0 and mixed["chi2_p"] == 1.0
    skewed = balance([r for r in rows_3 if r.gold != {"C"}])["env_where"]
    assert skewed["chi2_p"] < 0.01 and skewed["4way_chi2_p"] < 0.05


def test_no_visible_count_keeps_more_than_its_share_per_mission_kind() -> None:
    from skyqa.families.dualcog_video.balance import count_surplus

    # each row a landmark of its own (the paired case: test_dualcog_video_validity)
    rows = [(f"a{i}", f"a{i}", "atomic", 1) for i in range(5)] + [
        ("a5", "a5", "atomic", 0),
        ("a6", "a6", "atomic", 2),
    ]
    rows += [(f"c{i}", f"c{i}", "composite", i % 3) for i in range(6)]
    dropped = count_surplus(rows)
    # atomic: every count as frequent as its rarest (one each); composite is already even
    assert len(dropped) == 4 and all(d.startswith("a") for d in dropped)
    kept = [c for s, _, k, c in rows if k == "atomic" and s not in dropped]
    assert sorted(kept) == [0, 1, 2] and dropped == count_surplus(list(reversed(rows)))
