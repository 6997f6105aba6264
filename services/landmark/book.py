"""Review state persistence: compare-and-set in JetStream KV, snapshots and an append-only log
in the store.

Every change is one CAS update of the state; each audit row it produces gets the next sequence
number in that same update and is written as its own object (``log/<seq>.json``), so rows are
never overwritten. ``review_log.jsonl`` and the state JSON are snapshots rebuilt from those.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.bus import JsonKV
from skyqa.contracts import ReviewState
from skyqa.contracts.base import dump_json
from skyqa.errors import InvalidInput

Row = dict[str, Any]


class ReviewBook:
    def __init__(self, kv: JsonKV, store: BlobStore) -> None:
        self.kv = kv
        self.store = store

    async def get(self, run_id: str) -> ReviewState | None:
        doc, _ = await self.kv.get(f"review.{run_id}")
        if not doc:
            return None
        # states written before the review read capture's stored scan request kept a copy
        doc.pop("scan", None)
        return ReviewState.model_validate(doc)

    async def runs(self) -> list[str]:
        return [k.removeprefix("review.") for k in await self.kv.keys() if k.startswith("review.")]

    async def create(self, state: ReviewState, rows: list[Row]) -> ReviewState:
        """Store ``state`` unless the run already has one (a redelivered event keeps the first)."""
        return await self.change(state.run_id, lambda s: rows, initial=state)

    async def change(
        self, run_id: str, fn: Callable[[ReviewState], list[Row]], initial: ReviewState | None = None
    ) -> ReviewState:
        produced: list[Row] = []

        def apply(doc: dict[str, Any] | None) -> dict[str, Any]:
            if doc is None:
                if initial is None:
                    raise InvalidInput(f"no review for run {run_id!r}")
                state = initial.model_copy(deep=True)
            elif initial is not None:
                produced.clear()
                return doc  # already created
            else:
                state = ReviewState.model_validate(doc)
            rows = fn(state)
            produced.clear()
            for row in rows:
                state.log_seq += 1
                produced.append(
                    {"seq": state.log_seq, "ts": round(time.time(), 3), "scene_id": state.scene_id, **row}
                )
            return state.model_dump(mode="json")

        keys.validate_id(run_id, "run id")  # KV key review.<run_id>: '.', '*' and '>' are syntax
        doc = await self.kv.update(f"review.{run_id}", apply)
        state = ReviewState.model_validate(doc)
        await asyncio.to_thread(self._persist, state, list(produced))
        return state

    def _persist(self, state: ReviewState, rows: list[Row]) -> None:
        for row in rows:
            self.store.put(
                keys.review_log_row(state.run_id, state.scene_id, row["seq"]),
                json.dumps(row, sort_keys=True).encode(),
                "application/json",
            )
        self.store.put(keys.review_state(state.run_id, state.scene_id), dump_json(state), "application/json")
        lines = [
            self.store.get(k) for k in self.store.list(keys.review_log_rows(state.run_id, state.scene_id))
        ]
        self.store.put(
            keys.review_log(state.run_id, state.scene_id),
            b"".join(line.strip() + b"\n" for line in lines),
            "application/x-ndjson",
        )
