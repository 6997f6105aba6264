"""Fixtures unit tests of one family share."""

from __future__ import annotations

import pytest
from nav_blocks import mission
from skyqa.contracts.navigation import NavigationTask


@pytest.fixture(scope="module")
def task() -> NavigationTask:
    """The UrbanVideo-Bench tests' mission over the built-in blocks (:mod:`nav_blocks`)."""
    return mission(1.0)
