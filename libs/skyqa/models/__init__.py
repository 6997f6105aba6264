"""Vision-language models behind one contract (``proto/skyqa/v1/model.proto``).

Adapters: an OpenAI-compatible HTTP backend (vLLM, SGLang, Ollama, llama.cpp, OpenAI), a
gRPC client for any server of the contract, and built-in honest models that need no weights.
Errors are returned as an ``ErrorClass`` in the response, never raised, so callers decide
about retries with full information.
"""

from skyqa.models.base import VisionModel, error_response
from skyqa.models.factory import open_model
from skyqa.models.grpc import GrpcModel, serve_grpc
from skyqa.models.heuristic import HeuristicLabeller
from skyqa.models.openai_http import OpenAICompatModel, openai_app

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
