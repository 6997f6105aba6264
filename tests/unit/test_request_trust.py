"""What a request may name and how it must say it: endpoints, scenes, tokens, explicit zeros."""

from __future__ import annotations

import json

import pytest
from fastapi import HTTPException
from skyqa import scan
from skyqa.errors import UnknownScene
from skyqa.models.endpoints import EndpointNotAllowed, resolve
from skyqa.runtime.auth import bearer_token, check_bearer
from skyqa.settings import EvaluationSettings, ModelEndpoint, Settings
from skyqa.sim.registry import check_scene
from skyqa.v1 import eval_pb2, scan_pb2

from services.gateway.api import parse_scan

OPERATOR = EvaluationSettings(
    allowed_endpoints=[
        ModelEndpoint(kind="openai", url="HTTP://Models.Local:8000/v1/", api_key_env="VLLM_KEY", rpm=60),
        ModelEndpoint(kind="grpc", url="labeller:50051", api_key_env="UNUSED"),
    ]
)


def spec(kind: str, url: str, model: str = "", rpm: int = 0, tpm: int = 0) -> eval_pb2.ModelSpec:
    return eval_pb2.ModelSpec(kind=kind, url=url, model=model, rpm=rpm, tpm=tpm)


def test_an_allowed_endpoint_takes_the_operators_key_and_the_stricter_limits() -> None:
    [ep] = resolve([spec("openai", "http://models.local:8000/v1", model="qwen", rpm=600, tpm=1000)], OPERATOR)
    assert ep.api_key_env == "VLLM_KEY" and ep.model == "qwen"
    assert (ep.rpm, ep.tpm) == (60, 1000)
    [grpc] = resolve([spec("grpc", "LABELLER:50051")], OPERATOR)
    assert grpc.url == "labeller:50051"


@pytest.mark.parametrize(
    ("kind", "url"),
    [
        ("openai", "http://127.0.0.1:18999/v1"),
        ("openai", "http://models.local:8000/v1/../../admin"),
        ("openai", "http://models.local:8001/v1"),
        ("grpc", "http://models.local:8000/v1"),  # the right URL under the wrong kind
        ("openai", "labeller:50051"),
    ],
)
def test_anything_else_is_refused_by_name(kind: str, url: str) -> None:
    with pytest.raises(EndpointNotAllowed, match="not on the operator's allow-list"):
        resolve([spec(kind, url)], OPERATOR)


def test_configured_models_are_allowed_and_nothing_is_by_default() -> None:
    cfg = EvaluationSettings(models=[ModelEndpoint(kind="openai", url="http://a/v1", api_key_env="A")])
    assert resolve([spec("openai", "http://a/v1")], cfg)[0].api_key_env == "A"
    with pytest.raises(EndpointNotAllowed):
        resolve([spec("openai", "http://a/v1")], EvaluationSettings())


def test_a_request_cannot_carry_a_key_variable() -> None:
    assert "api_key_env" not in eval_pb2.ModelSpec.DESCRIPTOR.fields_by_name


def test_scenes_are_checked_without_building_them(tmp_path: object) -> None:
    assert check_scene("demo_city") == "builtin"
    assert check_scene("procedural_4_12") == "procedural"
    for bad in ("nowhere_city", "procedural_1_13", "procedural_1_0"):
        with pytest.raises(UnknownScene, match="unknown scene"):
            check_scene(bad)
    req = scan.apply_defaults(scan_pb2.ScanRequest(scene_id="nowhere_city", run_id="r"))
    with pytest.raises(UnknownScene, match="unknown scene"):
        scan.admit(req, None, EvaluationSettings())


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER  abc ", "abc"),
        ("abc", None),
        ("Basic abc", None),
        ("Bearer", None),
        ("Bearer a b", None),
        ("", None),
    ],
)
def test_bearer_headers(header: str, token: str | None) -> None:
    assert bearer_token(header) == token


def test_check_bearer_answers_503_401_or_passes() -> None:
    with pytest.raises(HTTPException) as off:
        check_bearer("Bearer x", "", "writing")
    assert off.value.status_code == 503
    for header in ("x", "Bearer y", "Token x"):
        with pytest.raises(HTTPException) as denied:
            check_bearer(header, "x", "writing")
        assert denied.value.status_code == 401
    check_bearer("bearer x", "x", "writing")


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"spacing_x_m": 0}, "spacing_x_m"),
        ({"spacingYM": 0}, "spacing_y_m"),
        ({"landmark_count": 0}, "landmark_count"),
        ({"altitudes_m": []}, "altitudes_m"),
        ({"video": {"width": 0, "height": 240}}, "video.width"),
        ({"profile": ""}, "profile"),
    ],
)
def test_explicit_values_the_defaults_would_replace_are_refused(extra: dict[str, object], field: str) -> None:
    body = {"scene_id": "tiny_town", "run_id": "r1", **extra}
    with pytest.raises(HTTPException) as exc:
        parse_scan(json.dumps(body).encode(), Settings())
    assert exc.value.status_code == 422 and field in str(exc.value.detail)


def test_explicit_values_the_defaults_keep_are_fine() -> None:
    body = {"scene_id": "tiny_town", "run_id": "r1", "spacing_x_m": 25, "profile": "preview", "seed": 0}
    assert parse_scan(json.dumps(body).encode(), Settings()).spacing_x_m == 25
