"""A manifest row as the evaluator asks it: the row (its family's contract model), the family
that parses and scores it, and the released row it stands for (CircularEval rotations and
step prompts are copies of one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skyqa.blob import BlobStore
from skyqa.contracts.base import load_jsonl
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import FAMILIES, Item, TaskFamily, release_files


@dataclass(frozen=True)
class Question:
    family: TaskFamily[Any]
    row: Any  # the family's row model: every one has a sample_id
    base_sample_id: str
    rotation: int = 0
    # set by the process-level protocols: the user prompt asked instead of the row's own (few-shot
    # examples before it, or one reasoning step of a sequential rollout) and which step it asks
    # (``len(steps)``: the final question after the steps)
    user_text: str | None = None
    system_text: str | None = None
    step: int | None = None

    @property
    def sample_id(self) -> str:
        return str(self.row.sample_id)

    @property
    def system(self) -> str:
        return self.system_text if self.system_text is not None else self.family.prompts(self.row)[0]

    @property
    def user(self) -> str:
        return self.user_text if self.user_text is not None else self.family.prompts(self.row)[1]

    def item(self) -> Item:
        return self.family.item(self.row)


def released(
    store: BlobStore, run_id: str, scene_id: str, families: Sequence[TaskFamily[Any]] = FAMILIES
) -> bool:
    """Whether the run has released any family's manifest."""
    files = release_files(run_id, scene_id, families)
    return any(store.exists(files[f.manifest]) for f in families)


def load_questions(
    store: BlobStore, run_id: str, scene_id: str, families: Sequence[TaskFamily[Any]] = FAMILIES
) -> list[Question]:
    """Every released row, validated by its family's contract model; a family the release
    predates (no manifest) has none."""
    files = release_files(run_id, scene_id, families)
    if not released(store, run_id, scene_id, families):
        # missing, not malformed: the run has not reached the qa stage (the CLI exits 1)
        raise BlobNotFound(f"run {run_id!r} of scene {scene_id!r} has no QA manifests to evaluate")
    out: list[Question] = []
    for family in families:
        key = files[family.manifest]
        if not store.exists(key):
            continue
        rows = load_jsonl(family.row_model, store.get(key), f"{family.manifest} manifest")
        for r in rows:
            # a row that validates can still have no answer to score against
            if (problem := family.item(r).problem()) is not None:
                raise InvalidInput(f"{family.manifest} manifest row {r.sample_id!r}: {problem}")
        out += [Question(family, r, r.sample_id) for r in rows]
    return out
