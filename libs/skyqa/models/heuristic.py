"""A labeller model that needs no weights, and says how little it knows.

It reads what a person could read off the prompt package without recognising anything: the
colour of the object in the red box of each view (``_colour``: figure against ground, under
shading; a shade only when it clearly beats the next in CIELAB, else the coarser word or no
colour at all), the box's shape, the LiDAR-measured size in the prompt (``_size``: nearest typical
urban object) and, when the deployment passes one, the class-name hint (a keyword table; it
wins over the size). Its confidence says how clearly the size or hint decided the category.
"""

from __future__ import annotations

import io
import json
import re
import time

import numpy as np
from PIL import Image

from skyqa.models._colour import figure_and_ring, measure_colour
from skyqa.models._size import likely_object, parse_size
from skyqa.models.base import error_response
from skyqa.v1 import model_pb2

HINT = re.compile(r"class-name hint:\s*\"?([A-Za-z0-9 _-]*)\"?", re.IGNORECASE)
KEYWORDS = {
    "building": ("building", "house", "tower", "residential", "office", "apartment"),
    "vehicle": ("car", "truck", "bus", "vehicle", "van"),
    "public_facility": ("lamp", "shelter", "bench", "kiosk", "toilet"),
    "urban_landscape": ("fountain", "statue", "sculpture", "monument", "plaza"),
    "transport_infrastructure": ("bridge", "road", "sign", "rail", "overpass"),
    "industrial_infrastructure": ("tank", "container", "chimney", "silo", "industrial", "crane"),
    "vegetation": ("tree", "hedge", "bush", "vegetation", "grass"),
    "other": ("billboard", "water_tower", "water tower"),
}
# longest keyword first, so "water tower" beats "tower"
_KEYWORDS_BY_LENGTH = sorted(
    ((k.replace("_", " "), c) for c, ks in KEYWORDS.items() for k in ks), key=lambda kc: -len(kc[0])
)


def category_for(hint: str) -> str | None:
    h = hint.lower().replace("_", " ")
    for keyword, category in _KEYWORDS_BY_LENGTH:
        if keyword in h:
            return category
    return None


class HeuristicLabeller:
    name = "heuristic-labeller"

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse:
        started = time.monotonic()
        if not request.images:
            return error_response(
                model_pb2.ERROR_CLASS_INVALID_REQUEST, "the labeller needs at least one image"
            )
        views, ratios = [], []
        for image in request.images:
            try:
                arr = np.asarray(Image.open(io.BytesIO(image.data)).convert("RGB"))
            except OSError as exc:
                return error_response(model_pb2.ERROR_CLASS_INVALID_REQUEST, f"unreadable image: {exc}")
            inside, ring, ratio = figure_and_ring(arr)
            views.append((inside, ring))
            ratios.append(ratio)
        measured = measure_colour(views)
        call = measured.call() if measured is not None else None
        # the word a description may use: None when the views do not decide even the hue
        colour = call.word if call is not None else None
        ratio = float(np.median(ratios))
        shape = "tall" if ratio > 1.6 else "low wide" if ratio < 0.6 else "compact"
        match = HINT.search(request.prompt)
        hint = (match.group(1).strip() if match else "").replace("_", " ")
        category = category_for(hint) if hint else None
        size = parse_size(request.prompt)
        subcategory = hint or "structure"
        confidence = 0.7 if colour is not None else 0.45
        if category is None and size is not None:
            # the size prior may use the best guess, which no description states
            category, subcategory, margin = likely_object(size, call.best if call is not None else "")
            confidence = 0.7 if margin >= 0.3 else 0.5
        elif category is None:
            category, confidence = "other", 0.2
        height = f", about {round(size[2])} m tall," if size is not None else ""
        description = f"{colour or ''} {subcategory}{height} with a {shape} silhouette"
        payload = {
            "category": category,
            "subcategory": subcategory,
            "description": " ".join(description.split()[:20]),
            "confidence": round(confidence, 2),
        }
        text = json.dumps(payload)
        return model_pb2.GenerateResponse(
            text=text,
            usage=model_pb2.Usage(
                prompt_tokens=len(request.prompt.split()), completion_tokens=len(text.split())
            ),
            latency_s=time.monotonic() - started,
            model=self.name,
        )
