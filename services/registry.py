"""Every implemented service, by name. The composition root for the CLI and compose."""

from __future__ import annotations

from collections.abc import Callable

from skyqa.blob import BlobStore
from skyqa.runtime import Service, Settings

from services.capture import app as capture_app
from services.evaluator import app as evaluator_app
from services.fusion import app as fusion_app
from services.gateway import app as gateway_app
from services.labeller import app as labeller_app
from services.landmark import app as landmark_app
from services.mission_planner import app as mission_app
from services.qa_generator import app as qa_app
from services.renderer import app as renderer_app

Factory = Callable[[Settings, BlobStore | None], Service]

SERVICES: dict[str, Factory] = {
    "capture": capture_app.create,
    "fusion": fusion_app.create,
    "renderer": renderer_app.create,
    "landmark": landmark_app.create,
    "labeller": labeller_app.create,
    "mission_planner": mission_app.create,
    "qa_generator": qa_app.create,
    "evaluator": evaluator_app.create,
    "gateway": gateway_app.create,
}
