"""The blind gate: solvers that never see a pixel, and the leaks they must catch.

Each planted leak is one a real generator bug produced (issue #42's audit of a 40-landmark
release) or could produce; the fair control is built the same way with the leak left out, so
every test fails if its check goes. A leaking task is withheld with the reason that names its
feature, and the fair tasks beside it pass.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from partial_models import partial_model
from skyqa.contracts.qa import ImageRow, Option, VideoRow
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO, Item
from skyqa.families.dualcog_image.placement import LETTERS

from services.qa_generator import gate, significance

pytestmark = pytest.mark.unit

SPACE = ["Turn left", "Turn right", "Climb", "Descend"]
PLACES = ["harbour", "meadow", "quarry", "orchard", "viaduct", "lighthouse", "windmill", "granary"]
N_UNITS = 40
ROWS = 2 * N_UNITS
Build = Callable[[np.random.Generator, int], tuple[str, list[str], int]]  # question, labels, gold index


def task_items(task: str, build: Build, seed: int = 0, units: int = N_UNITS, per_unit: int = 2) -> list[Item]:
    """Rows of one task, ``per_unit`` per unit; ``build`` gives the question, the option labels
    and the gold's index; the gold letter is drawn uniformly unless ``build`` placed it."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(units * per_unit):
        q, labels, gold = build(rng, i)
        options = tuple((LETTERS[k], lab) for k, lab in enumerate(labels))
        prompt = q + "\nOptions:\n" + "\n".join(f"{o}. {lab}" for o, lab in options)
        out.append(
            Item(
                f"{task}{i}",
                task,
                f"{task}-u{i // per_unit}",
                "4way",
                "choice",
                prompt,
                options,
                frozenset([LETTERS[gold]]),
                family="test",
                texts=tuple(labels),
            )
        )
    return out


def shuffled(rng: np.random.Generator, gold: str, others: list[str]) -> tuple[list[str], int]:
    labels = [gold, *others]
    order = [int(i) for i in rng.permutation(len(labels))]
    return [labels[i] for i in order], order.index(0)


def fair(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
    gold = SPACE[i % 4]
    labels, at = shuffled(rng, gold, [x for x in SPACE if x != gold])
    return "Image 1 shows the landmark. Which way should you fly?", labels, at


def run(items: list[Item]) -> gate.GateResult:
    return gate.run_gate(items)


def withheld_for(result: gate.GateResult, task: str, feature: str) -> bool:
    return any(feature in why for why in result.withheld.get(task, []))


# -- fair releases -----------------------------------------------------------------------------


def test_a_fair_release_passes_and_reports_every_solver() -> None:
    result = run(task_items("env_how", fair))
    assert result.passed, result.failures
    task = result.tasks["env_how"]
    assert {"letter_prior", "label_prior", "text_model", "structure_model", "memory", "longest"} <= set(
        task.solvers
    )
    for s in task.solvers.values():
        assert s.chance == 0.25 and s.ci[0] <= s.score <= s.ci[1] and s.score < 0.4
    assert task.label_chi2_p["4way"] > 0.05
    assert task.status == "unverified" and task.detectable > significance.MIN_LEAK  # 120 rows


def test_fair_releases_pass_at_the_stated_rate() -> None:
    """Twelve fair tasks of random golds: the adjustment over the release keeps the chance of
    withholding any of them under alpha (uncorrected, a sound release this size failed often)."""

    def noisy(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = SPACE[int(rng.integers(4))]
        labels, at = shuffled(rng, gold, [x for x in SPACE if x != gold])
        return "Which way should you fly?", labels, at

    items = [it for k in range(12) for it in task_items(f"t{k}", noisy, seed=k, units=20)]
    result = run(items)
    assert result.passed, result.failures
    raw = [t.p for g in result.tasks.values() for t in g.tests]
    assert min(raw) < gate.ALPHA  # uncorrected, some test of this many rejects by chance


# -- planted leaks, each caught with the feature that leaks ------------------------------------


def test_neighbour_distractors_are_withheld_as_option_neighbourhood() -> None:
    grid = [f"{r} {c}" for r in ("top", "middle", "bottom") for c in ("left", "centre", "right")]

    def near(cell: str, other: str) -> int:
        (r1, c1), (r2, c2) = cell.split(), other.split()
        return abs(["top", "middle", "bottom"].index(r1) - ["top", "middle", "bottom"].index(r2)) + abs(
            ["left", "centre", "right"].index(c1) - ["left", "centre", "right"].index(c2)
        )

    def neighbours(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = grid[int(rng.integers(9))]
        ranked = sorted((x for x in grid if x != gold), key=lambda x: (near(gold, x), x))
        labels, at = shuffled(rng, gold, ranked[:3])
        return "Where in UAV2's image is the red car?", labels, at

    def anywhere(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = grid[int(rng.integers(9))]
        others = [grid[int(j)] for j in rng.permutation(9) if grid[int(j)] != gold][:3]
        labels, at = shuffled(rng, gold, others)
        return "Where in UAV2's image is the red car?", labels, at

    result = run(task_items("leaky", neighbours) + task_items("fair", anywhere, seed=1))
    assert "leaky" in result.withheld and "fair" not in result.withheld
    assert withheld_for(result, "leaky", "neighbourhood") or withheld_for(result, "leaky", "option structure")


def test_a_gold_rank_window_is_withheld_on_the_rank() -> None:
    def window(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = int(rng.integers(1, 9))
        labels, at = shuffled(rng, str(gold), [str(gold - 1), str(gold + 1), str(gold + 2)])
        return "How many vehicles can be made out in UAV3's view?", labels, at

    result = run(task_items("counting", window))
    assert withheld_for(result, "counting", "rank among numeric options"), result.failures


def test_one_option_of_another_form_is_withheld_on_form() -> None:
    def odd(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        places = ["the red tower", "the gray bridge", "the blue tank", "the tall mast", "the green tree"]
        picked = [places[int(j)] for j in rng.permutation(5)[:4]]
        labels, at = shuffled(
            rng,
            f"it had reached {picked[0]}",
            [f"to avoid {picked[1]}", f"to see {picked[2]}", f"to pass {picked[3]}"],
        )
        return "Why did you turn left at 12 s?", labels, at

    result = run(task_items("causal", odd))
    assert withheld_for(result, "causal", "option form") or withheld_for(result, "causal", "wording")


def test_a_fact_asked_in_several_units_is_withheld_on_memory() -> None:
    """The same question about the scene, asked in several missions, has the same answer:
    read from the other missions' rows (issue #42: "closest to the gray billboard?")."""
    things = ["gray billboard", "red tower", "blue tank", "white mast", "green kiosk", "tall crane"]
    names = ["water tower", "office block", "church", "bridge", "fountain", "stadium", "depot"]
    closest = {t: names[(k * 3) % len(names)] for k, t in enumerate(things)}

    def repeated(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        asked = things[int(rng.integers(len(things)))]
        others = [n for n in names if n != closest[asked]]
        labels, at = shuffled(rng, closest[asked], [others[int(j)] for j in rng.permutation(len(others))[:3]])
        return f"Which landmark is closest to the {asked}?", labels, at

    result = run(task_items("recall", repeated))
    assert withheld_for(result, "recall", "a fact answered in another unit"), result.failures


def test_wording_that_decides_the_answer_is_withheld_on_wording() -> None:
    space = ["farther", "closer", "about as far", "out of view"]

    def worded(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        motion = ["descended", "climbed", "turned left", "turned right"][i % 4]
        gold = space[i % 4]  # the motion named in the question decides the answer
        labels, at = shuffled(rng, gold, [x for x in space if x != gold])
        return f"After you {motion}, how far is the water tower compared with before?", labels, at

    result = run(task_items("proximity", worded))
    assert withheld_for(result, "proximity", "wording") or withheld_for(
        result, "proximity", "similar question"
    )


def test_a_shared_description_withholds_its_units() -> None:
    items = task_items("t", fair)
    named = [
        Item(
            **{**it.__dict__, "description": "gray office tower" if it.unit in ("t-u3", "t-u7") else it.unit}
        )
        for it in items
    ]
    result = run(named)
    assert set(result.withheld_units) == {"t-u3", "t-u7"}
    assert "ambiguous reference" in result.withheld_units["t-u3"] and "t" not in result.withheld


def test_gold_always_a_is_withheld_on_the_answer_position() -> None:
    def always_a(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = SPACE[i % 4]
        others = [x for x in SPACE if x != gold]
        return "Which way should you fly?", [gold, *[others[int(j)] for j in rng.permutation(3)]], 0

    result = run(task_items("env_how", always_a))
    assert withheld_for(result, "env_how", "answer position (gold letter)")


def test_a_label_that_is_never_the_answer_is_withheld_with_its_name() -> None:
    def never(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = SPACE[i % 3]  # "Descend" is offered, never the answer
        labels, at = shuffled(rng, gold, [x for x in SPACE if x != gold])
        return "Which way should you fly?", labels, at

    result = run(task_items("env_how", never))
    assert withheld_for(result, "env_how", "never the answer: Descend")


def test_a_selection_by_a_rule_is_withheld_as_avoid_that_rule() -> None:
    """Rows kept only where the longest option is wrong (what dropping the rows a solver
    answers does): avoiding the longest option now beats chance."""
    words = ["go", "fly up", "turn back now", "circle the mast twice", "land on the roof"]

    def planted(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        while True:
            picked = [words[int(j)] for j in rng.permutation(5)[:4]]
            at = int(rng.integers(4))
            if max(picked, key=len) != picked[at]:
                return "What should you do next?", picked, at

    def kept(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        picked = [words[int(j)] for j in rng.permutation(5)[:4]]
        return "What should you do next?", picked, int(rng.integers(4))

    result = run(task_items("next", planted) + task_items("fair_next", kept, seed=3))
    assert withheld_for(result, "next", "avoiding its pick beats chance"), result.failures
    assert "fair_next" not in result.withheld


# -- tasks of the DualCog families, seen through their own rows --------------------------------


def image_release(box: list[float] | None = None) -> list[ImageRow]:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(ROWS):
        gold = SPACE[i % 4]
        others = [x for x in SPACE if x != gold]
        pos = int(rng.integers(4))
        order = [*[others[int(j)] for j in rng.permutation(3)][:pos], gold]
        order += [x for x in others if x not in order]
        x0, y0 = rng.uniform(0.0, 0.6, 2)
        w, h = rng.uniform(0.1, 0.4, 2)
        rows.append(
            partial_model(
                ImageRow,
                sample_id=f"row{i}",
                task_type="env_how",
                landmark_id=f"lm{i // 2}",
                landmark_description=f"landmark number {i // 2}",
                landmark_category="building",
                difficulty="4way",
                prompt_text="Image 1 shows the Front facade of the landmark. Which way should you fly?",
                label_options=[Option(option_id=LETTERS[k], label=lab) for k, lab in enumerate(order)],
                answer_option_id=LETTERS[order.index(gold)],
                answer_label=gold,
                answer_bbox_xyxy_norm=box or [float(x0), float(y0), float(x0 + w), float(y0 + h)],
            )
        )
    return rows


def test_a_constant_box_is_withheld_on_landmark_placement() -> None:
    items = [DUALCOG_IMAGE.item(r) for r in image_release(box=[0.3, 0.3, 0.7, 0.7])]
    result = run(items)
    assert result.tasks["env_how"].box_prior_acc50 == 1.0
    assert withheld_for(result, "env_how", "landmark placement")
    fair_result = run([DUALCOG_IMAGE.item(r) for r in image_release()])
    assert fair_result.passed, fair_result.failures


def joint_rows(named: bool) -> list[VideoRow]:
    """Multi-select behaviour rows; with ``named``, the gold composite option lists its parts."""
    rng = np.random.default_rng(1)
    parts = ["approach, descending 5 m", "circle clockwise 90°", "depart, rising 5 m", "spiral out 180°"]
    rows = []
    for i in range(40):
        gold = [parts[j] for j in sorted(rng.permutation(4)[:2])]
        composite = "a survey mission: " + (", ".join(g.split(",")[0] for g in gold) if named else "steps")
        labels = [composite, *parts, "figure-eight over the landmark", "comet loop", "lawnmower survey"]
        order = rng.permutation(len(labels))
        options = [
            Option(option_id=LETTERS[k] if k < 4 else "EFGH"[k - 4], label=labels[j])
            for k, j in enumerate(order)
        ]
        gold_ids = sorted(o.option_id for o in options if o.label in (composite, *gold))
        rows.append(
            partial_model(
                VideoRow,
                sample_id=f"v{i}",
                form="self_instance_recognition_joint",
                landmark_id=f"lm{i // 2}",
                landmark_description=f"landmark number {i // 2}",
                landmark_category="building",
                mission_kind="composite",
                prompt_text="Which of the following actions have you performed?",
                choice_options=options,
                answer_option_ids=gold_ids,
            )
        )
    return rows


def test_a_gold_option_that_names_its_parts_is_withheld_on_option_structure() -> None:
    leaky = gate.run_gate([DUALCOG_VIDEO.item(r) for r in joint_rows(named=True)])
    best = leaky.tasks["self_instance_recognition_joint"].solvers["most_specific"]
    assert best.score > 0.9
    assert withheld_for(leaky, "self_instance_recognition_joint", "the gold option names the others")
    fair_result = gate.run_gate([DUALCOG_VIDEO.item(r) for r in joint_rows(named=False)])
    assert not any("most_specific" in f for f in fair_result.failures), fair_result.failures


def test_a_task_of_one_unit_gets_the_tests_that_learn_nothing_and_is_unverified() -> None:
    def always_a(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        gold = SPACE[i % 4]
        others = [x for x in SPACE if x != gold]
        return "Which way should you fly?", [gold, *[others[int(j)] for j in rng.permutation(3)]], 0

    alone = run(task_items("lonely", always_a, units=1, per_unit=60))
    assert withheld_for(alone, "lonely", "answer position (gold letter)")
    fair_alone = run(task_items("lonely", fair, units=1, per_unit=60))
    assert fair_alone.tasks["lonely"].status == "unverified" and "lonely" not in fair_alone.withheld
    assert "text_model" not in fair_alone.tasks["lonely"].solvers  # nothing to learn from


def test_a_leak_of_the_generator_is_not_washed_out_by_drawing_again() -> None:
    """A task drawn again is also tested on all its draws together: a generator that leaks in
    every draw stays withheld even when one draw alone passes by chance."""

    def weak_leak(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        words = ["go", "fly up", "turn back now", "circle the mast twice"]
        picked = [words[int(j)] for j in rng.permutation(4)]
        longest = max(range(4), key=lambda j: len(picked[j]))
        at = longest if rng.random() < 0.5 else int(rng.integers(4))  # the longest is gold 62 %
        return "What should you do next?", picked, at

    first = task_items("next", weak_leak, seed=1, units=40, per_unit=1)
    second = [
        Item(**{**it.__dict__, "sample_id": f"{it.sample_id}_draw1"})
        for it in task_items("next", weak_leak, seed=2, units=40, per_unit=1)
    ]
    alone = gate.run_gate(second, {"next": 1})
    together = gate.run_gate(second, {"next": 1}, {"next": first})
    names = {t.name for t in together.tasks["next"].tests}
    assert "longest over draws 0-1" in names and "longest over draws 0-1" not in {
        t.name for t in alone.tasks["next"].tests
    }
    p_alone = next(t.p for t in alone.tasks["next"].tests if t.name == "longest")
    p_together = next(t.p for t in together.tasks["next"].tests if t.name == "longest over draws 0-1")
    assert p_together < p_alone


def test_a_first_draw_that_put_every_gold_at_a_does_not_hold_back_a_fair_second() -> None:
    """Where a draw put its golds is that draw's own: pooled over draws the rows are read
    without their letters, so a fair redraw of a task whose first draw leaked by position ships."""

    def places(rng: np.random.Generator) -> list[str]:
        return [PLACES[int(j)] for j in rng.permutation(len(PLACES))[:4]]

    def at_a(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        return "Which place did you pass?", places(rng), 0

    def even(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        return "Which place did you pass?", places(rng), int(rng.integers(4))

    first = task_items("passed", at_a, seed=1, units=40, per_unit=2)
    assert withheld_for(run(first), "passed", "answer position (gold letter)")
    second = [
        Item(**{**it.__dict__, "sample_id": f"{it.sample_id}_draw1"})
        for it in task_items("passed", even, seed=2, units=40, per_unit=2)
    ]
    together = gate.run_gate(second, {"passed": 1}, {"passed": first})
    assert "passed" not in together.withheld, together.tasks["passed"].tests
    assert any(t.name.endswith("over draws 0-1") for t in together.tasks["passed"].tests)


def test_a_family_leak_withholds_only_the_tasks_that_show_it() -> None:
    """Five tasks lean on the longest option, five are fair: the family's pooled test rejects,
    and Benjamini-Bogomolov withholds tasks whose own rows show the habit, not the fair ones."""
    words = ["go", "fly up", "turn back now", "circle the mast twice"]

    def leaning(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        picked = [words[int(j)] for j in rng.permutation(4)]
        longest = max(range(4), key=lambda j: len(picked[j]))
        return "What next?", picked, longest if rng.random() < 0.45 else int(rng.integers(4))

    def even(rng: np.random.Generator, i: int) -> tuple[str, list[str], int]:
        return "What next?", [words[int(j)] for j in rng.permutation(4)], int(rng.integers(4))

    items = [it for k in range(5) for it in task_items(f"lean{k}", leaning, seed=k, units=20)]
    items += [it for k in range(5) for it in task_items(f"fair{k}", even, seed=10 + k, units=20)]
    result = run(items)
    assert not any(t.startswith("fair") for t in result.withheld), result.withheld
    assert any(t.startswith("lean") for t in result.withheld), result.families["test"].failures


def test_a_family_that_fails_withholds_the_task_it_points_at() -> None:
    """procedural_4242_8: eleven visibility counts, all 1, beside a multi-select task of the same
    family. Too few rows for the task stage across the release; the family's pooled test
    rejects, and no task's own rows pass Benjamini-Bogomolov's scaled level. The family failed,
    so the task its rejecting solvers point at is withheld instead of shipping everything."""

    def counts(n: int) -> list[Item]:
        return [
            Item(
                f"visible{i}",
                "visible",
                f"visible-u{i}",
                "atomic",
                "count",
                "How many times?",
                (),
                frozenset("1"),
            )
            for i in range(n)
        ]

    def multi(n: int) -> list[Item]:
        rng = np.random.default_rng(1)
        out = []
        for i in range(n):
            opts = tuple((c, f"object {w}") for c, w in zip("ABCD", rng.permutation(8)[:4], strict=False))
            gold = frozenset(c for c in "ABCD" if rng.random() < 0.4) or frozenset("A")
            out.append(Item(f"joint{i}", "joint", f"joint-u{i}", "m", "multi", "Which objects?", opts, gold))
        return out

    items = [Item(**{**it.__dict__, "family": "video"}) for it in counts(11) + multi(30)]
    for k in range(4):
        for j in range(2):
            items += [
                Item(**{**it.__dict__, "family": f"other{k}"})
                for it in task_items(f"fair{k}_{j}", fair, seed=10 * k + j, units=20)
            ]
    result = run(items)
    assert result.tasks["visible"].p_value > 0.025  # not rejected in the task stage
    assert result.families["video"].failures
    assert set(result.withheld) == {"visible"}
    assert any("family video pooled" in why for why in result.withheld["visible"])


# -- the statistics ----------------------------------------------------------------------------


def test_benjamini_hochberg_matches_the_step_up_rule() -> None:
    p = {"a": 0.001, "b": 0.008, "c": 0.039, "d": 0.041, "e": 0.9}
    adjusted = significance.benjamini_hochberg(p)
    assert adjusted["a"] == pytest.approx(0.005) and adjusted["b"] == pytest.approx(0.02)
    assert adjusted["c"] == pytest.approx(0.05125) and adjusted["d"] == pytest.approx(0.05125)
    assert adjusted["e"] == pytest.approx(0.9)


def test_the_offered_chi_square_holds_its_level_where_rows_offer_few_of_many_labels() -> None:
    """Each row offers 4 of 12 labels and its gold is one of them at random: the test rejects
    at about its level (Pearson's statistic rejected several times too rarely)."""
    rng = np.random.default_rng(0)
    labels = [f"l{k}" for k in range(12)]
    ps = []
    for _ in range(400):
        rows = []
        for _ in range(40):
            offered = [labels[int(j)] for j in rng.permutation(12)[:4]]
            rows.append((offered, offered[int(rng.integers(4))]))
        ps.append(significance.offered_chi2(rows))
    assert 0.02 < np.mean(np.array(ps) < 0.1) < 0.2


def test_random_picks_catch_golds_as_the_exact_null_says() -> None:
    draws = [(8, 2, 3)] * 30
    rng = np.random.default_rng(1)
    sims = np.array([sum(int(np.sum(rng.permutation(8)[:3] < 2)) for _ in draws) for _ in range(4000)])
    for hits in (20, 25, 30):
        assert abs(significance.hits_upper(draws, hits) - np.mean(sims >= hits)) < 0.02


def test_the_detectable_leak_shrinks_with_rows_and_marks_small_tasks_unverified() -> None:
    small, large = significance.detectable(30, 0.25, 0.05), significance.detectable(400, 0.25, 0.05)
    assert small > significance.MIN_LEAK >= large
    # an exact test at that leak: 80 % of draws reject
    rng = np.random.default_rng(0)
    hits = rng.binomial(400, 0.25 + large, 4000)
    rejected = np.mean([significance.upper(int(h), 400, 0.25) <= 0.05 for h in hits])
    assert rejected >= significance.POWER - 0.03
