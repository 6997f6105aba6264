"""Service runtime: settings, logging, metrics, progress reporting and the Service base."""

from skyqa.runtime.logs import configure_logging
from skyqa.runtime.progress import ProgressReporter, apply_progress
from skyqa.runtime.service import Service
from skyqa.settings import ConfigError, Settings, load_settings

__all__ = [
    "ConfigError",
    "ProgressReporter",
    "Service",
    "Settings",
    "apply_progress",
    "configure_logging",
    "load_settings",
]
