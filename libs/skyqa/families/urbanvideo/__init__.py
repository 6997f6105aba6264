"""UrbanVideo-Bench-style navigation questions over the run's navigation missions."""

from skyqa.families.urbanvideo.family import FAMILY, UrbanVideo

__all__ = ["FAMILY", "UrbanVideo"]
