"""Exception hierarchy.

SkyqaError
 ├── InvalidInput        bad request, config or key: reported, never retried
 │    ├── InvalidKey
 │    ├── UnknownScene
 │    ├── SimulatorUnavailable
 │    ├── StrayResult
 │    └── InvalidScanRequest
 ├── BlobNotFound
 └── TransientError      worth retrying (store or bus hiccup)
"""


class SkyqaError(Exception):
    """Base class of every error raised by skyqa code."""


class InvalidInput(SkyqaError):
    """Input that can never succeed; the message says what to fix."""

    reason = "invalid_input"
    # a dead-lettered message fails the run its payload names, unless the error says the
    # message has no say over that run
    fails_run = True


class InvalidKey(InvalidInput):
    reason = "invalid_key"


class UnknownScene(InvalidInput):
    reason = "unknown_scene"


class SimulatorUnavailable(InvalidInput):
    """The requested backend cannot run in this deployment (client missing)."""

    reason = "simulator_unavailable"


class StrayResult(InvalidInput):
    """A result (a render-done event) that answers no job its run asked for: dead-lettered, but
    the run it names goes on, since a stray or forged message has no say over it."""

    reason = "stray_result"
    fails_run = False


class InvalidScanRequest(InvalidInput):
    reason = "invalid_scan_request"


class RunConflict(InvalidScanRequest):
    """A scan request names a run that exists with other settings. It is dead-lettered, but the
    run it names is not its to fail: that run goes on with the settings it was accepted with."""

    reason = "run_conflict"
    fails_run = False


class BlobNotFound(SkyqaError):
    """The requested object does not exist in the store."""


class TransientError(SkyqaError):
    """A failure that may succeed on retry."""
