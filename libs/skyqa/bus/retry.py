"""Retry delays are computed here because JetStream ignores consumer back-off on an explicit NAK."""

from __future__ import annotations


def retry_delay(num_delivered: int, base_s: float, max_s: float) -> float:
    """Exponential delay before redelivery number ``num_delivered + 1``, capped at ``max_s``."""
    exponent = max(0, num_delivered - 1)
    return float(min(max_s, base_s * (2.0**exponent)))
