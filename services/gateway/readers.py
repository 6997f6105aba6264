"""Who may read: open by default (a release is meant to be published); with
``SKYQA_GATEWAY__READ_TOKEN`` set, every read under ``/v1/`` needs that token or the write
token, as a bearer header or as the session cookie ``POST /v1/session`` sets for a browser
(whose images, videos and event streams cannot carry a header). Sessions live in KV and end
on ``DELETE /v1/session``; wrong tokens are rate-limited per address (``sessions``)."""

from __future__ import annotations

import hmac
import json
import math
import time

import nats.errors
from fastapi import FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from skyqa.keys import is_valid_id
from skyqa.runtime.auth import bearer_token
from skyqa.settings import GatewaySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.sessions import SESSION_S, SessionBook, SignInLimiter, new_session, signed_session

COOKIE = "skyqa_read"
MAX_USER = 64  # characters of a user name (the audit's folder of that person's answers)
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


def client_address(request: Request) -> str:
    return request.client.host if request.client else ""


# the scope key under which a guarded read finds an async callable saying whether the reader
# may still read (their session not ended since the request began): a long response, the
# run's event stream, asks it again as it goes
STILL_ALLOWED = "skyqa.still_allowed"
BUS_RETRY_AFTER_S = 5
UNREACHABLE = (nats.errors.Error, TimeoutError)  # nats' own TimeoutError is an asyncio one too


def _busy(detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=503, headers={"Retry-After": str(BUS_RETRY_AFTER_S)})


MAX_SIGNIN_BODY = 1024


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing more than ``limit`` bytes before reading them all."""
    declared = request.headers.get("content-length")
    # ASCII digits, and few enough of them: isdigit() takes '²', which int() refuses, and
    # int() refuses more than 4300 digits
    if declared is not None and (
        not (declared.isascii() and declared.isdigit()) or len(declared) > 18 or int(declared) > limit
    ):
        raise HTTPException(413, f"request body exceeds {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"request body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _user(body: bytes) -> str:
    """The user name a sign-in body gives ("" for no body): letters, digits, '_' and '-'."""
    if not body.strip():
        return ""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise HTTPException(400, 'a sign-in body is JSON: {"user": "<name>"}') from None
    user = doc.get("user", "") if isinstance(doc, dict) and set(doc) <= {"user"} else None
    if not isinstance(user, str) or (user and not (is_valid_id(user) and len(user) <= MAX_USER)):
        raise HTTPException(
            422,
            f'a sign-in body is {{"user": "<name>"}}, the name 1 to {MAX_USER} letters, digits, '
            "'_' and '-' starting with a letter or digit",
        )
    return user


async def audit_user(request: Request, cfg: GatewaySettings, sessions: SessionBook) -> str:
    """Who this browser is, for the audit: the name of its live session signed in with the
    write token (answers change the release's QC, a write). 401 without one, 403 for a session
    of the read token or without a name, 503 when writing is disabled or the session cannot be
    checked."""
    if not cfg.token.get_secret_value():
        raise HTTPException(
            503, "the audit writes to the release, and writing is disabled: no token is configured"
        )
    sid = signed_session(request.cookies.get(COOKIE, ""), _accepted(cfg), time.time())
    if sid is None:
        raise HTTPException(401, "sign in with your name and the write token to answer the audit")
    try:
        held = await sessions.holder(sid)
    except UNREACHABLE:
        raise HTTPException(
            503,
            "cannot check the session now (the bus is unreachable): retry",
            {"Retry-After": str(BUS_RETRY_AFTER_S)},
        ) from None
    if held is None:
        raise HTTPException(401, "this session has ended: sign in again")
    user, writer = held
    if not writer or not user:
        raise HTTPException(403, "the audit records who answered: sign in with your name and the write token")
    return user


class _ReadGuard:
    """The read guard as plain ASGI middleware: a response passes straight to the server, so a
    streamed file's sends wait on the client itself (not on a middleware's queue) and the
    stream's own send timeout sees a client that stopped reading."""

    def __init__(self, app: ASGIApp, cfg: GatewaySettings, sessions: SessionBook) -> None:
        self.app = app
        self.cfg = cfg
        self.sessions = sessions

    def _guarded(self, scope: Scope) -> bool:
        if scope["type"] != "http" or not self.cfg.read_token.get_secret_value():
            return False
        # the path the routes match, whatever prefix a proxy mounts the gateway under
        root = str(scope.get("root_path", ""))
        path = str(scope.get("path", ""))
        path = path[len(root) :] if root and path.startswith(root) else path
        return scope.get("method") in ("GET", "HEAD") and path.startswith("/v1/") and path not in OPEN

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._guarded(scope):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            ok = await allowed(request, self.cfg, self.sessions)
        except UNREACHABLE:
            busy = _busy("cannot check the session now (the bus is unreachable): retry, or send the token")
            await busy(scope, receive, send)
            return
        if not ok:
            refused = JSONResponse(
                {"detail": NEEDS_TOKEN}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
            await refused(scope, receive, send)
            return

        async def still_allowed() -> bool:
            return await allowed(request, self.cfg, self.sessions)

        scope[STILL_ALLOWED] = still_allowed
        await self.app(scope, receive, send)


def guard_reads(app: FastAPI, cfg: GatewaySettings, sessions: SessionBook) -> None:
    limiter = SignInLimiter(cfg.signin_failures_per_minute)
    app.add_middleware(_ReadGuard, cfg=cfg, sessions=sessions)

    @app.post("/v1/session", status_code=204, tags=["service"])
    async def sign_in(request: Request, response: Response, authorization: str = Header("")) -> None:
        """Exchange the read (or write) token for a session cookie the pages' reads carry, for
        12 hours or until ``DELETE /v1/session``. An address that sent
        ``signin_failures_per_minute`` wrong tokens in the last minute is answered 429. A body
        ``{"user": "<name>"}`` names who signs in: the workbench's audit records answers under
        that name, from sessions signed in with the write token."""
        address, now = client_address(request), time.time()
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
        user = _user(await read_body(request, MAX_SIGNIN_BODY))
        writer = hmac.compare_digest(token.encode(), cfg.token.get_secret_value().encode())
        sid, value = new_session(token, now)
        try:
            await sessions.start(sid, now, user, writer)
        except UNREACHABLE:
            raise HTTPException(
                503,
                "cannot start a session now (the bus is unreachable): retry, or send the token",
                {"Retry-After": str(BUS_RETRY_AFTER_S)},
            ) from None
        response.set_cookie(
            COOKIE,
            value,
            max_age=SESSION_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/v1/",
        )

    def forget(response: Response) -> None:
        response.delete_cookie(COOKIE, path="/v1/", httponly=True, samesite="strict")

    @app.delete("/v1/session", status_code=204, response_model=None, tags=["service"])
    async def sign_out(request: Request, response: Response) -> Response | None:
        """End this browser's session on the server (its cookie value no longer reads anything,
        wherever it was copied to) and forget the cookie. The cookie is forgotten even when the
        server cannot be reached: then the answer is 503 and the session ends with its lifetime."""
        forget(response)
        sid = signed_session(request.cookies.get(COOKIE, ""), _accepted(cfg), time.time())
        if sid is not None:
            try:
                await sessions.end(sid)
            except UNREACHABLE:
                busy = _busy(
                    "this browser has forgotten its session, but the server cannot end it now (the "
                    "bus is unreachable): a copy of the cookie reads until the session expires"
                )
                forget(busy)
                return busy
        return None
