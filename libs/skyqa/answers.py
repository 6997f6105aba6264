"""Answer parsing with provenance: strict JSON first, then ordered lenient stages, each named.

Every parse says which stage produced it, so strict accuracy (``strict_json`` only) and lenient
accuracy (any stage) are both reported. There is never a random fallback: an answer that no
stage reads is ``unparseable``; a model that says it cannot tell is ``abstain``.

Stages for options: ``strict_json`` (the whole reply is the contract's JSON object),
``embedded_json`` (a JSON object inside fences or prose, after reasoning tags are removed),
``answer_cue`` (the last "answer: X" / "option X" with a valid letter), ``option_text`` (the
reply names exactly one option's text), ``bare_letter`` (the reply is essentially one letter).
Boxes are normalized [x1, y1, x2, y2] in [0, 1] as the prompt states; a box outside [0, 1] is
invalid, never rescaled by guessing a convention.

Standard library only, on purpose: ``skyqa export lmms-eval`` ships this file verbatim so the
exported task parses replies exactly as the evaluator does.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["choice", "abstain", "unparseable", "request_failed", "not_run"]
STRICT = "strict_json"

_THINK = re.compile(r"<think>.*?</think>|<reasoning>.*?</reasoning>", re.S | re.I)
_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S | re.I)
_ABSTAIN = re.compile(
    r"\b(cannot|can't|can not|unable to) (determine|tell|answer|see|identify)\b"
    r"|\b(cannot|can't|can not) be (determined|told|answered)\b"
    r"|\bnot (enough|sufficient) information\b|\bI don't know\b|\bnot sure\b",
    re.I,
)


@dataclass
class Parsed:
    kind: Kind
    stage: str = ""
    option: str = ""
    options: list[str] = field(default_factory=list)
    bbox: list[float] | None = None
    intervals: dict[str, list[list[float]]] = field(default_factory=dict)
    count: int | None = None
    count_intervals: list[list[float]] = field(default_factory=list)
    truncated: bool = False
    steps: list[Any] | None = None  # reasoning-step answers, when the reply's JSON carries them

    @property
    def strict(self) -> bool:
        return self.kind == "choice" and self.stage == STRICT


def balanced_objects(text: str) -> list[str]:
    """Every top-level ``{...}`` span, skipping braces inside JSON strings."""
    out, depth, start = [], 0, -1
    in_str = escape = False
    for i, ch in enumerate(text):
        if in_str:
            escape = ch == "\\" and not escape
            if ch == '"' and not escape:
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                out.append(text[start : i + 1])
    return out


def _clean(text: str) -> tuple[str, bool]:
    truncated = bool(re.search(r"<think>", text, re.I)) and not re.search(r"</think>", text, re.I)
    return _THINK.sub(" ", text).strip(), truncated


def _objects(text: str) -> list[tuple[str, Any]]:
    """JSON objects in the reply: the whole reply, fenced blocks, then balanced {...} spans."""
    out: list[tuple[str, Any]] = []
    try:
        whole = json.loads(text)
        if isinstance(whole, dict):
            return [(STRICT, whole)]
    except ValueError:
        pass
    for m in _FENCE.finditer(text):
        try:
            out.append(("embedded_json", json.loads(m.group(1))))
        except ValueError:
            continue
    for span in balanced_objects(text):
        try:
            obj = json.loads(span)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(("embedded_json", obj))
    return out


def _box(value: Any) -> list[float] | None:
    if not isinstance(value, list | tuple) or len(value) != 4:
        return None
    try:
        box = [float(v) for v in value]
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) and -1e-6 <= v <= 1 + 1e-6 for v in box):
        return None
    x0, y0, x1, y1 = box
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    return [min(max(v, 0.0), 1.0) for v in (x0, y0, x1, y1)]


def parse_choice(text: str, option_ids: list[str], option_labels: list[str] | None = None) -> Parsed:
    """One option (and an optional box) from an image-task reply."""
    clean, truncated = _clean(text)
    valid = set(option_ids)
    for stage, obj in _objects(clean):
        oid = obj.get("answer_option_id")
        if (
            oid is None
            and isinstance(obj.get("answer_option_ids"), list)
            and len(obj["answer_option_ids"]) == 1
        ):
            oid = obj["answer_option_ids"][0]
        if isinstance(oid, str) and oid.strip().upper() in valid:
            return Parsed(
                "choice",
                stage,
                option=oid.strip().upper(),
                bbox=_box(obj.get("bbox_xyxy_norm")),
                truncated=truncated,
                steps=obj["steps"] if isinstance(obj.get("steps"), list) else None,
            )
    bbox = _loose_box(clean)
    cue = list(
        re.finditer(r"(?:answer|option|choice)\s*(?:is|:)?\s*\**\(?([A-Z])\)?\**(?![A-Za-z])", clean, re.I)
    )
    for m in reversed(cue):
        letter = m.group(1).upper()
        if letter in valid:
            return Parsed("choice", "answer_cue", option=letter, bbox=bbox, truncated=truncated)
    if option_labels:
        low = clean.lower()
        hits = [
            oid
            for oid, lab in zip(option_ids, option_labels, strict=True)
            if re.search(rf"\b{re.escape(lab.lower())}\b", low)
        ]
        # "Front-Left" also contains "Front": keep the longest labels that matched
        hits = [
            h
            for h in hits
            if not any(
                h != o
                and option_labels[option_ids.index(h)].lower() in option_labels[option_ids.index(o)].lower()
                for o in hits
            )
        ]
        if len(hits) == 1:
            return Parsed("choice", "option_text", option=hits[0], bbox=bbox, truncated=truncated)
    bare = re.fullmatch(r"\W*([A-Z])\W*", clean)
    if bare and bare.group(1) in valid:
        return Parsed("choice", "bare_letter", option=bare.group(1), bbox=bbox, truncated=truncated)
    if _ABSTAIN.search(clean):
        return Parsed("abstain", "abstain_cue", truncated=truncated)
    return Parsed("unparseable", truncated=truncated)


def _loose_box(text: str) -> list[float] | None:
    m = re.search(r"bbox[_a-z]*\"?\s*[:=]\s*\[([^\]]*)\]", text, re.I)
    if not m:
        return None
    try:
        return _box([float(v) for v in m.group(1).split(",")])
    except ValueError:
        return None


def _intervals(value: Any) -> list[list[float]] | None:
    """``[[s, e], ...]`` or ``[{start_sec, end_sec}, ...]``; reversed pairs are swapped."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if isinstance(item, dict):
            item = [item.get("start_sec", item.get("start")), item.get("end_sec", item.get("end"))]
        if not isinstance(item, list | tuple) or len(item) != 2:
            return None
        try:
            s, e = float(item[0]), float(item[1])
        except (TypeError, ValueError):
            return None
        if not (math.isfinite(s) and math.isfinite(e)):
            return None
        out.append(sorted([s, e]))
    return out


def parse_joint(text: str, option_ids: list[str]) -> Parsed:
    """Several options, each with intervals (Flight Behavior Recognition and Localization)."""
    clean, truncated = _clean(text)
    valid = set(option_ids)
    for stage, obj in _objects(clean):
        answers = obj.get("answers")
        if isinstance(answers, list):
            picked: dict[str, list[list[float]]] = {}
            for a in answers:
                oid = a.get("option_id") if isinstance(a, dict) else a
                if isinstance(oid, str) and oid.strip().upper() in valid:
                    ivs = _intervals(a.get("intervals_sec", [])) if isinstance(a, dict) else []
                    picked[oid.strip().upper()] = ivs or []
            if picked:
                # reply order: UAV-DualCog scores the *first* composite option a model names
                return Parsed("choice", stage, options=list(picked), intervals=picked, truncated=truncated)
        ids = obj.get("answer_option_ids")
        if isinstance(ids, list):
            chosen = list(
                dict.fromkeys(str(i).strip().upper() for i in ids if str(i).strip().upper() in valid)
            )
            if chosen:
                return Parsed("choice", stage, options=chosen, truncated=truncated)
    if _ABSTAIN.search(clean):
        return Parsed("abstain", "abstain_cue", truncated=truncated)
    return Parsed("unparseable", truncated=truncated)


def parse_visibility(text: str) -> Parsed:
    """A count and intervals (Landmark Visibility Counting and Interval Reasoning)."""
    clean, truncated = _clean(text)
    objects = _objects(clean)
    for stage, obj in objects:
        count = obj.get("visible_count")
        ivs = _intervals(obj.get("visible_intervals_sec", []))
        if (
            isinstance(count, int | float)
            and not isinstance(count, bool)
            and count >= 0
            and float(count).is_integer()
        ):
            return Parsed("choice", stage, count=int(count), count_intervals=ivs or [], truncated=truncated)
    # a JSON reply with an invalid count is unparseable, not re-read as prose
    m = None if objects else re.search(r"(?:appears?|visible|count)[^\d-]{0,20}(\d+)", clean, re.I)
    if m:
        return Parsed("choice", "count_cue", count=int(m.group(1)), truncated=truncated)
    if _ABSTAIN.search(clean):
        return Parsed("abstain", "abstain_cue", truncated=truncated)
    return Parsed("unparseable", truncated=truncated)
