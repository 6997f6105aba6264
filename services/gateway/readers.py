"""Who may read: open by default (a release is meant to be published); with
``SKYQA_GATEWAY__READ_TOKEN`` set, every read under ``/v1/`` needs that token or the write
token, as a bearer header or as the session cookie ``POST /v1/session`` sets for a browser
(whose images, videos and event streams cannot carry a header)."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from skyqa.runtime.auth import bearer_token
from skyqa.settings import GatewaySettings

COOKIE = "skyqa_read"
SESSION_S = 12 * 3600  # a signed-in browser signs in again after this
OPEN = frozenset({"/v1/info", "/v1/session"})  # what a page needs before it has signed in


def _signature(secret: str, issued: int) -> str:
    return hmac.new(secret.encode(), f"skyqa read session {issued}".encode(), hashlib.sha256).hexdigest()


def _cookie(secret: str, now: float) -> str:
    """``<issued>.<signature>``: derived from the token, which is never stored, and expiring."""
    issued = int(now)
    return f"{issued}.{_signature(secret, issued)}"


def _session_ok(value: str, tokens: list[str], now: float) -> bool:
    issued, _, signature = value.partition(".")
    if not issued.isdigit() or not 0 <= now - int(issued) <= SESSION_S:
        return False
    return any(hmac.compare_digest(signature.encode(), _signature(t, int(issued)).encode()) for t in tokens)


def _accepted(cfg: GatewaySettings) -> list[str]:
    return [t for t in (cfg.read_token.get_secret_value(), cfg.token.get_secret_value()) if t]


def _token_ok(authorization: str, tokens: list[str]) -> str | None:
    given = bearer_token(authorization)
    if given is None:
        return None
    return next((t for t in tokens if hmac.compare_digest(given.encode(), t.encode())), None)


def allowed(request: Request, cfg: GatewaySettings) -> bool:
    tokens = _accepted(cfg)
    if _token_ok(request.headers.get("authorization", ""), tokens) is not None:
        return True
    return _session_ok(request.cookies.get(COOKIE, ""), tokens, time.time())


def guard_reads(app: FastAPI, cfg: GatewaySettings) -> None:
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
            and not allowed(request, cfg)
        ):
            return JSONResponse(
                {"detail": "reading needs the read token: send 'Authorization: Bearer <token>' or sign in"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)

    @app.post("/v1/session", status_code=204, tags=["service"])
    async def sign_in(request: Request, response: Response, authorization: str = Header("")) -> None:
        """Exchange the read (or write) token for a session cookie the pages' reads carry, for
        12 hours."""
        token = _token_ok(authorization, _accepted(cfg))
        if token is None:
            raise HTTPException(401, "wrong or missing token", {"WWW-Authenticate": "Bearer"})
        response.set_cookie(
            COOKIE,
            _cookie(token, time.time()),
            max_age=SESSION_S,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/v1/",
        )

    @app.delete("/v1/session", status_code=204, tags=["service"])
    async def sign_out(response: Response) -> None:
        """Forget this browser's session cookie."""
        response.delete_cookie(COOKIE, path="/v1/", httponly=True, samesite="strict")
