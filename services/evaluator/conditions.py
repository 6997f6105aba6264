"""Evaluation conditions: which rows a responder is asked, and what it sees of each.

Visual-evidence access (UltraVR V0-V4), same prompt and options, only the pixels change:

- ``text_only`` (V0): no image at all; measures language-prior leakage and option bias.
- ``thumbnail`` (V1): every image downsampled to at most 160x120 before upload.
- ``full`` (V2): every image at the runner's default upload size (at most 640x480); the
  standard condition every leaderboard number refers to unless it names another.
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
}
GENERIC_COT = (
    "\n\nThink step by step about what the images show before you answer; then end your reply "
    "with the answer in exactly the form asked for above."
)
STILLS_ONLY = {"crop", "full_crop"}


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
    if condition in STILLS_ONLY:
        return [q for q in questions if all(m.fps is None for m in q.family.media(q.row))]
    return questions
