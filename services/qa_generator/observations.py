"""Environment observations rendered at the shipped size only where they can ship.

When a scan checks stills at a working size, every planned observation is first rendered there,
into files of its own (``keys.env_first_looks``). Once all are in, the families that show
observations check their rows on those first looks, and the landmarks whose rows pass are the
ones whose observations are rendered again at the shipped size, into the files the rows name.
The choice is stored once (``shipped_observations.json``); it is a pure function of the plan and
of renders of recorded poses, so a replica or a redelivery that makes it again makes the same
one. A first-look job that lands late writes only first-look files: nothing but the shipped
round and ``skyqa refresh`` writes a file a released row shows.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.qa import EnvRequest, ShippedObservations
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import RELEASED, ReleaseFamily

from services.qa_generator import verdicts
from services.qa_generator.pipeline import QAPlan

NOT_SHIPPED = "environment observations not rendered at the shipped size"


def chosen(p: QAPlan, store: BlobStore) -> set[str]:
    """The landmarks whose observations are rendered at the shipped size: all of them where there
    were no first looks, else the stored choice (none before it is made)."""
    if not p.requests.first_looks:
        return {r.landmark_id for r in p.requests.env_requests}
    try:
        data = store.get(keys.shipped_observations(p.run_id))
    except BlobNotFound:
        return set()
    doc = load_json(ShippedObservations, data, "shipped observations")
    if doc.run_id != p.run_id:
        raise InvalidInput(f"shipped_observations.json names run {doc.run_id!r}, not {p.run_id!r}")
    return set(doc.landmarks)


def as_rendered(p: QAPlan, shipped: Collection[str]) -> list[EnvRequest]:
    """Each planned observation as it was rendered: itself where its landmark's were rendered at
    the shipped size, else its first look (a plan whose first looks lack it: itself, unrendered)."""
    first = {r.request_id: r for r in p.requests.first_looks}
    return [r if r.landmark_id in shipped else first.get(r.request_id, r) for r in p.requests.env_requests]


def observed_units(
    p: QAPlan, store: BlobStore, families: Sequence[ReleaseFamily[Any]] = RELEASED
) -> set[str]:
    """The landmarks whose rows pass every check of the families that show the observations, on
    the first looks. The other families are checked once, at the release: a landmark they drop
    has had its observations rendered at the shipped size for nothing, which costs less than
    checking every family twice (the video checks read every segmentation frame)."""
    shown = {r.output_image for r in p.requests.env_requests}
    showing = [
        f for f in p.families(families) if any(m.path in shown for r in p.rows_of(f) for m in f.media(r))
    ]
    seen = verdicts.rendered(p, store, as_rendered(p, ()))
    checked, items, failed = verdicts.checked(p, seen, showing)
    dropped = verdicts.incomplete(showing, checked, items, failed, dict(p.skipped))
    return {r.landmark_id for r in p.requests.env_requests} - set(dropped)


def shipping(p: QAPlan, store: BlobStore) -> set[str]:
    """The landmarks whose observations the shipped round renders: none without first looks,
    else the stored choice, or the one made now (every first look is in) and stored."""
    if not p.requests.first_looks:
        return set()
    if store.exists(keys.shipped_observations(p.run_id)):
        return chosen(p, store)
    units = observed_units(p, store)
    doc = ShippedObservations(run_id=p.run_id, landmarks=sorted(units))
    store.put(keys.shipped_observations(p.run_id), dump_json(doc), "application/json")
    return units
