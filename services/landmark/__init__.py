"""Landmark service: candidates from the fused cloud, 8 orbit views each, occlusion-aware validity."""
