"""OpenAI-compatible chat-completions: a client adapter and a server that exposes any model.

The client retries rate limits, timeouts and 5xx with exponential back-off and jitter,
honouring ``Retry-After``, a bounded number of times; it spaces requests to an RPM limit and
keeps estimated token use under a TPM limit.
The server lets the built-in models be served to any OpenAI-compatible consumer.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import os
import random
import time
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException, Request
from PIL import Image

from skyqa.models.base import RETRYABLE, VisionModel, class_for_status, error_response
from skyqa.v1 import model_pb2


class RateLimiter:
    """Spaces request starts so at most ``rpm`` begin in any minute (0 = unlimited)."""

    def __init__(self, rpm: int) -> None:
        self.interval = 60.0 / rpm if rpm > 0 else 0.0
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


class TokenLimiter:
    """At most ``tpm`` tokens a minute: a bucket refilled continuously at tpm/60 per second.

    A request takes its estimate before it is sent (prompt characters / 4, 85 + 170 per
    512-pixel tile of each image as OpenAI bills vision input, plus max_tokens) and the
    difference to the reported usage is settled afterwards, so estimates do not drift.
    """

    def __init__(self, tpm: int) -> None:
        self.tpm = tpm
        self._level = float(tpm)
        self._at = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self._level = min(float(self.tpm), self._level + (now - self._at) * self.tpm / 60.0)
        self._at = now

    async def take(self, tokens: int) -> None:
        if self.tpm <= 0:
            return
        need = float(min(tokens, self.tpm))  # one request bigger than a minute still goes, alone
        async with self._lock:
            self._refill()
            if self._level < need:
                await asyncio.sleep((need - self._level) * 60.0 / self.tpm)
                self._refill()
            self._level -= need

    def settle(self, estimated: int, used: int) -> None:
        if self.tpm > 0:
            self._refill()
            self._level = min(float(self.tpm), self._level + min(estimated, self.tpm) - used)


def estimate_tokens(request: model_pb2.GenerateRequest) -> int:
    text = len(request.system) + len(request.prompt)
    images = 0
    for image in request.images:
        try:
            w, h = Image.open(io.BytesIO(image.data)).size
        except OSError:
            w = h = 512
        images += 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    return text // 4 + images + (request.params.max_tokens or 512)


def to_messages(request: model_pb2.GenerateRequest) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for image in request.images:
        uri = f"data:{image.mime_type or 'image/jpeg'};base64,{base64.b64encode(image.data).decode()}"
        content.append({"type": "image_url", "image_url": {"url": uri}})
    content.append({"type": "text", "text": request.prompt})
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": content})
    return messages


def _retry_after(response: httpx.Response) -> float:
    value = response.headers.get("retry-after", "")
    try:
        return max(0.0, float(value))
    except ValueError:
        return 0.0


class OpenAICompatModel:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_attempts: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        rpm: int = 0,
        tpm: int = 0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = os.environ.get(api_key_env, "")
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.limiter = RateLimiter(rpm)
        self.tokens = TokenLimiter(tpm)
        self._client = httpx.AsyncClient(transport=transport, timeout=timeout_s)
        # jitter of the back-off, not a secret
        self._rng = random.Random(0)  # nosec B311

    def body(self, request: model_pb2.GenerateRequest) -> dict[str, Any]:
        p = request.params
        body: dict[str, Any] = {
            "model": request.model or self.name,
            "messages": to_messages(request),
            "temperature": p.temperature,
            "max_tokens": p.max_tokens or 512,
        }
        if p.top_p:
            body["top_p"] = p.top_p
        if p.HasField("seed"):
            body["seed"] = p.seed
        if request.json_schema:
            schema = json.loads(request.json_schema)
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema},
            }
        return body

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        body = self.body(request)
        timeout = request.params.timeout_s or self.timeout_s
        started = time.monotonic()
        last = error_response(model_pb2.ERROR_CLASS_UNAVAILABLE, "no attempt made")
        estimate = estimate_tokens(request)
        for attempt in range(self.max_attempts):
            await self.limiter.wait()
            await self.tokens.take(estimate)
            try:
                response = await self._client.post(self.url, json=body, headers=headers, timeout=timeout)
            except httpx.TimeoutException as exc:
                last = error_response(model_pb2.ERROR_CLASS_TIMEOUT, f"timeout after {timeout}s: {exc}")
            except httpx.HTTPError as exc:
                last = error_response(model_pb2.ERROR_CLASS_UNAVAILABLE, f"{type(exc).__name__}: {exc}")
            else:
                if response.status_code == 200:
                    done = self._parse(response, started)
                    used = done.usage.prompt_tokens + done.usage.completion_tokens
                    self.tokens.settle(estimate, used or estimate)
                    return done
                last = error_response(
                    class_for_status(response.status_code),
                    f"HTTP {response.status_code}: {response.text[:500]}",
                    retry_after_s=_retry_after(response),
                )
            if last.error_class not in RETRYABLE or attempt == self.max_attempts - 1:
                break
            delay = min(self.max_backoff_s, self.backoff_s * 2**attempt) * (0.5 + self._rng.random())
            await asyncio.sleep(max(delay, last.retry_after_s))
        last.latency_s = time.monotonic() - started
        return last

    def _parse(self, response: httpx.Response, started: float) -> model_pb2.GenerateResponse:
        latency = time.monotonic() - started
        try:
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return error_response(model_pb2.ERROR_CLASS_SERVER, f"malformed completion: {exc}", latency)
        if choice.get("finish_reason") == "content_filter":
            return error_response(
                model_pb2.ERROR_CLASS_CONTENT_FILTER, "blocked by the content filter", latency
            )
        return model_pb2.GenerateResponse(
            text=text,
            usage=model_pb2.Usage(
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
            ),
            latency_s=latency,
            model=str(data.get("model", self.name)),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def from_messages(body: dict[str, Any]) -> model_pb2.GenerateRequest:
    """Parse a chat-completions body into the contract (the server side)."""
    request = model_pb2.GenerateRequest(model=str(body.get("model", "")))
    texts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if message.get("role") == "system":
            request.system = content if isinstance(content, str) else ""
            continue
        parts: list[dict[str, Any]] = (
            [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        )
        for part in parts:
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif part.get("type") == "image_url":
                url = str(part.get("image_url", {}).get("url", ""))
                if not url.startswith("data:") or ";base64," not in url:
                    raise ValueError("only base64 data: image URLs are accepted")
                head, data = url.split(",", 1)
                request.images.add(data=base64.b64decode(data), mime_type=head[5:].split(";")[0])
    request.prompt = "\n".join(texts)
    request.params.temperature = float(body.get("temperature", 0.0))
    request.params.max_tokens = int(body.get("max_tokens", 512))
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        request.json_schema = json.dumps(fmt.get("json_schema", {}).get("schema", {}))
    return request


def openai_app(model: VisionModel) -> FastAPI:
    app = FastAPI(title=f"skyqa model server ({model.name})")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model.name, "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
            req = from_messages(body)
        except (ValueError, TypeError, AttributeError) as exc:
            raise HTTPException(status_code=400, detail=f"bad request: {exc}") from None
        out = await model.generate(req)
        if out.error_class:
            raise HTTPException(status_code=500, detail=out.error_message)
        return {
            "id": f"skyqa-{int(time.time() * 1000)}",
            "object": "chat.completion",
            "model": model.name,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": out.text}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": out.usage.prompt_tokens,
                "completion_tokens": out.usage.completion_tokens,
                "total_tokens": out.usage.prompt_tokens + out.usage.completion_tokens,
            },
        }

    return app
