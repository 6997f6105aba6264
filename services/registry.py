"""Every implemented service, by name. The composition root for the CLI and compose.

A service's module is imported when its factory is called, not with this registry: a
``skyqa serve gateway`` container would otherwise load every other service's dependencies
(the renderer's Open3D and numba kernels, the qa-generator's scipy and scikit-learn).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from skyqa.blob import BlobStore
from skyqa.runtime import Service, Settings

Factory = Callable[[Settings, BlobStore | None], Service]


def _factory(module: str) -> Factory:
    def create(settings: Settings, store: BlobStore | None = None) -> Service:
        made: Service = importlib.import_module(module).create(settings, store)
        return made

    return create


SERVICES: dict[str, Factory] = {
    "capture": _factory("services.capture.app"),
    "fusion": _factory("services.fusion.app"),
    "renderer": _factory("services.renderer.app"),
    "landmark": _factory("services.landmark.app"),
    "labeller": _factory("services.labeller.app"),
    "mission_planner": _factory("services.mission_planner.app"),
    "qa_generator": _factory("services.qa_generator.app"),
    "evaluator": _factory("services.evaluator.app"),
    "gateway": _factory("services.gateway.app"),
}
