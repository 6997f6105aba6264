"""AirCopBench-style collaborative perception over UAV groups (see :mod:`.family`)."""

from skyqa.families.aircop.family import FAMILY

__all__ = ["FAMILY"]
