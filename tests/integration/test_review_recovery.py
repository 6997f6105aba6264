"""Finalizing a review on real servers: once under concurrency, finished after a crash between
the flip and the publish (at start-up and by a later web call), always with the run's own scan
as capture stored it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from pydantic import SecretStr
from review_fixtures import landmarks
from skyqa import keys
from skyqa.blob import LocalBlobStore
from skyqa.bus import Bus, topology
from skyqa.contracts import InstanceReview, ReviewState, dump_json
from skyqa.runtime import Service, Settings
from skyqa.scan import apply_defaults
from skyqa.v1 import common_pb2, labeller_pb2, landmark_pb2, scan_pb2
from stage_helpers import Probe

from services.landmark.book import ReviewBook
from services.landmark.review_app import TAKEOVER_S, setup_review
from services.landmark.web import mount_review_web

TOKEN = "recovery-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def put_review(
    book: ReviewBook, store: LocalBlobStore, run_id: str, seed: int, finalized_at: float = 0.0
) -> None:
    """A human review of ``run_id`` in KV, its landmarks and the scan request capture stores."""
    scan = apply_defaults(scan_pb2.ScanRequest(run_id=run_id, scene_id="s", seed=seed))
    store.put(keys.scan_request(run_id), json_format.MessageToJson(scan).encode(), "application/json")
    doc = landmarks()
    key = f"runs/{run_id}/scene_data/s/landmarks_raw/s.instances.json"
    store.put(key, dump_json(doc), "application/json")
    state = ReviewState(
        run_id=run_id,
        scene_id="s",
        mode="human",
        source_instances_json=key,
        finalized=finalized_at > 0,
        finalized_at=finalized_at,
        instances={i.instance_id: InstanceReview(class_name=i.class_name) for i in doc.instances},
    )
    await book.create(state, [])


@pytest.fixture
async def parts(bus: Bus, tmp_path: Path) -> tuple[ReviewBook, LocalBlobStore]:
    store = LocalBlobStore(tmp_path / "store")
    return ReviewBook(await bus.kv(topology.REVIEW_BUCKET), store), store


@pytest.fixture
async def reviewed(probe: Probe) -> list[landmark_pb2.LandmarksReviewed]:
    events: list[landmark_pb2.LandmarksReviewed] = await probe.collect(
        topology.LANDMARKS_REVIEWED, landmark_pb2.LandmarksReviewed
    )
    return events


async def start(settings: Settings, store: LocalBlobStore) -> Service:
    settings.review_token = SecretStr(TOKEN)

    async def wire(svc: Service) -> None:
        mount_review_web(svc, await setup_review(svc))

    svc = Service("review-test", settings, wire, store=store)
    await svc.start()
    return svc


@pytest.fixture
async def web(
    settings: Settings, parts: tuple[ReviewBook, LocalBlobStore]
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    svc = await start(settings, parts[1])
    await svc.state["review_resume"]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{svc.port}", headers=AUTH, timeout=20) as http:
        yield svc, http
    await svc.stop()


def of(events: list[landmark_pb2.LandmarksReviewed], run_id: str) -> list[landmark_pb2.LandmarksReviewed]:
    return [e for e in events if e.run_id == run_id]


async def settle(events: list[landmark_pb2.LandmarksReviewed], run_id: str, n: int) -> None:
    for _ in range(100):
        if len(of(events, run_id)) >= n:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a duplicate would have arrived by now


async def test_a_finalize_that_died_before_publishing_is_finished_at_start_up(
    settings: Settings,
    parts: tuple[ReviewBook, LocalBlobStore],
    reviewed: list[landmark_pb2.LandmarksReviewed],
    unique: str,
) -> None:
    book, store = parts
    run = f"died-{unique}"
    await put_review(book, store, run, seed=7, finalized_at=time.time() - 5)
    svc = await start(settings, store)
    try:
        await svc.state["review_resume"]
        await settle(reviewed, run, 1)
        [event] = of(reviewed, run)
        assert (event.run_id, event.scene_id) == (run, "s")
        assert store.exists(event.valid_instances.key)
    finally:
        await svc.stop()


async def test_finalize_publishes_once_and_a_late_web_call_takes_over_a_dead_one(
    web: tuple[Service, httpx.AsyncClient],
    parts: tuple[ReviewBook, LocalBlobStore],
    reviewed: list[landmark_pb2.LandmarksReviewed],
    unique: str,
) -> None:
    _, http = web
    book, store = parts
    run = f"race-{unique}"
    await put_review(book, store, run, seed=3)
    finals = await asyncio.gather(*(http.post(f"/review/api/runs/{run}/finalize") for _ in range(5)))
    assert sorted(r.status_code for r in finals) == [200, 409, 409, 409, 409], [r.text for r in finals]
    await settle(reviewed, run, 1)
    assert len(of(reviewed, run)) == 1
    # announced: every later call, and every later edit, is refused
    assert (await http.post(f"/review/api/runs/{run}/finalize")).status_code == 409
    edit = await http.post(f"/review/api/runs/{run}/instances/4_3/decide", json={"action": "drop"})
    assert edit.status_code == 409

    dead = f"dead-{unique}"
    await put_review(book, store, dead, seed=5, finalized_at=time.time())
    # another call claimed it a moment ago and may still be publishing
    assert (await http.post(f"/review/api/runs/{dead}/finalize")).status_code == 409
    await asyncio.sleep(0.3)
    assert of(reviewed, dead) == []

    def age(state: ReviewState) -> list[dict[str, object]]:
        state.finalized_at -= TAKEOVER_S + 1
        return []

    await book.change(dead, age)
    taken = await http.post(f"/review/api/runs/{dead}/finalize")
    assert taken.status_code == 200, taken.text
    await settle(reviewed, dead, 1)
    assert len(of(reviewed, dead)) == 1
    assert (await http.post(f"/review/api/runs/{dead}/finalize")).status_code == 409


async def test_a_label_for_no_review_is_rejected_at_once(
    web: tuple[Service, httpx.AsyncClient], bus: Bus, probe: Probe, unique: str
) -> None:
    errors = await probe.collect(topology.error_subject("review"), common_pb2.ErrorEvent)
    label = labeller_pb2.LabelResult(run_id=f"none-{unique}", landmark_id="4_3", ok=True)
    await bus.publish(topology.LABEL_DONE, label, msg_id=f"label-{unique}", run_id=label.run_id)
    event = await Probe.first(errors, lambda e: e.run_id == label.run_id)
    assert event.reason == "invalid_input" and event.deliveries == 1 and "no review" in event.message


async def test_a_review_without_a_stored_scan_request_is_not_finalized(
    web: tuple[Service, httpx.AsyncClient],
    parts: tuple[ReviewBook, LocalBlobStore],
    reviewed: list[landmark_pb2.LandmarksReviewed],
    unique: str,
) -> None:
    # later stages read the run's settings from the stored request: without it (or with a
    # foreign one) the reviewer is told at once and nothing is published
    _, http = web
    book, store = parts
    for run, bad in ((f"lost-{unique}", None), (f"foreign-{unique}", b'{"runId": "other", "sceneId": "s"}')):
        await put_review(book, store, run, seed=1)
        store.delete(keys.scan_request(run))
        if bad is not None:
            store.put(keys.scan_request(run), bad, "application/json")
        answer = await http.post(f"/review/api/runs/{run}/finalize")
        assert answer.status_code == 400, answer.text
        assert "scan request" in answer.json()["detail"]
        await asyncio.sleep(0.3)
        assert of(reviewed, run) == []
        # the review stays open: once the request is back, it is finalized and published once
        state = await book.get(run)
        assert state is not None and not state.finalized
        await put_review(book, store, run, seed=1)
        assert (await http.post(f"/review/api/runs/{run}/finalize")).status_code == 200
        await settle(reviewed, run, 1)
        assert len(of(reviewed, run)) == 1
