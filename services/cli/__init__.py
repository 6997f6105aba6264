"""The ``skyqa`` command line: run the services, submit scans, follow runs, evaluate releases.

The CLI composes stages (``refresh`` runs the renderer, the mission bundler and the QA
release again), so it may import services; no service imports it.
"""

from __future__ import annotations

# each module registers its commands; this order is the order ``skyqa --help`` lists them in
# isort: off
from services.cli import run  # noqa: F401
from services.cli import evaluate  # noqa: F401
from services.cli import tools  # noqa: F401
from services.cli import release  # noqa: F401
from services.cli import sim  # noqa: F401

# isort: on
from services.cli._app import app


def main() -> None:
    app(prog_name="skyqa")


__all__ = ["app", "main"]
