"""Model output -> label, with named lenient stages and small recorded repairs; and the
plain-text rule for label and reviewer prose.

UAV-DualCog's parser ends in a salvage stage that fills defaults (category "other",
confidence 0.6) for unparseable text; that silently labels landmarks, so it is not done here:
output that no stage can read is a failed attempt.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from skyqa.answers import balanced_objects
from skyqa.sim.classes import CATEGORIES

FENCED_JSON = re.compile(r"```json\s*(.*?)```", re.DOTALL | re.IGNORECASE)
FENCED_ANY = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
GREEDY = re.compile(r"\{.*\}", re.DOTALL)
MAX_WORDS = 20

# Prose that reaches released files and prompts (a label's subcategory and description) or
# sits beside them (reviewer notes) is plain text: letters, marks and digits of any script,
# spaces and ordinary punctuation. Markup characters (< > &), backticks, control and format
# characters (line breaks, bidi overrides, zero-width marks) are refused at the review API and
# removed from model output, so no reader of a release has to escape it.
PROSE_PUNCTUATION = frozenset(" ,.;:'\"-()/!?%\u2018\u2019\u201c\u201d\u2013\u2014")
PROSE_RULE = "letters, digits, spaces and , . ; : ' \" - ( ) / ! ? %"
MAX_SUBCATEGORY_CHARS = 64
MAX_DESCRIPTION_CHARS = 300
MAX_NOTE_CHARS = 500
# a label's reason (the labeller's parse stage and repairs, or why it failed) is prose that may
# also hold the underscores of stage, repair and error-class names
MAX_REASON_CHARS = 500
REASON_EXTRA = "_"
TAG = re.compile(r"<[^<>]*>?")
# the name of the model that made a label, as an endpoint reports it ("gpt-4o",
# "Qwen/Qwen2.5-VL-7B-Instruct", "llava:13b"): an identifier, never prose
MODEL_NAME_CHARS = 128
MODEL_NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{{0,{MODEL_NAME_CHARS - 1}}}$")


def _prose_char(c: str, extra: str = "") -> bool:
    return c in PROSE_PUNCTUATION or c in extra or unicodedata.category(c)[0] in "LMN"


def prose_problem(text: str, what: str, limit: int, extra: str = "") -> str:
    """Why ``text`` is not plain prose of at most ``limit`` characters ("" when it is);
    ``extra`` names characters allowed beyond the rule."""
    if len(text) > limit:
        return f"{what} must be at most {limit} characters, got {len(text)}"
    bad = sorted({c for c in text if not _prose_char(c, extra)})
    if bad:
        return f"{what} may hold only {PROSE_RULE}{extra and ' ' + ' '.join(extra)}, not {''.join(bad)!r}"
    return ""


def plain_prose(text: str, extra: str = "") -> str:
    """``text`` with tags, then every other character outside the prose rule (and ``extra``),
    removed and whitespace collapsed: a tag's attributes are not prose and would read as
    garbage."""
    text = TAG.sub(" ", text)
    return " ".join("".join(c if _prose_char(c, extra) else " " for c in text).split())


def is_model_name(text: str) -> bool:
    """Whether ``text`` is a model's name: letters, digits and ``. _ : / @ + -``, at most
    :data:`MODEL_NAME_CHARS`."""
    return bool(MODEL_NAME.match(text))


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
    """A label from a model's (untrusted) JSON: text outside the prose rule is removed and
    recorded as a repair; a field left empty, or too long to be prose, refuses the label."""
    repairs: list[str] = []
    lowered = {str(k).strip().lower(): v for k, v in payload.items()}
    category = str(lowered.get("category", "")).strip().lower().replace(" ", "_").replace("-", "_")
    if category not in CATEGORIES:
        return None, f"category {category!r} is not one of the 8 categories"
    texts = {}
    for name in ("subcategory", "description"):
        raw = " ".join(str(lowered.get(name, "")).split())
        texts[name] = plain_prose(raw)
        if texts[name] != raw:
            repairs.append(f"{name}_markup_removed")
        if not texts[name]:
            return None, f"{name} is empty" + (" once markup is removed" if raw else "")
    subcategory = texts["subcategory"]
    if len(subcategory) > MAX_SUBCATEGORY_CHARS:
        return None, f"subcategory is longer than {MAX_SUBCATEGORY_CHARS} characters"
    words = texts["description"].split()
    if len(words) > MAX_WORDS:
        words = words[:MAX_WORDS]
        repairs.append("description_truncated")
    if len(" ".join(words)) > MAX_DESCRIPTION_CHARS:
        return None, f"description is longer than {MAX_DESCRIPTION_CHARS} characters"
    try:
        confidence = float(lowered.get("confidence"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None, "confidence is missing or not a number"
    if not 0.0 <= confidence <= 1.0:
        confidence = min(1.0, max(0.0, confidence))
        repairs.append("confidence_clipped")
    return Label(category, subcategory, " ".join(words), confidence, repairs), ""
