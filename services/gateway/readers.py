"""Who may read: open by default (a release is meant to be published); with
``SKYQA_GATEWAY__READ_TOKEN`` set, every read under ``/v1/`` needs that token or the write
token, as a bearer header or as the session cookie ``POST /v1/session`` sets for a browser
(whose images, videos and event streams cannot carry a header). Sessions live in KV and end
on ``DELETE /v1/session``; wrong tokens are rate-limited per address (``sessions``)."""

from __future__ import annotations

import hmac
import math
import time
from collections.abc import Awaitable, Callable

import nats.errors
from fastapi import FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from skyqa.runtime.auth import bearer_token
from skyqa.settings import GatewaySettings

from services.gateway.sessions import SESSION_S, SessionBook, SignInLimiter, new_session, signed_session

COOKIE = "skyqa_read"
OPEN = frozenset({"/v1/info", "/v1/session"})  # what a page needs before it has signed in
NEEDS_TOKEN = "reading needs the read token: send 'Authorization: Bearer <token>' or sign in"  # nosec B105: a message


def _accepted(cfg: GatewaySettings) -> list[str]:
    return [t for t in (cfg.read_token.get_secret_value(), cfg.token.get_secret_value()) if t]


def _token_ok(authorization: str, tokens: list[str]) -> str | None:
    given = bearer_token(authorization)
    if given is None:
        return None
    return next((t for t in tokens if hmac.compare_digest(given.encode(), t.encode())), None)


async def allowed(request: Request, cfg: GatewaySettings, sessions: SessionBook) -> bool:
    tokens = _accepted(cfg)
    if _token_ok(request.headers.get("authorization", ""), tokens) is not None:
        return True
    sid = signed_session(request.cookies.get(COOKIE, ""), tokens, time.time())
    return sid is not None and await sessions.live(sid)


def _client(request: Request) -> str:
    return request.client.host if request.client else ""


def guard_reads(app: FastAPI, cfg: GatewaySettings, sessions: SessionBook) -> None:
    limiter = SignInLimiter(cfg.signin_failures_per_minute)

    @app.middleware("http")
    async def reads(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        # the path the routes match, whatever prefix a proxy mounts the gateway under
        root = str(request.scope.get("root_path", ""))
        path = str(request.scope.get("path", ""))
        path = path[len(root) :] if root and path.startswith(root) else path
        if (
            cfg.read_token.get_secret_value()
            and request.method in ("GET", "HEAD")
            and path.startswith("/v1/")
            and path not in OPEN
        ):
            try:
                ok = await allowed(request, cfg, sessions)
            except (nats.errors.Error, TimeoutError):
                busy = "cannot check the session now (the bus is unreachable): retry, or send the token"
                return JSONResponse(
                    {"detail": busy},
                    status_code=503,
                    headers={"Retry-After": "5"},
                )
            if not ok:
                return JSONResponse(
                    {"detail": NEEDS_TOKEN},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        return await call_next(request)

    @app.post("/v1/session", status_code=204, tags=["service"])
    async def sign_in(request: Request, response: Response, authorization: str = Header("")) -> None:
        """Exchange the read (or write) token for a session cookie the pages' reads carry, for
        12 hours or until ``DELETE /v1/session``. An address that sent
        ``signin_failures_per_minute`` wrong tokens in the last minute is answered 429."""
        address, now = _client(request), time.time()
        wait = limiter.retry_after(address, now)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            raise HTTPException(
                429,
                f"too many wrong tokens from this address: retry in {seconds} s",
                {"Retry-After": str(seconds)},
            )
        token = _token_ok(authorization, _accepted(cfg))
        if token is None:
            limiter.failed(address, now)
            raise HTTPException(401, "wrong or missing token", {"WWW-Authenticate": "Bearer"})
        limiter.succeeded(address)
        sid, value = new_session(token, now)
        await sessions.start(sid, now)
        response.set_cookie(
            COOKIE,
            value,
            max_age=SESSION_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/v1/",
        )

    @app.delete("/v1/session", status_code=204, tags=["service"])
    async def sign_out(request: Request, response: Response) -> None:
        """End this browser's session on the server (its cookie value no longer reads anything,
        wherever it was copied to) and forget the cookie."""
        sid = signed_session(request.cookies.get(COOKIE, ""), _accepted(cfg), time.time())
        if sid is not None:
            await sessions.end(sid)
        response.delete_cookie(COOKIE, path="/v1/", httponly=True, samesite="strict")
