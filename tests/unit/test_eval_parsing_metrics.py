"""A regression corpus of tricky replies, and metrics on fixtures with known answers."""

from __future__ import annotations

from typing import Any

import pytest
from rows import image_row, video_row
from skyqa import scoring
from skyqa.answers import Parsed, parse_choice, parse_joint, parse_visibility
from skyqa.contracts.qa import ImageRow
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO
from skyqa.scoring import iou, set_f1

from services.evaluator import metrics as M

IDS = ["A", "B", "C", "D"]
LABELS = ["Front", "Front-Left", "Right", "Back"]


@pytest.mark.parametrize(
    ("text", "kind", "stage", "option"),
    [
        ('{"answer_option_id": "B", "bbox_xyxy_norm": [0.1, 0.2, 0.3, 0.4]}', "choice", "strict_json", "B"),
        ('```json\n{"answer_option_id": "c"}\n```', "choice", "embedded_json", "C"),
        (
            '<think>maybe A? {"answer_option_id": "A"}</think>{"answer_option_id": "D"}',
            "choice",
            "strict_json",
            "D",
        ),
        ("Looking at the image, the answer is (C).", "choice", "answer_cue", "C"),
        ("A drone sees a building. Answer: B", "choice", "answer_cue", "B"),  # "A" as an article
        ("The landmark is at the front-left of the UAV.", "choice", "option_text", "B"),
        ("**D**", "choice", "bare_letter", "D"),
        ("A", "choice", "bare_letter", "A"),
        ('{"answer_option_id": "E"}', "unparseable", "", ""),  # not a listed option
        ("I cannot determine the direction from these images.", "abstain", "abstain_cue", ""),
        ("A or B, hard to say", "unparseable", "", ""),  # never a guess
        ("", "unparseable", "", ""),
    ],
)
def test_choice_parsing_names_its_stage_and_never_guesses(
    text: str, kind: str, stage: str, option: str
) -> None:
    p = parse_choice(text, IDS, LABELS)
    assert (p.kind, p.stage, p.option) == (kind, stage, option)


def test_boxes_are_validated_not_rescaled() -> None:
    assert parse_choice('{"answer_option_id": "A", "bbox_xyxy_norm": [0.5, 0.6, 0.1, 0.2]}', IDS).bbox == [
        0.1,
        0.2,
        0.5,
        0.6,
    ]
    assert parse_choice('{"answer_option_id": "A", "bbox_xyxy_norm": [100, 100, 400, 400]}', IDS).bbox is None
    assert parse_choice('{"answer_option_id": "A", "bbox_xyxy_norm": "0.1 0.2"}', IDS).bbox is None
    assert parse_choice("<think>unfinished", IDS).truncated


def test_joint_and_visibility_replies() -> None:
    j = parse_joint(
        '{"answers": [{"option_id": "B", "intervals_sec": [[3, 1], {"start_sec": 4, "end_sec": 6}]}, "C"]}',
        IDS,
    )
    assert j.options == ["B", "C"] and j.intervals["B"] == [[1.0, 3.0], [4.0, 6.0]] and j.intervals["C"] == []
    v = parse_visibility('{"visible_count": 2, "visible_intervals_sec": [[0, 1.5], [3, 4]]}')
    assert (v.count, v.count_intervals, v.stage) == (2, [[0.0, 1.5], [3.0, 4.0]], "strict_json")
    assert parse_visibility('{"visible_count": -1}').kind == "unparseable"
    assert parse_visibility("It appears 3 times.").count == 3


def test_iou_tiou_and_greedy_matching_on_known_fixtures() -> None:
    assert iou([0, 0, 0.5, 0.5], [0.25, 0.25, 0.75, 0.75]) == pytest.approx(1 / 7)
    assert iou(None, [0, 0, 1, 1]) == 0.0
    assert scoring.tiou([0, 10], [5, 15]) == pytest.approx(1 / 3)
    # one gold matched at 0.6, the other prediction misses: P = 1/2, R = 1/2
    assert scoring.match_prf([[0, 10], [20, 30]], [[0, 6], [50, 60]], 0.5) == pytest.approx((0.5, 0.5, 0.5))
    assert scoring.match_prf([[0, 10]], [[0, 10], [0, 9]], 0.5)[0] == pytest.approx(0.5)  # one-to-one
    assert scoring.mean_best_tiou([[0, 10], [20, 30]], [[0, 5]]) == pytest.approx(0.25)
    assert set_f1({"A", "B"}, {"B", "C"}) == pytest.approx(0.5)


def test_bootstrap_resamples_clusters_with_a_seed() -> None:
    values = [1, 1, 1, 0, 0, 0]
    clusters = ["a", "a", "a", "b", "b", "b"]
    lo, hi = M.bootstrap_ci(values, clusters, b=500, seed=1)
    assert (lo, hi) == (0.0, 1.0)  # two clusters: every resample is all-a, all-b or mixed
    assert M.bootstrap_ci(values, clusters, b=500, seed=1) == (lo, hi)
    tight = M.bootstrap_ci([1] * 50, [str(i) for i in range(50)])
    assert tight == (1.0, 1.0)


def test_scores_keep_failures_in_the_denominator() -> None:
    options = [{"option_id": x, "label": lab} for x, lab in zip(IDS, LABELS, strict=True)]
    row = image_row(label_options=options, answer_option_id="B", answer_bbox_xyxy_norm=[0.1, 0.1, 0.5, 0.5])

    def score(r: ImageRow, p: Parsed) -> dict[str, Any]:
        return DUALCOG_IMAGE.score(r, p, False)

    good = score(row, parse_choice('{"answer_option_id": "B", "bbox_xyxy_norm": [0.1, 0.1, 0.5, 0.5]}', IDS))
    assert good["joint_correct"] == 1.0 and good["option_correct_strict"] == 1.0
    lenient = score(row, parse_choice("Answer: B", IDS))
    assert (
        lenient["option_correct"] == 1.0
        and lenient["option_correct_strict"] == 0.0
        and lenient["bbox_iou"] == 0.0
    )
    failed = score(row, parse_choice("", IDS))
    assert failed == {k: 0.0 for k in failed}
    vis = video_row(gold_environment_answer={"visible_count": 2, "visible_intervals_sec": [[0, 2], [5, 7]]})
    s = DUALCOG_VIDEO.score(
        vis,
        parse_visibility('{"visible_count": 3, "visible_intervals_sec": [[0, 2], [5, 7], [9, 9.5]]}'),
        False,
    )
    assert s["count_exact"] == 0.0 and s["count_within1"] == 1.0 and s["count_abs_error"] == 1.0
    assert s["segment_f1@0.5"] == pytest.approx(0.8)


def test_paired_comparison_counts_the_discordant_rows_and_tests_them_exactly() -> None:
    from services.evaluator.paired import mcnemar_exact, paired_comparisons

    def item(model: str, sid: str, right: bool, **extra: object) -> dict[str, object]:
        unit = f"lm{int(sid[1:]) // 2}"
        return {"model": model, "sample_id": sid, "condition": "full", "rotation": 0, "landmark_id": unit,
                "option_correct": float(right), **extra}  # fmt: skip

    items = [item("a", f"s{i}", True) for i in range(8)] + [item("b", f"s{i}", i < 2) for i in range(8)]
    items += [item("b", "s9", True), item("a", "s0", False, condition="text_only")]  # not paired
    items += [item("a", "s1", False, rotation=1)]  # a CircularEval copy is not a base row
    (p,) = paired_comparisons(items)
    assert (p["a"], p["b"], p["rows"]) == ("a", "b", 8)
    assert (p["only_a_right"], p["only_b_right"]) == (6, 0)
    assert p["difference"] == 0.75 and p["accuracy_a"] == 1.0 and p["accuracy_b"] == 0.25
    assert p["mcnemar_p"] == pytest.approx(2 * 0.5**6)  # the exact binomial tail, both sides
    lo, hi = p["difference_ci95"]
    assert 0.0 < lo <= 0.75 <= hi <= 1.0
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(3, 3) == pytest.approx(1.0)
