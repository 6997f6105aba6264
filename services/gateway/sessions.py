"""Browser sessions of the read guard, and how often an address may guess a token.

A session is live while its id is in the JetStream KV bucket ``skyqa-sessions``: signing out
deletes it there, so the cookie stops working at once on every gateway replica and after a
restart, and the bucket's TTL (the session lifetime) drops ids nobody signed out of. The cookie
is also signed with the token it was exchanged for, so a forged one never costs a KV lookup and
a changed token ends every session. Sign-in failures are counted per client address in memory:
losing them on a restart only gives a guesser one more minute's worth of attempts.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections import OrderedDict, deque

from skyqa.bus import JsonKV

BUCKET = "skyqa-sessions"
SESSION_S = 12 * 3600  # a signed-in browser signs in again after this
# <session id>.<issued, unix seconds>.<HMAC-SHA256 of both under the token>, ASCII only: a
# value of another shape is no session, whatever int() or float() would make of its parts
_VALUE = re.compile(r"^([0-9a-f]{32})\.([0-9]{1,12})\.([0-9a-f]{64})$", re.ASCII)


def _signature(secret: str, sid: str, issued: int) -> str:
    message = f"skyqa read session {sid} {issued}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def new_session(secret: str, now: float) -> tuple[str, str]:
    """A fresh session id and the cookie value that carries it."""
    sid, issued = secrets.token_hex(16), int(now)
    return sid, f"{sid}.{issued}.{_signature(secret, sid, issued)}"


def signed_session(value: str, tokens: list[str], now: float) -> str | None:
    """The session id of a well-formed, unexpired cookie value signed with one of ``tokens``."""
    m = _VALUE.match(value)
    if m is None:
        return None
    sid, issued = m.group(1), int(m.group(2))
    if not 0 <= now - issued <= SESSION_S:
        return None
    signature = m.group(3).encode()
    if any(hmac.compare_digest(signature, _signature(t, sid, issued).encode()) for t in tokens):
        return sid
    return None


class SessionBook:
    """Live session ids in KV (``BUCKET``, opened with the session lifetime as its TTL)."""

    def __init__(self, kv: JsonKV) -> None:
        self._kv = kv

    async def start(self, sid: str, issued: float, user: str = "", writer: bool = False) -> None:
        """``user``: the name the person signed in with (who the workbench's audit records);
        ``writer``: the session was exchanged for the write token, not the read token."""
        await self._kv.put(sid, {"issued": int(issued), "user": user, "writer": writer})

    async def live(self, sid: str) -> bool:
        return (await self._kv.get(sid))[0] is not None

    async def holder(self, sid: str) -> tuple[str, bool] | None:
        """The user name and writer flag of a live session, or None when it has ended."""
        doc = (await self._kv.get(sid))[0]
        if not isinstance(doc, dict):
            return None
        user, writer = doc.get("user", ""), doc.get("writer", False)
        return (user if isinstance(user, str) else "", writer is True)

    async def end(self, sid: str) -> None:
        await self._kv.delete(sid)


class SignInLimiter:
    """At most ``failures`` wrong tokens per address in ``window_s``; the most recent
    ``addresses`` addresses are remembered, so memory stays bounded whoever knocks."""

    def __init__(self, failures: int, window_s: float = 60.0, addresses: int = 4096) -> None:
        self.failures = failures
        self.window_s = window_s
        self.addresses = addresses
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._seen)

    def retry_after(self, address: str, now: float) -> float | None:
        """Seconds until ``address`` may try again, or None if it may now."""
        times = self._seen.get(address)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._seen[address]
            return None
        if len(times) < self.failures:
            return None
        return times[0] + self.window_s - now

    def failed(self, address: str, now: float) -> None:
        times = self._seen.setdefault(address, deque(maxlen=self.failures))
        times.append(now)
        self._seen.move_to_end(address)
        while len(self._seen) > self.addresses:
            self._seen.popitem(last=False)

    def succeeded(self, address: str) -> None:
        self._seen.pop(address, None)
