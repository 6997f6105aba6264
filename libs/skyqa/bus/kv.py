"""JSON documents in JetStream KV with compare-and-set updates.

Fan-in ("all N jobs of a run are done") and run state are read-modify-write under
contention from replicas, so every update retries on a stale revision.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

Doc = dict[str, Any]


class JsonKV:
    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def get(self, key: str) -> tuple[Doc | None, int]:
        try:
            entry = await self._kv.get(key)
        except (KeyNotFoundError, KeyDeletedError):
            return None, 0
        if entry.value is None:
            return None, 0
        return json.loads(entry.value), int(entry.revision or 0)

    async def update(self, key: str, fn: Callable[[Doc | None], Doc], attempts: int = 50) -> Doc:
        """Apply ``fn`` to the current document and store the result atomically."""
        for _ in range(attempts):
            current, revision = await self.get(key)
            new = fn(None if current is None else json.loads(json.dumps(current)))
            payload = json.dumps(new, sort_keys=True).encode()
            try:
                if revision == 0:
                    await self._kv.create(key, payload)
                else:
                    await self._kv.update(key, payload, last=revision)
                return new
            except KeyWrongLastSequenceError:
                continue
        raise RuntimeError(f"lost {attempts} compare-and-set races on KV key {key!r}")

    async def put(self, key: str, doc: Doc) -> None:
        """Store ``doc`` whatever is there (a document nobody else writes)."""
        await self._kv.put(key, json.dumps(doc, sort_keys=True).encode())

    async def delete(self, key: str) -> None:
        await self._kv.delete(key)

    async def keys(self) -> list[str]:
        try:
            return sorted(await self._kv.keys())
        except Exception:  # nats raises NoKeysError on an empty bucket
            return []


@dataclass(frozen=True)
class FanIn:
    done: int
    total: int
    complete: bool
    announced: bool


class FanInTracker:
    """Counts distinct finished items of a run; tells exactly one caller to announce completion."""

    def __init__(self, kv: JsonKV) -> None:
        self._kv = kv

    async def mark_done(self, key: str, item: str, total: int) -> FanIn:
        def add(doc: Doc | None) -> Doc:
            doc = doc or {"total": total, "done": [], "announced": False}
            if item not in doc["done"]:
                doc["done"] = sorted([*doc["done"], item])
            return doc

        doc = await self._kv.update(key, add)
        return FanIn(
            len(doc["done"]),
            int(doc["total"]),
            len(doc["done"]) >= doc["total"],
            bool(doc["announced"]),
        )

    async def is_announced(self, key: str) -> bool:
        doc, _ = await self._kv.get(key)
        return bool(doc and doc.get("announced"))

    async def mark_announced(self, key: str) -> None:
        def mark(doc: Doc | None) -> Doc:
            # an announcement without a fan-in (a human finalizing a review) is recorded too
            doc = doc or {"total": 0, "done": [], "announced": False}
            doc["announced"] = True
            return doc

        await self._kv.update(key, mark)
