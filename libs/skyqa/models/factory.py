from __future__ import annotations

from skyqa.errors import InvalidInput
from skyqa.models.base import VisionModel
from skyqa.models.grpc import GrpcModel
from skyqa.models.heuristic import HeuristicLabeller
from skyqa.models.openai_http import OpenAICompatModel
from skyqa.settings import ModelEndpoint


def open_model(endpoint: ModelEndpoint) -> VisionModel:
    if endpoint.kind == "heuristic":
        return HeuristicLabeller()
    if not endpoint.url:
        raise InvalidInput(f"a {endpoint.kind} model endpoint needs a url")
    if endpoint.kind == "openai":
        return OpenAICompatModel(
            endpoint.url,
            endpoint.model,
            api_key_env=endpoint.api_key_env,
            timeout_s=endpoint.timeout_s,
            max_attempts=endpoint.max_attempts,
            rpm=endpoint.rpm,
            tpm=endpoint.tpm,
        )
    return GrpcModel(endpoint.url, endpoint.model, timeout_s=endpoint.timeout_s)
