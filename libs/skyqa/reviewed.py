"""How every stage after the review refers to a reviewed landmark: the words prompts name it
by, and the instance id it has in rendered segmentation. Kept outside :mod:`skyqa.families` so
a stage that needs only these (the mission planner) does not load the task families."""

from __future__ import annotations

from skyqa.contracts import ValidInstance


def description(vi: ValidInstance) -> str:
    """How prompts name the landmark, normalised for comparison."""
    return " ".join((vi.landmark_description or vi.class_name).lower().split())


def rendered_id(vi: ValidInstance) -> int:
    """The instance id the landmark has in rendered segmentation: its main view's, else the
    most common among its views."""
    views = {v.view_id: v for v in vi.rgb_views}
    main = views.get(vi.main_view)
    if main is not None and main.rendered_instance_id:
        return main.rendered_instance_id
    ids = [v.rendered_instance_id for v in vi.rgb_views if v.rendered_instance_id]
    return max(set(ids), key=ids.count) if ids else vi.instance_numeric_id
