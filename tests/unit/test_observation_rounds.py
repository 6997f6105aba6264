"""Which round of environment observations a render result answers: the first looks at the
working size, the shipped round of the chosen landmarks, or none (a stray result, refused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from partial_models import partial_model
from skyqa import keys
from skyqa.blob import LocalBlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.qa import EnvRequest, RenderRequests, ShippedObservations
from skyqa.errors import InvalidInput, StrayResult
from skyqa.scan import Stills
from skyqa.v1 import render_pb2

from services.qa_generator.observations import round_of
from services.qa_generator.pipeline import QAPlan, first_look

pytestmark = pytest.mark.unit

RUN = "run-rounds"
SIZE = Stills(width=4096, height=3072, working_width=1024, working_height=768)


def observation(landmark: str) -> EnvRequest:
    folder = keys.env_observations(landmark)
    return partial_model(
        EnvRequest,
        request_id=f"{landmark}-env0",
        landmark_id=landmark,
        output_image=f"{folder}/env0_rgb.jpg",
        output_segmentation=f"{folder}/env0_segmentation.png",
        width=SIZE.width,
        height=SIZE.height,
    )


def plan(looks: bool) -> QAPlan:
    planned = [observation("lm_a"), observation("lm_b")]
    requests = partial_model(
        RenderRequests,
        env_requests=planned,
        first_looks=[first_look(r, SIZE) for r in planned] if looks else [],
    )
    return partial_model(QAPlan, run_id=RUN, requests=requests)


def done(job_id: str, landmark: str, size: tuple[int, int]) -> render_pb2.RenderDone:
    return render_pb2.RenderDone(job_id=job_id, correlation=landmark, width=size[0], height=size[1])


FULL, WORKING = (SIZE.width, SIZE.height), (SIZE.working_width, SIZE.working_height)


def test_without_first_looks_only_the_planned_round_is_answered(tmp_path: Path) -> None:
    p, store = plan(looks=False), LocalBlobStore(tmp_path)
    assert round_of(p, store, done("env-lm_a", "lm_a", FULL)) == (False, 2)
    # no shipped round exists for a plan rendered where it ships: such a result answers no job
    for stray in (done("shipped-env-lm_a", "lm_a", FULL), done("env-lm_a", "lm_a", WORKING)):
        with pytest.raises(StrayResult, match="answers no environment observation job"):
            round_of(p, store, stray)


def test_first_looks_then_the_chosen_landmarks_at_the_shipped_size(tmp_path: Path) -> None:
    p, store = plan(looks=True), LocalBlobStore(tmp_path)
    assert round_of(p, store, done("env-lm_b", "lm_b", WORKING)) == (False, 2)
    with pytest.raises(StrayResult):  # a first look is at the working size
        round_of(p, store, done("env-lm_b", "lm_b", FULL))
    with pytest.raises(InvalidInput, match="no choice"):  # the shipped round follows the choice
        round_of(p, store, done("shipped-env-lm_a", "lm_a", FULL))
    choice = ShippedObservations(run_id=RUN, landmarks=["lm_a"])
    store.put(keys.shipped_observations(RUN), dump_json(choice), "application/json")
    assert round_of(p, store, done("shipped-env-lm_a", "lm_a", FULL)) == (True, 1)
    for stray in (done("shipped-env-lm_b", "lm_b", FULL), done("shipped-env-lm_a", "lm_a", WORKING)):
        with pytest.raises(StrayResult):
            round_of(p, store, stray)
