"""Environment observations rendered at the shipped size only where they can ship.

When a scan checks stills at a working size, every planned observation is first rendered there,
into files of its own (``keys.env_first_looks``). Once all are in, the families that show
observations check their rows on those first looks, and the landmarks whose rows pass are the
ones whose observations are rendered again at the shipped size, into the files the rows name.
The choice is stored once (``shipped_observations.json``); it is a pure function of the plan and
of renders of recorded poses, so a replica or a redelivery that makes it again makes the same
one. A first-look job that lands late writes only first-look files, never the observation a
released row shows: only the shipped round and ``skyqa refresh`` render those.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json, load_json
from skyqa.contracts.qa import EnvRequest, ShippedObservations
from skyqa.errors import BlobNotFound, InvalidInput, StrayResult
from skyqa.families import RELEASED, ReleaseFamily
from skyqa.v1 import render_pb2

from services.qa_generator import verdicts
from services.qa_generator.pipeline import SHIPPED_JOB, QAPlan

NOT_SHIPPED = "environment observations not rendered at the shipped size"


def chosen(p: QAPlan, store: BlobStore) -> set[str]:
    """The landmarks whose observations are rendered at the shipped size: all of them where there
    were no first looks, else the stored choice, which must exist and name only this run's
    landmarks."""
    planned = {r.landmark_id for r in p.requests.env_requests}
    if not p.requests.first_looks:
        return planned
    key = keys.shipped_observations(p.run_id)
    try:
        data = store.get(key)
    except BlobNotFound:
        raise InvalidInput(
            f"run {p.run_id!r} has first looks of its environment observations but no choice of the "
            f"ones to render at the shipped size ({keys.release_path(key)}) yet"
        ) from None
    doc = load_json(ShippedObservations, data, "shipped observations")
    named = set(doc.landmarks)
    if doc.run_id != p.run_id or doc.landmarks != sorted(named) or not named <= planned:
        raise InvalidInput(f"{keys.release_path(key)} is not a choice among run {p.run_id!r}'s landmarks")
    return named


def first_round(p: QAPlan) -> list[EnvRequest]:
    """The observations rendered first: their first looks, or themselves where there are none."""
    return p.requests.first_looks or p.requests.env_requests


def at_shipped_size(p: QAPlan, landmarks: Collection[str]) -> list[EnvRequest]:
    """The planned observations of ``landmarks``, which are rendered where they ship."""
    return [r for r in p.requests.env_requests if r.landmark_id in landmarks]


def round_of(p: QAPlan, store: BlobStore, done: render_pb2.RenderDone) -> tuple[bool, int]:
    """Whether a render result answers the shipped round (else the first), and how many
    landmarks' results that round gathers. A result answering no job of the plan at its size is
    refused (:class:`StrayResult`), so it can neither count nor fail the run."""
    lm = done.correlation
    # a plan without first looks renders its observations once, where they ship: no shipped round
    shipped = bool(p.requests.first_looks) and done.job_id == f"{SHIPPED_JOB}env-{lm}"
    asked = at_shipped_size(p, chosen(p, store)) if shipped else first_round(p)
    if shipped or done.job_id == f"env-{lm}":
        mine = [r for r in asked if r.landmark_id == lm]
        if mine and (done.width, done.height) == (mine[0].width, mine[0].height):
            return shipped, len({r.landmark_id for r in asked})
    raise StrayResult(
        f"render result {done.job_id!r} ({done.width}x{done.height}) answers no environment observation "
        f"job of run {p.run_id!r}"
    )


def as_rendered(p: QAPlan, shipped: Collection[str]) -> list[EnvRequest]:
    """Each planned observation as it was rendered: itself where its landmark's were rendered at
    the shipped size, else its first look (a plan whose first looks lack it: itself, unrendered)."""
    first = {r.request_id: r for r in p.requests.first_looks}
    return [r if r.landmark_id in shipped else first.get(r.request_id, r) for r in p.requests.env_requests]


def showing(
    p: QAPlan, families: Sequence[ReleaseFamily[Any]], rows: Mapping[str, Sequence[Any]]
) -> list[ReleaseFamily[Any]]:
    """The families whose rows (``rows``, by family name: as planned, or as checked, which
    show a first look where that is what was rendered) show an environment observation."""
    shown = {r.output_image for r in (*p.requests.env_requests, *p.requests.first_looks)}
    return [f for f in families if any(m.path in shown for r in rows.get(f.name, ()) for m in f.media(r))]


def observed_units(
    p: QAPlan, store: BlobStore, families: Sequence[ReleaseFamily[Any]] = RELEASED
) -> set[str]:
    """The landmarks whose rows pass every check of the families that show the observations, on
    the first looks. The other families are checked once, at the release: they release their
    units on their own rows, whatever the observations' (the video checks read every
    segmentation frame, which is worth doing once)."""
    families = p.families(families)
    families = showing(p, families, {f.name: p.rows_of(f) for f in families})
    seen = verdicts.rendered(p, store, as_rendered(p, ()))
    checked, items, failed = verdicts.checked(p, seen, families)
    dropped = verdicts.incomplete(p, families, checked, items, failed)
    return {r.landmark_id for r in p.requests.env_requests} - {u for d in dropped.values() for u in d}


def shipping(p: QAPlan, store: BlobStore) -> set[str]:
    """The landmarks whose observations the shipped round renders: none without first looks,
    else the stored choice, or the one made now (every first look is in) and stored."""
    if not p.requests.first_looks:
        return set()
    if store.exists(keys.shipped_observations(p.run_id)):  # decided once
        return chosen(p, store)
    units = observed_units(p, store)
    doc = ShippedObservations(run_id=p.run_id, landmarks=sorted(units))
    store.put(keys.shipped_observations(p.run_id), dump_json(doc), "application/json")
    return units
