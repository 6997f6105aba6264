"""Vision-language models behind one contract (``proto/skyqa/v1/model.proto``).

Adapters: an OpenAI-compatible HTTP backend (vLLM, SGLang, Ollama, llama.cpp, OpenAI), a
gRPC client for any server of the contract, and built-in honest models that need no weights.
Errors are returned as an ``ErrorClass`` in the response, never raised, so callers decide
about retries with full information.

The names below are imported on first use, so that reading the endpoint allow-list
(:mod:`skyqa.models.endpoints`, used by the gateway) does not load grpc, httpx and Pillow.
"""

from typing import TYPE_CHECKING

from skyqa._lazy import lazy_exports

if TYPE_CHECKING:
    from skyqa.models.base import VisionModel, error_response
    from skyqa.models.factory import open_model
    from skyqa.models.grpc import GrpcModel, serve_grpc
    from skyqa.models.heuristic import HeuristicLabeller
    from skyqa.models.openai_http import OpenAICompatModel, openai_app
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "skyqa.models.base": ("VisionModel", "error_response"),
            "skyqa.models.factory": ("open_model",),
            "skyqa.models.grpc": ("GrpcModel", "serve_grpc"),
            "skyqa.models.heuristic": ("HeuristicLabeller",),
            "skyqa.models.openai_http": ("OpenAICompatModel", "openai_app"),
        },
    )

__all__ = [
    "GrpcModel",
    "HeuristicLabeller",
    "OpenAICompatModel",
    "VisionModel",
    "error_response",
    "open_model",
    "openai_app",
    "serve_grpc",
]
