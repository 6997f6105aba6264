"""Model adapters against real local servers: gRPC, OpenAI-compatible HTTP, 429 and timeouts."""

from __future__ import annotations

import asyncio
import io
import json
import time

import numpy as np
import pytest
from fastapi import FastAPI, Response
from PIL import Image, ImageDraw
from skyqa.models import GrpcModel, HeuristicLabeller, OpenAICompatModel, openai_app, serve_grpc
from skyqa.servers import ServedApp
from skyqa.v1 import model_pb2


def boxed_image(colour: tuple[int, int, int]) -> bytes:
    img = Image.new("RGB", (160, 120), (110, 150, 90))
    draw = ImageDraw.Draw(img)
    draw.rectangle([50, 20, 100, 110], fill=colour)
    draw.rectangle([46, 16, 104, 114], outline=(255, 0, 0), width=2)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def label_request(hint: str = "storage_tank") -> model_pb2.GenerateRequest:
    req = model_pb2.GenerateRequest(prompt=f'Weak class-name hint: "{hint}"\nReturn JSON.')
    for _ in range(3):
        req.images.add(data=boxed_image((236, 236, 230)), mime_type="image/png")
    req.params.temperature = 0.2
    return req


async def test_heuristic_over_grpc_with_health() -> None:
    server, port = await serve_grpc(HeuristicLabeller())
    client = GrpcModel(f"127.0.0.1:{port}")
    try:
        assert await client.healthy()
        out = await client.generate(label_request())
        assert out.error_class == model_pb2.ERROR_CLASS_UNSPECIFIED
        payload = json.loads(out.text)
        assert payload["category"] == "industrial_infrastructure"
        assert payload["subcategory"] == "storage tank"
        assert "white" in payload["description"]
        assert 0.6 <= payload["confidence"] <= 1.0
        bad = await client.generate(model_pb2.GenerateRequest(prompt="no images"))
        assert bad.error_class == model_pb2.ERROR_CLASS_INVALID_REQUEST
    finally:
        await client.aclose()
        await server.stop(None)


async def test_grpc_unreachable_is_classified() -> None:
    from skyqa.servers import free_port

    client = GrpcModel(f"127.0.0.1:{free_port()}", timeout_s=2)
    out = await client.generate(label_request())
    await client.aclose()
    assert out.error_class in (model_pb2.ERROR_CLASS_UNAVAILABLE, model_pb2.ERROR_CLASS_TIMEOUT)


async def test_heuristic_over_openai_compatible_http() -> None:
    with ServedApp(openai_app(HeuristicLabeller())) as served:
        client = OpenAICompatModel(served.url + "/v1", "heuristic-labeller")
        out = await client.generate(label_request("house"))
        await client.aclose()
    assert out.error_class == 0, out.error_message
    assert json.loads(out.text)["category"] == "building"
    assert out.usage.completion_tokens > 0


async def test_unknown_hint_gives_low_confidence() -> None:
    out = await HeuristicLabeller().generate(label_request("xq-thing"))
    payload = json.loads(out.text)
    assert payload["category"] == "other" and payload["confidence"] < 0.6


def flaky_app(failures: int, status: int, retry_after: str | None) -> tuple[FastAPI, list[float]]:
    app = FastAPI()
    calls: list[float] = []

    @app.post("/v1/chat/completions")
    async def chat() -> Response:
        calls.append(time.monotonic())
        if len(calls) <= failures:
            headers = {"Retry-After": retry_after} if retry_after else {}
            return Response(status_code=status, content=b'{"error": "busy"}', headers=headers)
        body = {
            "model": "m",
            "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
            "usage": {},
        }
        return Response(content=json.dumps(body), media_type="application/json")

    return app, calls


async def test_429_honours_retry_after_then_succeeds() -> None:
    app, calls = flaky_app(2, 429, "1")
    with ServedApp(app) as served:
        client = OpenAICompatModel(served.url + "/v1", "m", backoff_s=0.05, max_attempts=4)
        out = await client.generate(label_request())
        await client.aclose()
    assert out.text == "ok" and len(calls) == 3
    assert calls[1] - calls[0] >= 0.95 and calls[2] - calls[1] >= 0.95


async def test_rate_limit_gives_up_after_bounded_attempts() -> None:
    app, calls = flaky_app(10, 429, None)
    with ServedApp(app) as served:
        client = OpenAICompatModel(served.url + "/v1", "m", backoff_s=0.01, max_attempts=3)
        out = await client.generate(label_request())
        await client.aclose()
    assert out.error_class == model_pb2.ERROR_CLASS_RATE_LIMITED and len(calls) == 3


async def test_bad_request_is_not_retried() -> None:
    app, calls = flaky_app(10, 400, None)
    with ServedApp(app) as served:
        client = OpenAICompatModel(served.url + "/v1", "m", backoff_s=0.01, max_attempts=3)
        out = await client.generate(label_request())
        await client.aclose()
    assert out.error_class == model_pb2.ERROR_CLASS_INVALID_REQUEST and len(calls) == 1


async def test_timeout_is_classified() -> None:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def slow() -> dict[str, str]:
        await asyncio.sleep(3)
        return {}

    with ServedApp(app) as served:
        client = OpenAICompatModel(served.url + "/v1", "m", timeout_s=0.3, backoff_s=0.01, max_attempts=2)
        started = time.monotonic()
        out = await client.generate(label_request())
        elapsed = time.monotonic() - started
        await client.aclose()
    assert out.error_class == model_pb2.ERROR_CLASS_TIMEOUT
    assert elapsed < 2.0  # two bounded attempts of 0.3 s, not the server's 3 s


def shaded_object(albedo: str, lams: list[float]) -> bytes:
    """A box-framed object of one albedo in faces of different sunlight, on grass that also
    fills part of the box, drawn the way the built-in renderer shades."""
    from skyqa.sim.classes import COLOURS
    from skyqa.sim.daylight import AMBIENT, SUNLIGHT

    grass = (70, 120, 50)
    img = Image.new("RGB", (200, 160), grass)
    draw = ImageDraw.Draw(img)
    width = 60 // len(lams)
    for i, lam in enumerate(lams):
        rgb = np.array(COLOURS[albedo]) * (AMBIENT + SUNLIGHT * lam) * 255
        draw.rectangle([70 + i * width, 40, 70 + (i + 1) * width - 1, 130], fill=tuple(int(v) for v in rgb))
    draw.rectangle([60, 30, 140, 140], outline=(255, 0, 0), width=2)  # grass inside the box too
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("albedo", "lams"),
    [
        ("dark red", [0.0, 0.0, 0.57]),  # mostly in shade: nearest raw colour is black
        ("white", [0.0, 0.0, 0.3]),  # shaded white is nearest gray
        ("dark gray", [0.57, 0.82]),  # sunlit dark gray looks like gray in shade
        ("teal", [0.0, 0.57]),
    ],
)
def test_object_colour_reads_the_albedo_under_shading_and_ignores_the_ground(
    albedo: str, lams: list[float]
) -> None:
    from skyqa.models._colour import figure_and_ring, measure_colour
    from skyqa.vocab.colours import family_of

    arr = np.asarray(Image.open(io.BytesIO(shaded_object(albedo, lams))).convert("RGB"))
    inside, ring, ratio = figure_and_ring(arr)
    measured = measure_colour([(inside, ring)])
    assert measured is not None and ratio > 1.2
    # the best fit is the albedo; the word is that shade, its family word, or none when the
    # shade is not sure (a white wall seen mostly in shade), never another colour
    assert measured.call().best == albedo
    assert measured.call().word in (albedo, family_of(albedo), None)


@pytest.mark.parametrize(
    ("size", "colour", "expected"),
    [
        ((4.4, 1.8, 1.4), "red", ("vehicle", "car")),
        ((1.6, 3.2, 30.0), "dark red", ("industrial_infrastructure", "chimney")),
        ((5.0, 5.0, 6.0), "dark green", ("vegetation", "tree")),
        ((22.0, 18.0, 70.0), "teal", ("building", "office tower")),
    ],
)
def test_measured_size_suggests_the_category(
    size: tuple[float, float, float], colour: str, expected: tuple[str, str]
) -> None:
    from skyqa.models._size import likely_object, parse_size

    assert parse_size(f"about {size[0]} m long, {size[1]} m wide and {size[2]} m tall") == (
        max(size[:2]),
        min(size[:2]),
        size[2],
    )
    assert likely_object(size, colour)[:2] == expected


@pytest.mark.parametrize(
    ("hint", "category"), [("bus", "vehicle"), ("water_tower", "other"), ("street_lamp", "public_facility")]
)
def test_hint_keywords(hint: str, category: str) -> None:
    from skyqa.models.heuristic import category_for

    assert category_for(hint) == category


@pytest.mark.parametrize(
    "size_m",
    [
        [],
        [1.0, 2.0],
        [1.0, 2.0, 3.0, 4.0],
        [float("nan"), 1.0, 1.0],
        [-1.0, 1.0, 1.0],
        [1e9, 1.0, 1.0],
        [float("inf"), 1.0, 1.0],
    ],
)
def test_an_untrusted_size_never_reaches_the_prompt(size_m: list[float]) -> None:
    from services.labeller.prompt import size_line, user_prompt

    assert size_line(size_m) == "" and "Measured" not in user_prompt("", 4, size_m)


def test_a_malformed_size_in_a_prompt_is_ignored() -> None:
    from skyqa.models._size import parse_size

    assert parse_size("about 1.2.3 m long, 2 m wide and 3 m tall") is None
    assert parse_size("about 0 m long, 2 m wide and 3 m tall") is None
    assert parse_size("no size here") is None
