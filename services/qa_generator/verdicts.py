"""The rows of a plan checked against what was rendered: each family's verdicts, the rows as the
release sees them, and per family the units it cannot release. :mod:`services.qa_generator.release`
builds the release from them; :mod:`services.qa_generator.observations` asks them about the
first looks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts import ValidInstancesFile, load_json
from skyqa.contracts.qa import EnvRequest
from skyqa.errors import InvalidInput
from skyqa.families import Checked, Item, ReleaseFamily, Rendered

from services.qa_generator.pipeline import QAPlan


def rendered(p: QAPlan, store: BlobStore, observations: Sequence[EnvRequest]) -> Rendered:
    """What the checks read besides the rows: the environment observations as rendered (each
    request as it was rendered, its instance mask as stored) and the reviewed landmarks."""
    root = keys.run_prefix(p.run_id)
    masks: dict[str, np.ndarray] = {}
    for r in observations:
        key = f"{root}/{r.output_segmentation}"
        if store.exists(key):
            # at whatever size it was rendered: an AirSim camera renders at the size its
            # settings give it, and the checks take the size from the mask
            masks[r.request_id] = media.decode_segmentation(store.get(key))[1]
    valid = load_json(ValidInstancesFile, store.get(p.valid_instances), "valid instances")
    return Rendered(
        store=store,
        run_id=p.run_id,
        requests={r.request_id: r for r in observations},
        masks=masks,
        landmarks={v.instance_id: v for v in valid.valid_instances},
        degraded={g.output_image: g for g in p.requests.degraded},
    )


def checked(
    p: QAPlan, seen: Rendered, families: Sequence[ReleaseFamily[Any]]
) -> tuple[dict[str, Checked[Any]], dict[str, Item], dict[str, str]]:
    """Every family's rows checked against what was rendered, as the release sees them, and the
    rows that failed (a failure costs the row's unit)."""
    out = {f.name: f.check(p.rows_of(f), seen) for f in families}
    by_id = items(families, out)
    failed = {s: why for c in out.values() for s, why in c.failed.items()}
    for s, it in by_id.items():
        if (problem := it.problem()) is not None:
            failed.setdefault(s, problem)
    return out, by_id, failed


def items(families: Sequence[ReleaseFamily[Any]], checked: dict[str, Checked[Any]]) -> dict[str, Item]:
    """Every checked row as the release sees it, by sample id; ids are unique in a release and
    a unit id names one unit kind."""
    out: dict[str, Item] = {}
    kinds: dict[str, str] = {}
    for f in families:
        for r in checked[f.name].rows:
            it = f.item(r)
            if it.sample_id in out:
                raise InvalidInput(
                    f"sample id {it.sample_id!r} is planned by {out[it.sample_id].family} and {f.name}"
                )
            if kinds.setdefault(it.unit, f.unit_kind) != f.unit_kind:
                raise InvalidInput(f"unit id {it.unit!r} names a {kinds[it.unit]} and a {f.unit_kind}")
            out[it.sample_id] = it
    return out


def incomplete(
    p: QAPlan,
    families: Sequence[ReleaseFamily[Any]],
    checked: dict[str, Checked[Any]],
    items: dict[str, Item],
    failed: dict[str, str],
) -> dict[str, dict[str, str]]:
    """Per family, the units it does not release, with the reason: skipped while planning (held
    from every family, or by the family itself), a failed row of its own, or not its whole share
    of rows. Each family releases a unit on its own rows, so a UAV-DualCog landmark whose video
    rows fail still ships its image rows, and the other way round."""
    out: dict[str, dict[str, str]] = {}
    for f in families:
        mine = p.skipped_by(f)
        if f.unit_rows is not None:
            by_unit: dict[str, list[str]] = {}
            for r in checked[f.name].rows:
                by_unit.setdefault(items[r.sample_id].unit, []).append(r.sample_id)
            for unit, rows in by_unit.items():
                if unit in mine:
                    continue
                bad = next((failed[s] for s in rows if s in failed), None)
                if bad is not None:
                    mine[unit] = bad
                elif len(rows) != f.unit_rows:
                    mine[unit] = f"{len(rows)} {f.noun} rows (needs {f.unit_rows})"
        out[f.name] = mine
    return out
