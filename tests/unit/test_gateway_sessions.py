"""Browser sessions of the gateway's read guard: the cookie value, and the sign-in limiter."""

from __future__ import annotations

import pytest

from services.gateway.sessions import SESSION_S, SignInLimiter, new_session, signed_session

NOW = 1_800_000_000.0


def test_a_session_cookie_is_signed_by_its_token_and_expires() -> None:
    sid, value = new_session("tok", NOW)
    assert signed_session(value, ["other", "tok"], NOW + 10) == sid
    assert "tok" not in value and len(sid) == 32
    assert signed_session(value, ["other"], NOW) is None  # a changed token ends every session
    assert signed_session(value, ["tok"], NOW + SESSION_S + 1) is None
    assert signed_session(value, ["tok"], NOW - 5) is None  # issued in the future
    forged = value[:-1] + ("0" if value[-1] != "0" else "1")
    assert signed_session(forged, ["tok"], NOW) is None
    assert new_session("tok", NOW)[0] != sid  # each sign-in is a session of its own


@pytest.mark.parametrize(
    "value",
    [
        "",
        "\u00b2.x",  # isdigit() but not int()
        "9" * 400 + ".x",  # int(), but no float for "now - issued"
        "9" * 5000 + ".x",  # past int()'s digit limit
        "a" * 32 + "." + "9" * 400 + "." + "0" * 64,
        "a" * 32 + ".\u0661\u0662." + "0" * 64,  # digits of another script
        "A" * 32 + ".1." + "0" * 64,
        "1800000000." + "0" * 64,  # the cookie of the old, unrevocable format
    ],
)
def test_malformed_cookie_values_are_no_session(value: str) -> None:
    assert signed_session(value, ["tok"], NOW) is None


def test_the_sign_in_limiter_forgets_old_failures_and_stays_bounded() -> None:
    limiter = SignInLimiter(failures=3, window_s=60, addresses=100)
    for t in (0.0, 1.0, 2.0):
        assert limiter.retry_after("a", t) is None
        limiter.failed("a", t)
    assert limiter.retry_after("a", 10.0) == pytest.approx(50.0)
    assert limiter.retry_after("b", 10.0) is None
    assert limiter.retry_after("a", 60.5) is None  # the first failure is a minute old
    limiter.failed("a", 60.5)  # three in the last minute again: until the second is a minute old
    assert limiter.retry_after("a", 60.6) == pytest.approx(0.4)
    limiter.succeeded("a")
    assert limiter.retry_after("a", 60.6) is None
    for i in range(10_000):
        limiter.failed(f"10.0.{i // 256}.{i % 256}", 100.0)
    assert len(limiter) == 100
