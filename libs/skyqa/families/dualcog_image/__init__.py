"""UAV-DualCog image QA (self_where, self_what, env_where, env_how)."""

from skyqa.families.dualcog_image.family import FAMILY

__all__ = ["FAMILY"]
