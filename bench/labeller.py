"""The built-in heuristic labeller against simulator ground truth.

Every instance object of a built-in scene (the candidates the landmark stage could pick) is
seen from the landmark stage's orbit poses (front, right, back, left, raised 16 degrees), its
box taken from the rendered instance mask, and the prompt package built exactly as the
labeller service builds it (red box, caption, 640x480 JPEG, the size along the principal axis
measured from the mesh where a run measures it from the fused cloud). The heuristic labeller
answers; its colour word (the first words of the description) and category are compared with
the scene's ground truth. Nothing from the ground truth reaches the labeller: the class-name hint is empty,
as it is by default in a run.

The labeller may abstain from a colour word it is not sure of (no colour, or the coarser word of
a shade: "gray" for a silver or dark gray object). A word is right when it is the object's scene
colour or that colour's coarser word; colour accuracy is over the words used, and the share of
candidates that got a word is reported next to it.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from dataclasses import dataclass

import numpy as np
from PIL import Image
from skyqa.geometry import instance_boxes, oriented_extent, pca_yaw_deg
from skyqa.models.heuristic import HeuristicLabeller
from skyqa.sim import BuiltinSimulator, CameraSpec, SceneObject, load_scene
from skyqa.sim.classes import COLOURS
from skyqa.v1 import model_pb2
from skyqa.vocab.colours import family_of

from services.labeller.prompt import SYSTEM, annotate, user_prompt
from services.landmark.config import CollectConfig
from services.landmark.orbit import orbit_pose

DIRECTIONS = (("front", 0.0), ("right", 90.0), ("back", 180.0), ("left", 270.0))
SIZE = (320, 240)  # the package is at most 640x480; a smaller render keeps the bench short
MIN_PIXELS = 30
# longest name first, so "dark gray" is read before "gray"
_COLOUR_WORDS = sorted(COLOURS, key=len, reverse=True)


@dataclass
class Outcome:
    scene: str
    instance_id: int
    class_name: str
    truth_colour: str
    truth_category: str
    colour: str
    category: str


def colour_word(description: str) -> str:
    d = description.lower()
    return next((c for c in _COLOUR_WORDS if d.startswith(c + " ")), "")


def colour_right(word: str, truth: str) -> bool:
    """A colour word is right when it names the scene colour or the family it is a shade of."""
    return bool(word) and word in (truth, family_of(truth))


def _views(sim: BuiltinSimulator, obj: SceneObject, cfg: CollectConfig) -> list[tuple[bytes, str]]:
    lo, hi = obj.aabb_min, obj.aabb_max
    size, center = hi - lo, (hi + lo) / 2
    camera = CameraSpec(SIZE[0], SIZE[1], cfg.camera_fov_deg)
    out = []
    for name, offset in DIRECTIONS:
        pose = orbit_pose(center, lo, size, obj.yaw_deg + offset, 16.0, cfg)
        frame = sim.render(pose, camera)
        # the box as the landmark stage measures it from the instance mask
        box = next(
            (b for b in instance_boxes(frame.instance, frame.semantic) if b.instance_id == obj.instance_id),
            None,
        )
        if box is None or box.pixels < MIN_PIXELS:
            continue
        buf = io.BytesIO()
        Image.fromarray(frame.rgb).save(buf, format="PNG")
        out.append((annotate(buf.getvalue(), box.xyxy, name), name))
    return out


async def _label(
    labeller: HeuristicLabeller, views: list[tuple[bytes, str]], size: list[float]
) -> dict[str, str]:
    req = model_pb2.GenerateRequest(system=SYSTEM, prompt=user_prompt("", len(views), size))
    for data, direction in views:
        req.images.add(data=data, mime_type="image/jpeg", label=direction)
    out = await labeller.generate(req)
    return dict(json.loads(out.text)) if not out.error_class else {}


def labeller_accuracy(scenes: tuple[str, ...] = ("demo_city", "tiny_town")) -> dict[str, object]:
    cfg = CollectConfig()
    labeller = HeuristicLabeller()
    outcomes: list[Outcome] = []
    for scene_id in scenes:
        scene = load_scene(scene_id)
        sim = BuiltinSimulator(scene)
        try:
            for obj in scene.objects:
                if obj.semantic.stuff or obj.instance_id == 0:
                    continue
                views = _views(sim, obj, cfg)
                if not views:
                    continue
                # the size a run measures from the fused cloud, here from the mesh
                size = list(oriented_extent(obj.vertices, pca_yaw_deg(obj.vertices[:, :2])))
                got = asyncio.run(_label(labeller, views, size))
                outcomes.append(
                    Outcome(
                        scene_id,
                        obj.instance_id,
                        obj.semantic.name,
                        obj.colour_name,
                        obj.semantic.category,
                        colour_word(str(got.get("description", ""))),
                        str(got.get("category", "")),
                    )
                )
        finally:
            sim.close()
    n = len(outcomes)
    named = [o for o in outcomes if o.colour]
    colour_ok = sum(colour_right(o.colour, o.truth_colour) for o in named)
    category_ok = sum(o.category == o.truth_category for o in outcomes)
    confusions = Counter(
        f"{o.truth_colour}->{o.colour}" for o in named if not colour_right(o.colour, o.truth_colour)
    )
    abstained = Counter(o.class_name for o in outcomes if not o.colour)
    category_by_class: dict[str, list[int]] = {}
    for o in outcomes:
        category_by_class.setdefault(o.class_name, []).append(int(o.category == o.truth_category))
    return {
        "objects": n,
        # over the colour words used; an abstention is no word, counted apart
        "colour_accuracy": round(colour_ok / len(named), 4) if named else 0.0,
        "colour_coverage": round(len(named) / n, 4) if n else 0.0,
        "colour_abstained": len(outcomes) - len(named),
        "colour_abstained_by_class": dict(abstained.most_common()),
        "category_accuracy": round(category_ok / n, 4) if n else 0.0,
        "colour_confusions": dict(confusions.most_common(8)),
        "category_accuracy_by_class": {
            k: round(float(np.mean(v)), 3) for k, v in sorted(category_by_class.items())
        },
    }


if __name__ == "__main__":
    import sys

    # this part alone: python -m bench.labeller [scene,scene,...]
    chosen = tuple(sys.argv[1].split(",")) if len(sys.argv) > 1 else ("demo_city", "tiny_town")
    print(json.dumps(labeller_accuracy(chosen), indent=1))
