"""One landmark through the model, with bounded retries (never an endless loop)."""

from __future__ import annotations

from skyqa.blob import BlobStore
from skyqa.labels import extract_json, validate
from skyqa.models import VisionModel
from skyqa.models.base import RETRYABLE
from skyqa.v1 import labeller_pb2, model_pb2

from services.labeller.prompt import build_package

RETRY_NOTE = (
    "Your previous answer was empty or invalid ({error}). Answer again with exactly one JSON object "
    "with the keys category, subcategory, description and confidence."
)


async def label_landmark(
    request: labeller_pb2.LabelRequest,
    model: VisionModel,
    store: BlobStore,
    max_attempts: int = 3,
    class_hint: bool = False,
) -> labeller_pb2.LabelResult:
    system, prompt, images, used = build_package(request, store, class_hint)
    result = labeller_pb2.LabelResult(
        run_id=request.run_id,
        scene_id=request.scene_id,
        landmark_id=request.landmark_id,
        model=model.name,
        views_used=used,
    )
    error = ""
    for attempt in range(1, max_attempts + 1):
        gen = model_pb2.GenerateRequest(
            system=system, prompt=prompt, request_id=f"{request.landmark_id}:{attempt}"
        )
        for data, direction in images:
            gen.images.add(data=data, mime_type="image/jpeg", label=direction)
        gen.params.temperature = 0.2 if attempt == 1 else 0.0
        gen.params.max_tokens = 500
        if attempt > 1:
            gen.prompt = f"{prompt}\n\n{RETRY_NOTE.format(error=error)}"
        out = await model.generate(gen)
        result.attempts = attempt
        if out.error_class:
            error = f"model error {model_pb2.ErrorClass.Name(out.error_class)}: {out.error_message}"
            if out.error_class not in RETRYABLE:
                break
            continue
        payload, stage = extract_json(out.text)
        if payload is None:
            error = "no JSON object in the answer"
            continue
        label, problem = validate(payload)
        if label is None:
            error = problem
            continue
        result.ok = True
        result.model = out.model or model.name  # what the server says it ran
        result.category, result.subcategory = label.category, label.subcategory
        result.description, result.confidence = label.description, label.confidence
        result.reason = ",".join([stage, *label.repairs])
        return result
    result.ok = False
    result.reason = f"failed after {result.attempts} attempt(s): {error}"
    return result
