"""The constrained prompt package of UAV-DualCog's auto-labeller.

Up to four views (the main view first, then front/back/left/right, then diagonals), each
with the landmark's box drawn in red and a "Visible Side: <dir> (Landmark-centric)" caption,
resized to at most 640x480 and sent as JPEG quality 85; a closed 8-category list; generic
subcategories; a noun-phrase description of at most 20 words; JSON only.

Two deviations: UAV-DualCog always passes the simulator's segmentation class as a "weak
class-name hint", which hands the model the category from ground truth; skyqa includes it
only when the deployment asks for it (``SKYQA_LABELLER_CLASS_HINT``). Instead the prompt
states the size measured from the fused LiDAR cloud, which any labeller can use.
"""

from __future__ import annotations

import io

from PIL import Image, ImageDraw, ImageFont
from skyqa.blob import BlobStore
from skyqa.contracts.landmarks import CARDINALS, DIAGONALS
from skyqa.sim.classes import CATEGORIES
from skyqa.v1 import labeller_pb2

MAX_VIEWS = 4
MAX_SIZE = (640, 480)

SYSTEM = (
    "You are an expert in aerial landmark recognition for UAV imagery. "
    "Return exactly one JSON object and nothing else: no markdown, no code fences, no commentary. /no_think"
)

SUBCATEGORY_EXAMPLES = {
    "building": "residential building, office tower, house, warehouse",
    "vehicle": "car, truck, bus",
    "public_facility": "street lamp, bus shelter",
    "urban_landscape": "fountain, statue, plaza",
    "transport_infrastructure": "bridge, traffic sign, overpass",
    "industrial_infrastructure": "storage tank, shipping container, chimney",
    "vegetation": "tree, hedge",
    "other": "billboard, water tower",
}

DESCRIPTION_EXAMPLES = (
    "white storage tank with a conical roof beside rows of shipping containers",
    "tall teal office tower with a stepped top and regular dark windows",
    "red two-storey house with a dark gable roof in a residential block",
    "yellow bus driving on a two-lane asphalt road",
)


def select_views(views: list[labeller_pb2.LabelView]) -> list[labeller_pb2.LabelView]:
    order = {d: i for i, d in enumerate((*CARDINALS, *DIAGONALS, "topdown"))}
    ranked = sorted(views, key=lambda v: (not v.is_main, order.get(v.direction, 99), v.view_id))
    return ranked[:MAX_VIEWS]


def annotate(image: bytes, box: list[int], direction: str) -> bytes:
    img = Image.open(io.BytesIO(image)).convert("RGB")
    draw = ImageDraw.Draw(img)
    width = max(2, round(min(img.size) / 160))
    if len(box) == 4:
        draw.rectangle(box, outline=(255, 0, 0), width=width)
    caption = f"Visible Side: {direction} (Landmark-centric)"
    font = ImageFont.load_default(size=max(12, img.size[1] // 30))
    left, top, right, bottom = draw.textbbox((6, 6), caption, font=font)
    draw.rectangle([left - 3, top - 3, right + 3, bottom + 3], fill=(0, 0, 0))
    draw.text((6, 6), caption, fill=(255, 255, 255), font=font)
    img.thumbnail(MAX_SIZE)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=85)
    return buf.getvalue()


def size_line(size_m: list[float]) -> str:
    if len(size_m) != 3 or not all(0 < x < 1000 for x in size_m):
        return ""
    length, width, height = (round(float(x), 1) for x in size_m)
    return f"Measured by LiDAR: about {length} m long, {width} m wide and {height} m tall.\n"


def user_prompt(class_hint: str, n_views: int, size_m: list[float] | None = None) -> str:
    cats = ", ".join(CATEGORIES)
    subs = "; ".join(f"{c}: {e}" for c, e in SUBCATEGORY_EXAMPLES.items())
    examples = "; ".join(f'"{d}"' for d in DESCRIPTION_EXAMPLES)
    hint = (
        f'Weak class-name hint: "{class_hint}" (from automatic segmentation; it may be wrong).\n'
        if class_hint
        else ""
    )
    return (
        hint
        + size_line(list(size_m or []))
        + f"You are given {n_views} aerial view(s) of the same landmark. "
        "In each, the landmark is inside the red box, and the caption names the side "
        "of the landmark that is visible (landmark-centric).\n"
        f"category: exactly one of [{cats}].\n"
        "subcategory: a generic subtype, never a proper noun or brand, consistent with the category "
        f"(examples: {subs}).\n"
        "description: one noun phrase of at most 20 words that includes the subcategory, the main colour and "
        f"the shape or texture, optionally the surroundings or visible text. Examples: {examples}.\n"
        "confidence: a number from 0.0 to 1.0.\n"
        'Output exactly: {"category": "...", "subcategory": "...", "description": "...", "confidence": 0.0}'
    )


def build_package(
    request: labeller_pb2.LabelRequest, store: BlobStore, class_hint: bool = False
) -> tuple[str, str, list[tuple[bytes, str]], list[str]]:
    views = select_views(list(request.views))
    images = [(annotate(store.get(v.image_key), list(v.bbox_xyxy), v.direction), v.direction) for v in views]
    prompt = user_prompt(request.class_hint if class_hint else "", len(images), list(request.size_m))
    return SYSTEM, prompt, images, [v.direction for v in views]
