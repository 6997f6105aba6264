"""The navigation rows as UrbanVideo-Bench's MCQ table, so scripts written for its release run
on ours: one JSON object per line with ``Question_id``, ``video_id`` (the video or clip, relative
to the release), ``question_category`` (its display names, e.g. "Action Generation"),
``question`` (the question, then ``Choices:`` and one ``A. ...`` line per option, as its
questions carry them) and ``answer`` (the letter)."""

from __future__ import annotations

import json

from skyqa.contracts.urbanvideo import NavRow


def urbanvideo_table(rows: list[NavRow]) -> bytes:
    lines = []
    for r in rows:
        choices = "\n".join(f"{o.option_id}. {o.label}" for o in r.options)
        lines.append(
            json.dumps(
                {
                    "Question_id": r.sample_id,
                    "video_id": r.video_path,
                    "question_category": r.task_display_name,
                    "question": f"{r.question}\nChoices:\n{choices}",
                    "answer": r.answer_option_id,
                },
                ensure_ascii=False,
            )
        )
    return ("\n".join(lines) + "\n").encode() if lines else b""
