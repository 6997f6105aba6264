"""Reasoning-Structured Videos: action trajectories as exact instances of Inverse, Loop and
Equivalence, for world models."""

from skyqa.families.reasoning.family import FAMILY, ReasoningVideos

__all__ = ["FAMILY", "ReasoningVideos"]
