"""The gather step of a capture: the per-job manifests merged into the run's frames manifest,
and the scene's semantic class table beside it."""

from __future__ import annotations

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import FrameRow, SemanticClassRow, SemanticClassTable
from skyqa.contracts.base import dump_json, dump_jsonl, load_jsonl
from skyqa.sim import Simulator
from skyqa.v1 import common_pb2


def assemble(
    store: BlobStore, run_id: str, scene_id: str, backend: str, sim: Simulator
) -> tuple[common_pb2.BlobRef, list[FrameRow]]:
    """Merge the per-job manifests into ``frames_manifest.jsonl`` ordered by frame index."""
    prefix = keys.capture_manifests(run_id, scene_id)
    rows: list[FrameRow] = []
    for key in store.list(prefix):
        rows += load_jsonl(FrameRow, store.get(key), "job manifest")
    rows.sort(key=lambda r: r.frame_idx)
    body = dump_jsonl(rows)
    info = store.put(keys.frames_manifest(run_id, scene_id), body, "application/x-ndjson")
    store.put(
        keys.scene_file(run_id, scene_id, "frames_manifest.jsonl"),
        body,
        "application/x-ndjson",
    )
    table = SemanticClassTable(
        scene_id=scene_id,
        backend=backend,
        classes=[
            SemanticClassRow(id=c.id, name=c.name, category=c.category, stuff=c.stuff)
            for c in sorted(sim.classes().values(), key=lambda c: c.id)
        ],
    )
    store.put(keys.classes(run_id, scene_id), dump_json(table), "application/json")
    return info.to_ref(), rows
