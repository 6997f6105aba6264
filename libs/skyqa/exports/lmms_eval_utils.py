"""lmms-eval task functions for a skyqa release (written as ``utils.py`` of the exported task).

This file runs inside lmms-eval, where skyqa is not installed: it needs only the standard
library and Pillow. ``skyqa export lmms-eval`` writes it next to verbatim copies of skyqa's
answer parser and scores (``_skyqa_answers.py``, ``_skyqa_scoring.py``, both standard-library
only) and ``skyqa_task.json``, which names the release folder, so images and videos load from
any working directory. Replies are read with skyqa's own parser and scored as skyqa's evaluator
scores them (its tests hold the two to the same numbers).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from PIL import Image

HERE = Path(__file__).resolve().parent
JOINT = "self_instance_recognition_joint"


def _sibling(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"skyqa_task_{name}", HERE / f"_skyqa_{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"{HERE} has no _skyqa_{name}.py; export the task again")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


answers = _sibling("answers")
scoring = _sibling("scoring")
ROOT = Path(json.loads((HERE / "skyqa_task.json").read_text())["release_root"]).resolve()


def _file(rel: str) -> Path:
    """A file a row names, inside the release folder only."""
    path = (ROOT / rel).resolve()
    if ROOT not in path.parents or not path.is_file():
        raise FileNotFoundError(f"{rel!r} is not a file of the release at {ROOT}")
    return path


def _prompt(doc: dict[str, Any]) -> str:
    # one text for every model: the answer contract (system prompt) first, then the question
    return f"{doc['system_prompt']}\n\n{doc['user_prompt']}"


def image_doc_to_visual(doc: dict[str, Any]) -> list[Image.Image]:
    return [Image.open(_file(p)).convert("RGB") for p in doc["images"]]


def image_doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    return _prompt(doc)


def image_process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    options = doc["label_options"]
    p = answers.parse_choice(results[0], [o["option_id"] for o in options], [o["label"] for o in options])
    ok = p.kind == "choice"
    box_iou = scoring.iou(p.bbox, doc["answer_bbox_xyxy_norm"]) if ok else 0.0
    return {
        "option_correct": float(ok and p.option == doc["answer_option_id"]),
        "bbox_iou": round(box_iou, 4),
        "bbox_acc@50iou": float(box_iou >= 0.5),
    }


def video_doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    # the video as a path (lmms-eval's video models read paths), then the reference image
    return [str(_file(doc["video_path"])), Image.open(_file(doc["reference_image_with_bbox"])).convert("RGB")]


def video_doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    return _prompt(doc)


def behavior_docs(dataset: Any) -> Any:
    return dataset.filter(lambda doc: doc["form"] == JOINT)


def visibility_docs(dataset: Any) -> Any:
    return dataset.filter(lambda doc: doc["form"] != JOINT)


def video_process_results(doc: dict[str, Any], results: list[str]) -> dict[str, float]:
    if doc["form"] == JOINT:
        p = answers.parse_joint(results[0], [o["option_id"] for o in doc["choice_options"]])
        ok = p.kind == "choice"
        gold = {a["option_id"]: a["intervals_sec"] for a in doc["answer_items"]}
        picked = set(p.options) if ok else set()
        guesses = [p.intervals.get(o, []) if ok else [] for o in gold]
        f1s = [scoring.match_prf(ivs, g, 0.5)[2] for ivs, g in zip(gold.values(), guesses, strict=True)]
        tious = [scoring.mean_best_tiou(ivs, g) for ivs, g in zip(gold.values(), guesses, strict=True)]
        return {
            "set_exact": float(ok and picked == set(gold)),
            "element_f1": round(scoring.set_f1(set(gold), picked), 4),
            "temporal_f1@0.5": round(sum(f1s) / len(f1s), 4),
            "temporal_mean_tiou": round(sum(tious) / len(tious), 4),
        }
    p = answers.parse_visibility(results[0])
    ok = p.kind == "choice"
    count = int(doc["gold_environment_answer"]["visible_count"])
    ivs = doc["gold_environment_answer"]["visible_intervals_sec"]
    pred = p.count_intervals if ok else []
    return {
        "count_exact": float(ok and p.count == count),
        "count_within1": float(ok and p.count is not None and abs(p.count - count) <= 1),
        "segment_f1@0.5": round(scoring.match_prf(ivs, pred, 0.5)[2], 4),
        "mean_best_tiou": round(scoring.mean_best_tiou(ivs, pred), 4),
    }
