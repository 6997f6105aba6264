"""Handoff files of ultra-resolution surveys (UltraVR-style aerial reasoning).

The mission planner writes a :class:`SurveyPlan` per surveyed area (a nadir and an oblique view
of it at ultra resolution); the renderer renders each view band by band and measures every
instance it shows (:class:`MeasuredView`); the mission planner bundles both into
``final_task/survey_task.json`` (:class:`SurveyTask`), which the qa-generator's UltraVR family
asks its questions about. Pixel coordinates are those of the full image, x right, y down.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, NonNegativeInt, model_validator

from skyqa.contracts.base import Contract

ViewKind = Literal["nadir", "oblique"]


class SurveyView(Contract):
    view: ViewKind
    pose: list[float]  # x, y, z, yaw, pitch, roll (degrees)


class SurveyPlan(Contract):
    scene_id: str
    survey_id: str
    center: list[float]  # the area's centre on the ground
    gsd_m: float  # ground metres per pixel at the centre of the nadir view
    width: int = Field(gt=0, le=16384)
    height: int = Field(gt=0, le=12288)
    fov_deg: float
    views: list[SurveyView]
    seed: int


class MeasuredObject(Contract):
    """One instance in one view, as the renderer measured it."""

    instance_id: int
    class_name: str
    category: str
    pixels: NonNegativeInt
    box: Annotated[list[int], Field(min_length=4, max_length=4)]  # x0, y0, x1, y1 (exclusive), pixels
    centroid: Annotated[list[float], Field(min_length=2, max_length=2)]  # mean x, y of its pixels
    # the long axis of its pixels in the image (degrees in [0, 180), 0 along +x, 90 along +y)
    # and the ratio of the axes' spreads (1: no axis); from the pixels' second moments
    axis_deg: float
    elongation: float
    # median colour (0..1) of its brightest quarter of pixels: only for the survey's targets
    lit_rgb: Annotated[list[float], Field(max_length=3)] = Field(default_factory=list)
    # of its 3D box-surface samples (targets only; -1: not a target): the share projecting into
    # the image, and of those facing the camera, the share hidden by something else
    in_frame: float = -1.0
    occluded: float = -1.0


class MeasuredView(Contract):
    image: str  # relative to the survey's final_task folder
    objects: list[MeasuredObject]  # by instance id


class SurveyMeasurement(Contract):
    """``final_task/survey.json``: what the renderer measured, one entry per pose."""

    width: int = Field(gt=0)
    height: int = Field(gt=0)
    views: list[MeasuredView]


class SurveyTask(SurveyPlan):
    measured: list[MeasuredView]  # in ``views`` order

    @model_validator(mode="after")
    def _one_measurement_per_view(self) -> Self:
        if len(self.measured) != len(self.views):
            raise ValueError(f"{len(self.measured)} measured views for {len(self.views)} planned")
        return self


class SurveyIndexRow(Contract):
    survey_id: str
    task: str  # its final_task/survey_task.json


class RejectedSurvey(Contract):
    survey_id: str
    reason: str
