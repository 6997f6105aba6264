"""Evaluation conditions: which rows a responder is asked, and what it sees of each.

Visual-evidence access (UltraVR V0-V4), same prompt and options, only the pixels change:

- ``text_only`` (V0): no image at all; measures language-prior leakage and option bias. A
  family whose source allows abstention there says so in the prompt (``TEXT_ONLY_NOTE``).
- ``thumbnail`` (V1): every image downsampled to at most 160x120 before upload.
- ``full`` (V2): every image as its family's media policy sends it (``skyqa.media_policy``:
  stills as stored unless the endpoint states a pixel limit, a video as the source samples it);
  the standard condition every leaderboard number refers to unless it names another.
- ``crop`` (V3): the four quadrants of every image at their original resolution, without the
  whole image. Quadrants, not answer-localising crops, so the crop never gives the box away.
  Rows that show only stills: a video has no single image to cut.
- ``full_crop`` (V4): the full images followed by their quadrants. Rows that show only stills.

Protocols that change the rows rather than the pixels:

- ``circular`` (MMBench CircularEval): each single-answer MCQ is asked once per rotation of its
  option labels over the letters (``TaskFamily.rotations``); the group counts only if every
  rotation is right.
- ``generic_cot`` (UltraVR S1): the full-image prompt plus a generic instruction to reason step
  by step before the answer (``GENERIC_COT``); scored like ``full`` (UltraVR S0), which it is
  read against.
- ``schema_cot`` (UltraVR S2): the full-image prompt plus the row's ground-truth reasoning step
  questions (``TaskFamily.with_steps``); the reply carries one answer per step, scored by
  ``skyqa.steps.step_correct``.
- ``fewshot_cot`` (UltraVR S3): ``schema_cot`` preceded by ``FEW_SHOT`` worked examples, other
  rows of the same task from other units with their complete ground-truth trajectories (as
  text: the examples' images are not sent); nothing of the asked row's own trace is shown.
- ``pred_step`` (UltraVR S4) and ``gt_prefix`` (S5): the steps are asked one call each, then the
  final question (:mod:`services.evaluator.rollout`); each step sees the earlier steps answered
  by the model itself (S4) or by the ground truth (S5).
"""

from __future__ import annotations

from skyqa import scan

from services.evaluator.questions import Question

CONDITIONS = scan.EVAL_CONDITIONS

# what each condition uploads of every image: the whole image at one of two sizes, its quadrants
MEDIA: dict[str, tuple[str, ...]] = {
    "full": ("full",),
    "text_only": (),
    "thumbnail": ("thumbnail",),
    "crop": ("quadrants",),
    "full_crop": ("full", "quadrants"),
    "circular": ("full",),
    "generic_cot": ("full",),
    "schema_cot": ("full",),
    "fewshot_cot": ("full",),
    "pred_step": ("full",),
    "gt_prefix": ("full",),
}
FEW_SHOT = 2
SEQUENTIAL = frozenset({"pred_step", "gt_prefix"})
STEP_CONDITIONS = frozenset({"schema_cot", "fewshot_cot", *SEQUENTIAL})
GENERIC_COT = (
    "\n\nThink step by step about what the images show before you answer; then end your reply "
    "with the answer in exactly the form asked for above."
)
STILLS_ONLY = {"crop", "full_crop"}
# V0 as each source asks it, per family: UltraVR's text-only prompt "explicitly allows abstention
# when the answer cannot be determined from the provided text" (an abstention is scored as not
# correct, and counted: the leaderboard's parse kinds per condition give its abstention rate).
# Families whose source has no V0 keep the plain prompt, and so does the blind gate (DualCog
# image rows), which must make a text-only model choose
TEXT_ONLY_NOTE: dict[str, str] = {
    "ultravr": (
        "\n\nNo image is attached to this question. If the answer cannot be determined from the "
        "text alone, do not choose an option: reply that it cannot be determined."
    ),
}


def prompt_for(q: Question, condition: str) -> str:
    """The user prompt a condition sends: the row's own, with the generic step-by-step
    instruction (S1) or the family's text-only note (V0) appended."""
    if condition == "generic_cot":
        return q.user + GENERIC_COT
    if condition == "text_only":
        return q.user + TEXT_ONLY_NOTE.get(q.family.name, "")
    return q.user


def rows_for(condition: str, questions: list[Question]) -> list[Question]:
    """The questions a condition asks: CircularEval's rotations and the step prompts of the
    rows whose family has them, the quadrants of rows that show only stills."""
    if condition == "circular":
        return [
            Question(q.family, r, q.sample_id, k)
            for q in questions
            for k, r in enumerate(q.family.rotations(q.row))
        ]
    if condition == "schema_cot":
        return [
            Question(q.family, r, q.sample_id)
            for q in questions
            if (r := q.family.with_steps(q.row)) is not None
        ]
    if condition == "fewshot_cot":
        pool = solved_pool(questions)
        return [
            Question(q.family, r, q.sample_id, user_text=examples(q, pool) + q.family.prompts(r)[1])
            for q in questions
            if (r := q.family.with_steps(q.row)) is not None
        ]
    if condition in SEQUENTIAL:
        return [q for q in questions if q.family.steps(q.row)]
    if condition in STILLS_ONLY:
        return [q for q in questions if all(m.fps is None for m in q.family.media(q.row))]
    return questions


Pool = dict[tuple[str, str], list[tuple[str, Question]]]


def solved_pool(questions: list[Question]) -> Pool:
    """Every question by (family, task), as (unit, question) in sample-id order."""
    pool: Pool = {}
    for o in sorted(questions, key=lambda o: o.sample_id):
        item = o.item()
        pool.setdefault((o.family.name, item.task), []).append((item.unit, o))
    return pool


def examples(q: Question, pool: Pool) -> str:
    """``FEW_SHOT`` solved examples for ``q``: rows of its family and task from other units, in
    sample-id order, each with its question, ground-truth steps and answer."""
    item = q.item()
    mine = pool.get((q.family.name, item.task), [])
    chosen = [o for unit, o in mine if unit != item.unit][:FEW_SHOT]
    parts = []
    for n, o in enumerate(chosen, 1):
        steps = "\n".join(
            f"S{i}. {s.question}\nA{i}: {s.answer}" for i, s in enumerate(o.family.steps(o.row), 1)
        )
        gold = sorted(o.item().gold)
        parts.append(f"Example {n}:\n{o.family.prompts(o.row)[1]}\n{steps}\nAnswer: {', '.join(gold)}")
    return (
        "Solved examples (their images are not shown):\n\n" + "\n\n".join(parts) + "\n\nNow the question.\n"
        if parts
        else ""
    )
