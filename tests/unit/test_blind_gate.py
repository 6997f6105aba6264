"""The blind gate: solvers that never see a pixel, and the leaks they must catch.

Each planted leak is a release that a real generator bug produced or could produce; the fair
control is built the same way with the leak left out, so every test fails if its check goes.
"""

from __future__ import annotations

import numpy as np
import pytest
from partial_models import partial_model
from skyqa.contracts.qa import ImageRow, Option, VideoRow
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO, Item
from skyqa.families.dualcog_image.placement import LETTERS

from services.qa_generator import gate, qc

pytestmark = pytest.mark.unit

SPACE = ["Turn left", "Turn right", "Climb", "Descend"]
N_LANDMARKS = 60


def release(
    seed: int = 0,
    letter: str | None = None,
    never: str | None = None,
    constant: str | None = None,
    box: list[float] | None = None,
    descriptions: dict[int, str] | None = None,
) -> list[ImageRow]:
    """Two env_how rows per landmark, balanced labels and letters unless a leak is planted."""
    rng = np.random.default_rng(seed)
    labels = [SPACE[i % 4] for i in range(2 * N_LANDMARKS)]
    if never:
        labels = [x if x != never else SPACE[(SPACE.index(x) + 1) % 4] for x in labels]
    labels = [constant or labels[i] for i in rng.permutation(len(labels))]
    letters = [i % 4 for i in rng.permutation(2 * N_LANDMARKS)]
    rows = []
    for i, gold in enumerate(labels):
        lm = i // 2
        others = [x for x in SPACE if x != gold]
        others = [others[j] for j in rng.permutation(3)]
        pos = LETTERS.index(letter) if letter else letters[i]
        order = [*others[:pos], gold, *others[pos:]]
        x0, y0 = rng.uniform(0.0, 0.6, 2)
        w, h = rng.uniform(0.1, 0.4, 2)
        rows.append(
            partial_model(
                ImageRow,
                sample_id=f"row{i}",
                task_type="env_how",
                landmark_id=f"lm{lm}",
                landmark_description=(descriptions or {}).get(lm, f"landmark number {lm}"),
                landmark_category="building",
                difficulty="4way",
                prompt_text="Image 1 shows the Front facade of the landmark. Which way should you fly?",
                label_options=[Option(option_id=LETTERS[k], label=lab) for k, lab in enumerate(order)],
                answer_option_id=LETTERS[pos],
                answer_label=gold,
                answer_bbox_xyxy_norm=box or [float(x0), float(y0), float(x0 + w), float(y0 + h)],
            )
        )
    return rows


def items(rows: list[ImageRow], video: list[VideoRow] | None = None) -> list[Item]:
    return [DUALCOG_IMAGE.item(r) for r in rows] + [DUALCOG_VIDEO.item(r) for r in video or []]


def run(rows: list[ImageRow], video: list[VideoRow] | None = None) -> gate.GateResult:
    seen = items(rows, video)
    return gate.run_gate(seen, qc.letter_balance(seen))


def test_a_fair_release_passes_and_reports_every_solver() -> None:
    result = run(release())
    assert result.passed, result.failures
    task = result.tasks["env_how"]
    assert set(task.solvers) == {"letter_prior", "label_prior", "text_model"}
    for s in task.solvers.values():
        assert s.chance == 0.25 and s.ci[0] <= s.score <= s.ci[1] and s.score < 0.4
    assert task.box_prior_acc50 is not None and task.box_prior_acc50 <= gate.BOX_PRIOR_MAX
    assert task.label_chi2_p["4way"] > 0.05


def test_gold_always_a_fails_on_the_answer_position() -> None:
    result = run(release(letter="A"))
    assert not result.passed
    assert any("letter_prior scores 1.000" in f and "answer position" in f for f in result.failures)
    assert any("gold letters fail" in f for f in result.failures)
    # dropped: only rows the label prior gets right too (the most frequent label elsewhere)
    solved = set(result.solved_by_all)
    assert 0 < len(solved) < 0.5 * N_LANDMARKS * 2
    # the per-row outcomes the QC ledger records: every gated row, with the solvers right on it
    assert set(result.right_by) == {r.sample_id for r in release(letter="A")}
    assert all("letter_prior" in result.right_by[s] for s in result.right_by)
    answering = {name for names in result.right_by.values() for name in names}
    assert all(set(result.right_by[s]) == answering for s in solved)
    assert any(set(names) < answering for names in result.right_by.values())


def test_rows_every_solver_answers_are_listed_for_dropping() -> None:
    rows = release(letter="A", constant="Climb")
    assert set(run(rows).solved_by_all) == {r.sample_id for r in rows}


def test_a_label_that_is_never_the_answer_fails_with_its_name() -> None:
    result = run(release(never="Descend"))
    assert not result.passed
    assert any("never the answer: Descend" in f and "gold label distribution" in f for f in result.failures)


def test_a_constant_box_fails_on_landmark_placement() -> None:
    result = run(release(box=[0.3, 0.3, 0.7, 0.7]))
    assert result.tasks["env_how"].box_prior_acc50 == 1.0
    assert any("constant box" in f and "landmark placement" in f for f in result.failures)


def test_a_description_shared_by_two_landmarks_fails() -> None:
    result = run(release(descriptions={3: "gray office tower", 7: "Gray office tower "}))
    assert result.failures == [
        "landmarks lm3, lm7 share the description 'gray office tower'; leaking feature: ambiguous reference"
    ]


def test_text_that_names_the_answer_is_learned_across_landmarks() -> None:
    rows = release()
    for r in rows:  # a prompt that gives the answer away, the way a template bug would
        r.prompt_text += f" Hint: {r.answer_label.lower()}."
    result = run(rows)
    text = result.tasks["env_how"].solvers["text_model"]
    assert text.score > 0.9 and text.p_value < gate.ALPHA
    assert any("text_model" in f and "prompt and option text" in f for f in result.failures)


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


def test_a_gold_option_that_names_its_parts_fails_on_option_structure() -> None:
    leaky = gate.run_gate(items([], joint_rows(named=True)), {})
    best = leaky.tasks["self_instance_recognition_joint"].solvers["most_specific"]
    assert best.score > 0.9 and any("most_specific" in f and "option structure" in f for f in leaky.failures)
    fair = gate.run_gate(items([], joint_rows(named=False)), {})
    assert not any("most_specific" in f for f in fair.failures), fair.failures
