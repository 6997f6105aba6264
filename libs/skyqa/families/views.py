"""What the families that ask about reviewed landmark views share: a view's box in normalized
image coordinates, and the overlay request that draws it on the view (the reference image)."""

from __future__ import annotations

from skyqa import keys
from skyqa.contracts import RgbView
from skyqa.contracts.qa import OverlayRequest
from skyqa.geometry.boxes import norm_xyxy


def norm_box(v: RgbView) -> list[float]:
    return norm_xyxy(v.bbox_2d_xyxy, *v.bbox_2d_image_size)


def reference_overlay(landmark_id: str, v: RgbView, source: str) -> OverlayRequest:
    """``source``: the view's image, relative to the release folder."""
    return OverlayRequest(
        output_image=keys.reference_overlay(landmark_id, v.view_id),
        source_image=source,
        bbox_xyxy_norm=norm_box(v),
    )
