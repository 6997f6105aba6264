"""Model output -> label, with named lenient stages and small recorded repairs.

UAV-DualCog's parser ends in a salvage stage that fills defaults (category "other",
confidence 0.6) for unparseable text; that silently labels landmarks, so it is not done here:
output that no stage can read is a failed attempt.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from skyqa.answers import balanced_objects
from skyqa.sim.classes import CATEGORIES

FENCED_JSON = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)
FENCED_ANY = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
GREEDY = re.compile(r"\{.*\}", re.DOTALL)
MAX_WORDS = 20


def extract_json(text: str) -> tuple[dict[str, Any] | None, str]:
    """The first JSON object found, and the name of the stage that found it."""
    candidates: list[tuple[str, str]] = []
    candidates += [("fenced_json", m) for m in FENCED_JSON.findall(text)]
    candidates += [("fenced_block", m) for m in FENCED_ANY.findall(text)]
    candidates.append(("raw", text.strip()))
    candidates += [("balanced_object", m) for m in balanced_objects(text)]
    candidates += [("greedy_braces", m) for m in GREEDY.findall(text)]
    for stage, snippet in candidates:
        try:
            value = json.loads(snippet)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(value, dict):
            return value, stage
    return None, "unparseable"


@dataclass
class Label:
    category: str
    subcategory: str
    description: str
    confidence: float
    repairs: list[str] = field(default_factory=list)


def validate(payload: dict[str, Any]) -> tuple[Label | None, str]:
    repairs: list[str] = []
    lowered = {str(k).strip().lower(): v for k, v in payload.items()}
    category = str(lowered.get("category", "")).strip().lower().replace(" ", "_").replace("-", "_")
    if category not in CATEGORIES:
        return None, f"category {category!r} is not one of the 8 categories"
    subcategory = " ".join(str(lowered.get("subcategory", "")).split())
    if not subcategory:
        return None, "subcategory is empty"
    words = str(lowered.get("description", "")).split()
    if not words:
        return None, "description is empty"
    if len(words) > MAX_WORDS:
        words = words[:MAX_WORDS]
        repairs.append("description_truncated")
    try:
        confidence = float(lowered.get("confidence"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, "confidence is missing or not a number"
    if not 0.0 <= confidence <= 1.0:
        confidence = min(1.0, max(0.0, confidence))
        repairs.append("confidence_clipped")
    return Label(category, subcategory, " ".join(words), confidence, repairs), ""
