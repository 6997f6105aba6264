"""UAV-DualCog video QA (behavior recognition with temporal localization, visibility counting)."""

from skyqa.families.dualcog_video.family import FAMILY

__all__ = ["FAMILY"]
