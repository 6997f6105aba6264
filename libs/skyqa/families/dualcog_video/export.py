"""The video rows as UAV-DualCog's Stage 3 dataset manifest (a JSON object with ``samples``).

The reference's runner reads ``mode``, ``visible_count`` and ``visible_intervals_sec`` from every
row (self-state rows too, as 0 and []), gold visibility intervals only as ``{start_sec,
end_sec}`` objects, and tells composite from atomic options by the words in their labels when
it cannot rebuild them (skyqa's composite labels name a mission; no atomic label uses a
composite word, which a unit test holds).
"""

from __future__ import annotations

import json
from typing import Any

from skyqa.contracts.qa import VideoRow
from skyqa.families.dualcog_video.evaluation import JOINT

CONVENTIONS = (
    "an interval ends where its last visible frame ends ((last + 1) / fps; UAV-DualCog writes "
    "last / fps, so a one-frame sighting has a positive length here)"
)


NEVER = (
    "the landmark is never visible (count 0): UAV-DualCog's segment metric scores a row without a "
    "gold interval 0 whatever the answer, skyqa's evaluator scores an empty answer 1"
)


def _objects(ivs: Any) -> list[dict[str, float]]:
    return [{"start_sec": float(s), "end_sec": float(e)} for s, e in ivs] if isinstance(ivs, list) else []


def dualcog_sample(r: VideoRow) -> dict[str, Any]:
    s = r.model_dump(mode="json")
    scope = r.set_instance.set_scope if r.set_instance else "single_landmark"
    gold = r.gold_environment_answer
    count = gold.get("visible_count", 0)
    intervals = _objects(gold.get("visible_intervals_sec", []))
    s |= {
        "mode": "single-landmark",
        "manifest_mode": "all",
        "mission_family": "flight_mission",
        "landmark_ids": [r.landmark_id],
        "landmark_descriptions": {r.landmark_id: r.landmark_description},
        "set_class": {"display_name": r.set_name, "family": r.set_class, "scope": scope},
        "element_instances": [
            e | {"params": e["params"] | {"camera_mode": e["camera_mode"]}} for e in s["element_instances"]
        ],
        "video_web_path": r.video_path,
        "include_temporal_localization": r.form == JOINT,
        "visible_count": int(count) if isinstance(count, int) else 0,
        "visible_intervals_sec": intervals,
        "skyqa_conventions": CONVENTIONS if intervals or r.form == JOINT else f"{CONVENTIONS}; {NEVER}",
    }
    if gold:
        s["gold_environment_answer"] = {
            "visible_count": s["visible_count"],
            "visible_intervals_sec": intervals,
        }
    return s


def dualcog_manifest(rows: list[VideoRow]) -> bytes:
    scene_id = rows[0].scene_id if rows else ""
    forms = sorted({r.form for r in rows})
    doc = {
        "generation_id": f"{scene_id}_all_{'_'.join(forms)}_{len(rows)}samples_release",
        "scene_id": scene_id,
        "engine": rows[0].engine if rows else "",
        "mode": "all",
        "sample_count": len(rows),
        "forms": forms,
        "include_temporal_localization": True,
        "task_group": "all",
        "samples": [dualcog_sample(r) for r in rows],
    }
    return (json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()
