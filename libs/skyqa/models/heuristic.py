"""A labeller model that needs no weights, and says how little it knows.

It reads what a person could read off the prompt package without recognising anything: the
dominant colour of the pixels inside the red box drawn on each view, the box's shape, and the
weak class-name hint in the prompt. The category comes from the hint through a keyword table,
so its confidence is high only when the hint maps to a category and the views agree on colour.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections import Counter

import numpy as np
from numpy.typing import NDArray
from PIL import Image

from skyqa.models.base import error_response
from skyqa.sim.classes import COLOURS
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
_NAMES = list(COLOURS)
_PALETTE = np.array([COLOURS[n] for n in _NAMES], dtype=np.float32) * 255


def category_for(hint: str) -> str | None:
    h = hint.lower().replace("_", " ")
    for keyword, category in _KEYWORDS_BY_LENGTH:
        if keyword in h:
            return category
    return None


def red_box_crop(img: NDArray[np.uint8]) -> tuple[NDArray[np.uint8], float]:
    """Pixels inside the drawn red box, and its height/width ratio; the whole image if none."""
    red = (img[:, :, 0] > 200) & (img[:, :, 1] < 70) & (img[:, :, 2] < 70)
    rows, cols = np.flatnonzero(red.any(axis=1)), np.flatnonzero(red.any(axis=0))
    if len(rows) < 2 or len(cols) < 2:
        h, w = img.shape[:2]
        return img, h / max(1, w)
    y0, y1, x0, x1 = rows[0] + 3, rows[-1] - 2, cols[0] + 3, cols[-1] - 2
    if y1 <= y0 or x1 <= x0:
        return img, 1.0
    return img[y0:y1, x0:x1], (y1 - y0) / max(1, x1 - x0)


def dominant_colour(pixels: NDArray[np.uint8]) -> str:
    flat = pixels.reshape(-1, 3).astype(np.float32)
    if len(flat) > 20000:
        flat = flat[:: len(flat) // 20000]
    nearest = np.argmin(((flat[:, None, :] - _PALETTE[None, :, :]) ** 2).sum(-1), axis=1)
    return _NAMES[int(np.bincount(nearest, minlength=len(_NAMES)).argmax())]


class HeuristicLabeller:
    name = "heuristic-labeller"

    async def generate(self, request: model_pb2.GenerateRequest) -> model_pb2.GenerateResponse:
        started = time.monotonic()
        if not request.images:
            return error_response(
                model_pb2.ERROR_CLASS_INVALID_REQUEST, "the labeller needs at least one image"
            )
        colours, ratios = [], []
        for image in request.images:
            try:
                arr = np.asarray(Image.open(io.BytesIO(image.data)).convert("RGB"))
            except OSError as exc:
                return error_response(model_pb2.ERROR_CLASS_INVALID_REQUEST, f"unreadable image: {exc}")
            crop, ratio = red_box_crop(arr)
            colours.append(dominant_colour(crop))
            ratios.append(ratio)
        match = HINT.search(request.prompt)
        hint = (match.group(1).strip() if match else "").replace("_", " ")
        category = category_for(hint) if hint else None
        colour, votes = Counter(colours).most_common(1)[0]
        agreement = votes / len(colours)
        ratio = float(np.median(ratios))
        shape = "tall" if ratio > 1.6 else "low wide" if ratio < 0.6 else "compact"
        subcategory = hint or "structure"
        description = f"{colour} {subcategory} with a {shape} silhouette"
        if category is None:
            confidence = 0.2
            category = "other"
        else:
            confidence = 0.7 if agreement >= 0.5 else 0.45
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
