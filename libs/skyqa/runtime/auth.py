"""Bearer tokens on HTTP routes (the gateway's writes, the review web).

RFC 6750: the scheme is case-insensitive, the token is required after it, and a header
without the scheme is refused rather than taken as a bare token.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException


def bearer_token(authorization: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def check_bearer(authorization: str, expected: str, what: str) -> None:
    """Raise 503 while ``expected`` is unset, 401 unless the header carries it."""
    if not expected:
        raise HTTPException(503, f"{what} is disabled: no token is configured")
    given = bearer_token(authorization)
    if given is None:
        raise HTTPException(401, "send 'Authorization: Bearer <token>'", {"WWW-Authenticate": "Bearer"})
    check_token(given, expected, "wrong bearer token")


def check_token(given: str, expected: str, message: str = "wrong token") -> None:
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(401, message, {"WWW-Authenticate": "Bearer"})
