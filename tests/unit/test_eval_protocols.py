"""Evaluation protocols on fixtures with known answers: option rotation, step matching,
circular and process summaries, access gaps, task correlation, the TPM limiter."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from rows import image_row, video_row
from skyqa.contracts.qa import ReasoningStep, VideoRow
from skyqa.families import DUALCOG_IMAGE, DUALCOG_VIDEO
from skyqa.families.urbanvideo.family import FAMILY as NAV_FAMILY
from skyqa.models import openai_http
from skyqa.steps import score_steps, step_correct
from skyqa.v1 import model_pb2

from services.evaluator.conditions import rows_for
from services.evaluator.leaderboard import access_gaps, circular_summary, leaderboard, task_correlation
from services.evaluator.questions import Question
from services.evaluator.steps import summarize_steps

pytestmark = pytest.mark.unit


def test_rotations_move_every_label_through_every_letter() -> None:
    row = image_row(user_prompt="Where?\nOptions:\nA. Front\nB. Left\nC. Right\nD. Back")
    image = Question(DUALCOG_IMAGE, row, "s1")
    video = Question(DUALCOG_VIDEO, video_row(), "v1")
    rots = rows_for("circular", [image, video])  # a count has no letter to rotate
    assert [q.sample_id for q in rots] == [f"s1#rot{k}" for k in range(4)]
    assert [(q.base_sample_id, q.rotation) for q in rots] == [("s1", k) for k in range(4)]
    assert rots[0].user == row.user_prompt and rots[0].row.answer_option_id == "C"
    assert [q.row.answer_option_id for q in rots] == ["C", "B", "A", "D"]
    for q in rots:
        gold = next(o for o in q.row.label_options if o.option_id == q.row.answer_option_id)
        assert gold.label == "Right" and f"{q.row.answer_option_id}. Right" in q.user
        assert q.user.startswith("Where?\nOptions:\n")
    assert rows_for("crop", [image, video]) == [image]  # quadrants are for stills only
    assert rows_for("text_only", [image, video]) == [image, video]


def test_step_schema_lists_the_steps_and_asks_for_them() -> None:
    (q,) = rows_for("schema_cot", [Question(DUALCOG_IMAGE, image_row(), "s1")])
    assert "1. Where is it?" in q.user and '"steps"' in q.system
    assert q.system.startswith("[TASK] t\n") and q.sample_id == "s1" == q.base_sample_id
    assert rows_for("schema_cot", [Question(DUALCOG_IMAGE, image_row(reasoning_steps=[]), "s1")]) == []


@pytest.mark.parametrize(
    ("gold", "pred", "ok"),
    [
        ("[0.100, 0.200, 0.500, 0.600]", [0.1, 0.2, 0.5, 0.62], True),
        ("[0.100, 0.200, 0.500, 0.600]", "[0.1, 0.2, 0.5, 0.6]", True),
        ("[0.100, 0.200, 0.500, 0.600]", [0.6, 0.6, 0.9, 0.9], False),
        ("[0.100, 0.200, 0.500, 0.600]", "somewhere left", False),
        ("12 degrees below", "about 15 degrees below", True),
        ("12 degrees below", "12 degrees above", False),
        ("40 degrees to the left", "25 degrees to the left", False),
        ("3 degrees to the left", "2 degrees to the right", True),  # both centred
        ("90 degrees clockwise", "90 degrees counterclockwise", False),
        ("yes, the same landmark", "Yes.", True),
        ("yes, the same landmark", "no", False),
        ("Front-Left", "front left", True),
        ("Front-Left", "Front", False),
        ("Image 3", "image 3", True),
        ("Back", None, False),
    ],
)
def test_step_answers_match_by_the_kind_of_their_gold(gold: str, pred: Any, ok: bool) -> None:
    assert step_correct(gold, pred) is ok


def test_step_scores_and_their_summary() -> None:
    gold = [
        ReasoningStep(question="q1", answer="[0.1, 0.1, 0.5, 0.5]", operation="GND"),
        ReasoningStep(question="q2", answer="Back", operation="PER"),
        ReasoningStep(question="q3", answer="Left", operation="INF"),
    ]
    a = score_steps(gold, [[0.1, 0.1, 0.5, 0.5], "Front", "Left"])
    assert a["step_correct"] == [1, 0, 1] and a["first_error"] == "PER"
    b = score_steps(gold, None)  # no steps in the reply: all wrong, grounding first
    assert b["step_correct"] == [0, 0, 0] and b["first_error"] == "GND" and b["steps_answered"] == 0.0
    c = score_steps(gold, ["[0.1, 0.1, 0.5, 0.5]", "Back", "Left"])
    s = summarize_steps([a, b, c])
    assert s["operation_accuracy"] == {"GND": pytest.approx(2 / 3, abs=1e-4), "PER": 0.3333, "INF": 0.6667}
    assert s["first_error"] == {"GND": 0.3333, "PER": 0.3333, "none": 0.3333}
    # error deviation: each operation's error minus the mean error over operations
    assert sum(s["operation_error_deviation"].values()) == pytest.approx(0.0, abs=1e-3)


def _item(base: str, rot: int, ok: bool, label: str, letter: str) -> dict[str, Any]:
    return {
        "base_sample_id": base,
        "landmark_id": base,
        "rotation": rot,
        "option_correct": float(ok),
        "pred_label": label,
        "pred_option": letter,
        "parse_kind": "choice",
    }


def test_circular_summary_on_a_known_fixture() -> None:
    items = [
        # always right: circular, consistent
        *(_item("a", k, True, "Left", "ABCD"[k]) for k in range(4)),
        # right only in rotation 0 (always says A): vanilla yes, circular no, inconsistent
        _item("b", 0, True, "Left", "A"),
        *(_item("b", k, False, "Right", "A") for k in range(1, 4)),
        # always the same wrong content: consistent but wrong
        *(_item("c", k, False, "Back", "ABCD"[k]) for k in range(4)),
    ]
    s = circular_summary(items)
    assert s["groups"] == 3
    assert s["vanilla"] == pytest.approx(2 / 3, abs=1e-4) and s["circular"] == pytest.approx(1 / 3, abs=1e-4)
    assert s["consistent"] == pytest.approx(2 / 3, abs=1e-4)
    assert s["letter_share"]["A"] == pytest.approx(6 / 12, abs=1e-4)


def _not_run(base: str, rot: int) -> dict[str, Any]:
    return {"base_sample_id": base, "landmark_id": base, "rotation": rot, "parse_kind": "not_run"}


def test_circular_summary_leaves_out_groups_the_budget_cut() -> None:
    """Issue 41.4a: a group whose rotation 0, or any other, was not run has no circular
    verdict; it used to raise KeyError('option_correct')."""
    items = [
        *(_item("a", k, True, "Left", "ABCD"[k]) for k in range(4)),
        # rotation 0 cut: its three answered rotations must not count as a vanilla or circular hit
        _not_run("b", 0),
        *(_item("b", k, True, "Right", "ABCD"[k]) for k in range(1, 4)),
        # a wrong rotation 0 and a cut rotation 2: not a circular miss either, and all its "A"s
        # would skew the letter shares
        _item("c", 0, False, "Back", "A"),
        _item("c", 1, True, "Right", "A"),
        _not_run("c", 2),
        _item("c", 3, True, "Right", "A"),
    ]
    s = circular_summary(items)
    assert (s["groups"], s["incomplete_groups"], s["count"]) == (1, 2, 1)
    assert s["vanilla"] == 1.0 and s["circular"] == 1.0 and s["consistent"] == 1.0
    assert s["letter_share"] == {"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}
    assert s["note"].startswith("2 of 3 groups left out")
    empty = circular_summary([_not_run("a", k) for k in range(4)])
    assert empty == {
        "count": 0,
        "groups": 0,
        "incomplete_groups": 1,
        "letter_share": {},
        "note": empty["note"],
    }


def test_budget_cut_rows_are_neither_scored_nor_compared() -> None:
    """Issue 41.4a beyond CircularEval: rows the budget cut stay out of means (and are counted
    as not run), and the access gap compares the rows both conditions scored."""

    def row(condition: str, sid: str, right: bool | None) -> dict[str, Any]:
        base = {"model": "m", "condition": condition, "sample_id": sid, "base_sample_id": sid,
                "rotation": 0, "task": "env_where", "landmark_id": sid, "category": "c",
                "difficulty": "4way", "parse_stage": ""}  # fmt: skip
        if right is None:
            return {**base, "parse_kind": "not_run"}
        return {**base, "parse_kind": "choice", "option_correct": float(right)}

    items = [row("full", f"s{i}", i < 2) for i in range(4)]
    items += [row("text_only", "s0", True), row("text_only", "s1", True)]
    items += [row("text_only", f"s{i}", None) for i in (2, 3)]
    # text_prior: nothing scored, so nobody has a gap over it
    items += [{**row("full", f"s{i}", None), "model": "text_prior"} for i in range(4)]
    board = leaderboard(items)
    m = next(e for e in board["models"] if e["model"] == "m")
    assert m["evidence_access"]["text_only"]["option_correct"] == 1.0
    assert m["evidence_access"]["text_only"]["not_run"] == 2
    # over s0 and s1, the model is right with and without pixels: no visual gap, not -0.5
    assert m["access_gaps"] == {"visual": 0.0} and m["access_gap_rows"] == 2
    prior = next(e for e in board["models"] if e["model"] == "text_prior")
    assert prior["image"] == {"count": 4, "not_run": 4} and "visual_gap_over_text_prior" not in m
    assert board["paired"] == []  # text_prior has no scored row to pair with


def test_access_gaps_follow_ultravr() -> None:
    acc = {
        c: {"option_correct": v}
        for c, v in [("text_only", 0.3), ("thumbnail", 0.5), ("full", 0.6), ("crop", 0.7)]
    }
    assert access_gaps(acc) == {"visual": 0.3, "resolution": 0.1, "access": 0.1}


def test_task_correlation_on_constructed_units() -> None:
    items = []
    for m, skill in (("m1", [1, 1, 0, 0, 1]), ("m2", [0, 1, 1, 0, 0])):
        for lm, s in enumerate(skill):
            items.append(
                {
                    "model": m,
                    "landmark_id": f"l{lm}",
                    "condition": "full",
                    "task": "self_where",
                    "option_correct": s,
                }
            )
            items.append(
                {
                    "model": m,
                    "landmark_id": f"l{lm}",
                    "condition": "full",
                    "task": "env_where",
                    "option_correct": s,
                }
            )
            items.append(
                {
                    "model": m,
                    "landmark_id": f"l{lm}",
                    "condition": "full",
                    "task": "env_how",
                    "option_correct": 1 - s,
                }
            )
            items.append(
                {
                    "model": m,
                    "landmark_id": f"l{lm}",
                    "condition": "full",
                    "task": "self_what",
                    "option_correct": 1,
                }
            )
    c = task_correlation(items)
    assert c["units"] == 10
    assert c["matrix"]["self_where"]["env_where"] == 1.0 and c["matrix"]["self_where"]["env_how"] == -1.0
    assert c["matrix"]["self_what"]["env_where"] is None  # constant: undefined, not 0
    assert c["across_models"]["matrix"]["self_where"]["env_where"] is None  # 2 models: too few


def nav_item(model: str, mission: str, task: str, right: float) -> dict[str, Any]:
    return {
        "model": model,
        "landmark_id": mission,
        "condition": "full",
        "task": task,
        "option_correct": right,
        "parse_kind": "choice",
        "parse_stage": "strict_json",
    }


def test_navigation_groups_and_urbanvideo_correlation_across_models() -> None:
    """Four models: causal follows sequence recall across models (as UrbanVideo-Bench found),
    duration runs against it; groups pool their tasks' questions."""
    skill = {"m1": 0.9, "m2": 0.6, "m3": 0.4, "m4": 0.1}
    items = []
    for model, s in skill.items():
        for k in range(10):
            mission = f"nav_{k}"
            items.append(nav_item(model, mission, "sequence_recall", float(k < 10 * s)))
            items.append(nav_item(model, mission, "causal", float(k < 10 * s - 1)))
            items.append(nav_item(model, mission, "duration", float(k >= 10 * s)))
    c = task_correlation(items, [NAV_FAMILY])["across_models"]
    assert c["models"] == 4
    assert c["matrix"]["sequence_recall"]["causal"] == pytest.approx(1.0, abs=0.01)
    assert c["matrix"]["sequence_recall"]["duration"] == pytest.approx(-1.0, abs=0.01)
    board = leaderboard(items, [NAV_FAMILY])
    m1 = next(e for e in board["models"] if e["model"] == "m1")
    groups = m1["per_group"]["urbanvideo_nav"]
    assert set(groups) == {"recall", "perception", "reasoning", "navigation", "all"}
    assert groups["recall"]["count"] == 10 and groups["recall"]["option_correct"] == 0.9
    assert groups["reasoning"]["option_correct"] == 0.8 and groups["perception"]["option_correct"] == 0.1
    assert groups["all"]["count"] == 30 and groups["navigation"] == {"count": 0}
    lo, hi = groups["recall"]["option_correct_ci95"]
    assert lo < 0.9 < hi or lo == hi == 0.9


def test_token_limiter_waits_for_the_bucket_and_settles(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    slept: list[float] = []

    async def fake_sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    # by dotted name: the module's `time` and `asyncio` are its imports, not its exports
    monkeypatch.setattr("skyqa.models.openai_http.time.monotonic", lambda: now[0])
    monkeypatch.setattr("skyqa.models.openai_http.asyncio.sleep", fake_sleep)
    lim = openai_http.TokenLimiter(600)  # 10 tokens per second

    async def run() -> None:
        await lim.take(600)  # the full bucket: no wait
        assert slept == []
        await lim.take(100)  # empty: 100 tokens take 10 s to come back
        assert slept == [pytest.approx(10.0)]
        lim.settle(100, 40)  # the request used 40: 60 return at once
        await lim.take(60)
        assert len(slept) == 1

    asyncio.run(run())


def test_token_estimate_counts_text_images_and_output() -> None:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (640, 480)).save(buf, "JPEG")
    req = model_pb2.GenerateRequest(system="s" * 40, prompt="p" * 360)
    req.params.max_tokens = 100
    req.images.add(data=buf.getvalue())
    assert openai_http.estimate_tokens(req) == 400 // 4 + 85 + 170 * 2 + 100


def test_joint_rows_score_composite_and_atomic_levels_like_uav_dualcog() -> None:
    from skyqa.answers import parse_joint

    from services.evaluator.metrics_csv import element_instance_f1

    labels = {
        "A": "a circular inspection mission: gradual approach, circular orbit",
        "B": "a spiral inspection mission",
        "C": "approach, descending 10 m with the camera locked on the landmark",
        "D": "circle clockwise 360° with the camera locked on the landmark",
        "E": "depart, rising 20 m with the camera looking ahead along the path",
    }
    gold = {"A": [[0.0, 20.0]], "C": [[0.0, 5.0]], "D": [[5.0, 20.0]]}
    row = video_row(
        form="self_instance_recognition_joint",
        mission_kind="composite",
        choice_options=[{"option_id": k, "label": v} for k, v in labels.items()],
        answer_option_ids=list(gold),
        answer_items=[{"option_id": k, "label": labels[k], "intervals_sec": v} for k, v in gold.items()],
        gold_environment_answer={},
    )

    def score(r: VideoRow, text: str) -> dict[str, Any]:
        return DUALCOG_VIDEO.score(r, parse_joint(text, list("ABCDE")), False)

    def reply(*answers: tuple[str, list[list[float]]]) -> dict[str, Any]:
        body = {"answers": [{"option_id": o, "intervals_sec": iv} for o, iv in answers]}
        return score(row, json.dumps(body))

    right = reply(("A", [[0, 20]]), ("C", [[0, 5]]), ("D", [[5, 20]]))
    assert right["composite_correct"] == 1.0 and right["set_exact"] == 1.0
    assert (right["atomic_precision"], right["atomic_recall"], right["temporal_f1@0.5"]) == (1.0, 1.0, 1.0)
    # the first composite named decides the composite level, whatever follows
    wrong_first = reply(("B", []), ("A", []), ("C", [[0, 5]]), ("E", []))
    assert wrong_first["composite_correct"] == 0.0
    assert (wrong_first["atomic_precision"], wrong_first["atomic_recall"]) == (0.5, 0.5)
    # element_instance_f1 is the F1 of row-averaged precision and recall, not the mean F1
    assert element_instance_f1({"atomic_precision": 1.0, "atomic_recall": 0.5}) == pytest.approx(
        0.6667, abs=1e-4
    )
    atomic_row = row.model_copy(update={"mission_kind": "atomic"})
    assert "composite_correct" not in score(atomic_row, '{"answers": ["C"]}')


def test_a_video_reaches_a_model_as_a_frame_budget_or_a_sampling_rate() -> None:
    import numpy as np
    from skyqa.media_policy import Frames, MediaPolicy
    from skyqa.video import Mp4Writer, discard

    from services.evaluator.media import frames

    with Mp4Writer(32, 32, 10.0, 200_000) as writer:
        for i in range(31):  # 3 s at 10 fps
            writer.write(np.full((32, 32, 3), i * 8, dtype=np.uint8))
    data = Path(writer.path).read_bytes()
    discard(writer.path)
    budget = frames(data, 10.0, MediaPolicy(frames=Frames(count=4)))
    assert [p.label for p in budget] == [f"video frame at {t:.1f} s" for t in (0, 1, 2, 3)]
    rate = frames(data, 10.0, MediaPolicy(frames=Frames(fps=2.0)))  # two frames a second
    assert [p.label[15:18] for p in rate] == ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5", "3.0"]
    capped = frames(data, 10.0, MediaPolicy(frames=Frames(fps=10.0, cap=5)))  # every frame, at most 5
    assert [p.label[15:18] for p in capped] == ["0.0", "0.8", "1.5", "2.2", "3.0"]


def test_generic_cot_asks_the_same_with_a_step_by_step_instruction(tmp_path: Path) -> None:
    from skyqa.blob import LocalBlobStore

    from services.evaluator.conditions import GENERIC_COT
    from services.evaluator.runner import ModelResponder

    row = image_row(images=[])
    q = Question(DUALCOG_IMAGE, row, "s1")
    responder = ModelResponder("m", object(), LocalBlobStore(tmp_path), "runs/r", {})  # type: ignore[arg-type]
    full, cot = responder.request(q, "full"), responder.request(q, "generic_cot")
    assert full.prompt == row.user_prompt and cot.prompt == row.user_prompt + GENERIC_COT
    assert (cot.system, list(cot.images)) == (full.system, list(full.images))
    assert rows_for("generic_cot", [q]) == [q]

    def item(condition: str, right: bool, sid: str) -> dict[str, Any]:
        return {"model": "m", "condition": condition, "sample_id": sid, "rotation": 0, "task": "env_where",
                "landmark_id": sid, "option_correct": float(right), "category": "c", "difficulty": "4-way",
                "parse_kind": "option", "parse_stage": "json"}  # fmt: skip

    items = [item("full", i < 3, f"s{i}") for i in range(4)] + [
        item("generic_cot", i < 1, f"s{i}") for i in range(4)
    ]
    (entry,) = leaderboard(items)["models"]
    assert entry["protocols"]["S0 direct"]["option_correct"] == 0.75
    assert entry["protocols"]["S1 generic CoT"]["option_correct"] == 0.25
