"""Task families: a benchmark family is one folder here and one line in :data:`FAMILIES`.

Each implements :class:`TaskFamily` (what it plans, which renders it asks for, how it checks
its rows against what was rendered, how the blind gate sees them, what it exports); the
qa-generator loops over :data:`FAMILIES` and knows none of them by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skyqa import keys
from skyqa.families.aircop import FAMILY as AIRCOP_COLLAB
from skyqa.families.base import (
    CardPart,
    Checked,
    Export,
    Item,
    Mark,
    MediaRef,
    PlanInputs,
    Planned,
    ReleaseFamily,
    Rendered,
    Stored,
    TaskFamily,
)
from skyqa.families.dualcog_image import FAMILY as DUALCOG_IMAGE
from skyqa.families.dualcog_video import FAMILY as DUALCOG_VIDEO
from skyqa.families.reasoning import FAMILY as REASONING_VIDEOS
from skyqa.families.ultravr import FAMILY as ULTRAVR
from skyqa.families.urbanvideo import FAMILY as URBANVIDEO_NAV

# families of questions, which the evaluator asks vision-language models
FAMILIES: tuple[TaskFamily[Any], ...] = (
    DUALCOG_IMAGE,
    DUALCOG_VIDEO,
    URBANVIDEO_NAV,
    AIRCOP_COLLAB,
    ULTRAVR,
)
# everything the QA stage releases: the question families and the world-model ones
RELEASED: tuple[ReleaseFamily[Any], ...] = (*FAMILIES, REASONING_VIDEOS)


def release_files(
    run_id: str, scene_id: str, families: Sequence[ReleaseFamily[Any]] = RELEASED
) -> dict[str, str]:
    """Every file the QA stage releases, by name: each family's manifest and exports, its rows as
    a Hugging Face image-folder metadata file at the release root (``<manifest>_metadata``), then
    the shared render_requests sidecar, QC report and dataset card."""
    check_registry(families)
    root = keys.run_prefix(run_id)
    out = {name: f"{root}/{path.format(scene=scene_id)}" for f in families for name, path in f.files.items()}
    out |= {metadata_file(f): f"{root}/{f.manifest}.metadata.jsonl" for f in families}
    return out | keys.release_common(run_id, scene_id)


def metadata_file(f: ReleaseFamily[Any]) -> str:
    return f"{f.manifest}_metadata"


def check_registry(families: Sequence[ReleaseFamily[Any]]) -> None:
    """Families must not overwrite each other: distinct names, release file names (the shared
    ones included) and task names. A ``ValueError`` names the clash."""
    seen: dict[str, str] = {}
    shared = {n: "every release" for n in keys.release_common("run", "scene")}
    for f in families:
        for kind, names in (("family", [f.name]), ("file", list(f.files)), ("task", list(f.metrics))):
            for name in names:
                owner = shared.get(name) if kind == "file" else None
                owner = owner or seen.get(f"{kind}:{name}")
                if owner is not None:
                    raise ValueError(f"task family {f.name!r}: {kind} {name!r} is already used by {owner}")
                seen[f"{kind}:{name}"] = f"family {f.name!r}"
        if f.manifest not in f.files:
            raise ValueError(f"task family {f.name!r}: its manifest {f.manifest!r} is not among its files")


def family(name: str) -> TaskFamily[Any]:
    for f in FAMILIES:
        if f.name == name:
            return f
    raise KeyError(f"no task family {name!r}; known: {', '.join(f.name for f in FAMILIES)}")


__all__ = [
    "DUALCOG_IMAGE",
    "DUALCOG_VIDEO",
    "FAMILIES",
    "REASONING_VIDEOS",
    "RELEASED",
    "ULTRAVR",
    "URBANVIDEO_NAV",
    "CardPart",
    "Checked",
    "Export",
    "Item",
    "Mark",
    "MediaRef",
    "PlanInputs",
    "Planned",
    "ReleaseFamily",
    "Rendered",
    "Stored",
    "TaskFamily",
    "check_registry",
    "family",
    "metadata_file",
    "release_files",
]
