"""Exception hierarchy.

SkyqaError
 ├── InvalidInput        bad request, config or key: reported, never retried
 │    ├── InvalidKey
 │    ├── UnknownScene
 │    ├── SimulatorUnavailable
 │    └── InvalidScanRequest
 ├── BlobNotFound
 └── TransientError      worth retrying (store or bus hiccup)
"""


class SkyqaError(Exception):
    """Base class of every error raised by skyqa code."""


class InvalidInput(SkyqaError):
    """Input that can never succeed; the message says what to fix."""

    reason = "invalid_input"


class InvalidKey(InvalidInput):
    reason = "invalid_key"


class UnknownScene(InvalidInput):
    reason = "unknown_scene"


class SimulatorUnavailable(InvalidInput):
    """The requested backend cannot run in this deployment (client missing)."""

    reason = "simulator_unavailable"


class InvalidScanRequest(InvalidInput):
    reason = "invalid_scan_request"


class BlobNotFound(SkyqaError):
    """The requested object does not exist in the store."""


class TransientError(SkyqaError):
    """A failure that may succeed on retry."""
