"""The navigation rows as UrbanVideo-Bench's MCQ table, so scripts written for its release run
on ours: a Parquet file (its ``MCQ.parquet``) with ``Question_id``, ``video_id`` (the video or
clip, relative to the release folder), ``question_category`` (its display names, e.g. "Action
Generation"), ``question`` (the question, then ``Choices:`` and one ``A. ...`` line per option,
as its questions carry them) and ``answer`` (the letter)."""

from __future__ import annotations

import io

from skyqa.contracts.urbanvideo import NavRow

COLUMNS = ("Question_id", "video_id", "question_category", "question", "answer")


def urbanvideo_table(rows: list[NavRow]) -> bytes:
    # imported here: pyarrow is large and only the QA stage writes this file
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [
        (
            r.sample_id,
            r.video_path,
            r.task_display_name,
            r.question + "\nChoices:\n" + "\n".join(f"{o.option_id}. {o.label}" for o in r.options),
            r.answer_option_id,
        )
        for r in rows
    ]
    columns = {name: pa.array([rec[k] for rec in records], pa.string()) for k, name in enumerate(COLUMNS)}
    buf = io.BytesIO()
    pq.write_table(pa.table(columns), buf)
    return buf.getvalue()
