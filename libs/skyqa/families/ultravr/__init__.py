"""UltraVR-style ultra-resolution aerial reasoning (see :mod:`.family`)."""

from skyqa.families.ultravr.family import FAMILY

__all__ = ["FAMILY"]
