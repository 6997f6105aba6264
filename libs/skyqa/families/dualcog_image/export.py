"""The image rows as a VLMEvalKit-style MCQ TSV."""

from __future__ import annotations

import csv
import io
import json

from skyqa.contracts.qa import ImageRow

TSV_COLUMNS = [
    "index",
    "image_path",
    "question",
    "A",
    "B",
    "C",
    "D",
    "answer",
    "category",
    "l2-category",
    "split",
]


def mcq_tsv(rows: list[ImageRow]) -> bytes:
    """One line per image MCQ; ``image_path`` is a JSON list of paths relative to the release root."""
    buf = io.StringIO()
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(TSV_COLUMNS)
    for i, r in enumerate(rows):
        opts = {o.option_id: o.label for o in r.label_options}
        w.writerow(
            [
                i,
                json.dumps(r.images),
                r.user_prompt.split("\nOptions:")[0],
                # a 3-option row leaves D empty, which VLMEvalKit reads as no option D
                *(opts.get(x, "") for x in "ABCD"),
                r.answer_option_id,
                r.task_type,
                r.difficulty,
                "test",
            ]
        )
    return buf.getvalue().encode()
