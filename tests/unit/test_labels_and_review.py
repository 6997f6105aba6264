import pytest
from skyqa.contracts import (
    Bbox3D,
    CameraPose,
    CollectSummary,
    InstanceReview,
    InstancesFile,
    LandmarkInstance,
    RgbView,
    annotation_status,
)
from skyqa.contracts.review import AutoLabel
from skyqa.labels import extract_json, validate
from skyqa.v1 import labeller_pb2

from services.landmark import review

GOOD = {"category": "building", "subcategory": "house", "description": "red house", "confidence": 0.8}

# tricky model outputs seen from chat models: (text, stage that must read it, or None)
CORPUS = [
    (
        '{"category": "building", "subcategory": "house", "description": "red house", "confidence": 0.8}',
        "raw",
    ),
    (
        '```json\n{"category": "vehicle", "subcategory": "car", "description": "blue car", "confidence": 0.9}\n```',
        "fenced_json",
    ),
    (
        '```\n{"category": "vegetation", "subcategory": "tree", "description": "tree", "confidence": 0.5}\n```',
        "fenced_block",
    ),
    (
        'Sure! Here is the JSON: {"category": "other", "subcategory": "sign {x}", "description": "a } brace", "confidence": 1} hope it helps',
        "balanced_object",
    ),
    ("<think>hmm</think> {'category': 'building'}", None),
    ("I cannot determine the landmark.", None),
    ("", None),
    ('{"category": "building", "subcategory": "house", "description": "red house", "confidence": 0.8', None),
]


@pytest.mark.parametrize(("text", "stage"), CORPUS)
def test_extract_json_stages(text: str, stage: str | None) -> None:
    payload, got = extract_json(text)
    if stage is None:
        assert payload is None and got == "unparseable"
    else:
        assert payload is not None and got == stage


def test_validate_rules_and_repairs() -> None:
    label, problem = validate(GOOD)
    assert label is not None and not problem and label.repairs == []
    long = dict(GOOD, description=" ".join(["word"] * 30), confidence=1.7)
    label, _ = validate(long)
    assert label is not None
    assert len(label.description.split()) == 20 and label.confidence == 1.0
    assert label.repairs == ["description_truncated", "confidence_clipped"]
    assert validate(dict(GOOD, category="spaceship"))[0] is None
    industrial, _ = validate(dict(GOOD, category="Industrial Infrastructure"))
    assert industrial is not None and industrial.category == "industrial_infrastructure"
    assert validate(dict(GOOD, subcategory=" "))[1] == "subcategory is empty"
    assert "confidence" in validate({k: v for k, v in GOOD.items() if k != "confidence"})[1]


@pytest.mark.parametrize(
    ("auto", "manual", "status"),
    [
        (None, False, "unlabeled"),
        (AutoLabel(ok=True, confidence=0.6), False, "labeled"),
        (AutoLabel(ok=True, confidence=0.59), False, "pending_review"),
        (AutoLabel(ok=True, confidence=0.0), False, "failed"),
        (AutoLabel(ok=False), False, "failed"),
        (AutoLabel(ok=False), True, "labeled"),
    ],
)
def test_annotation_status_rule(auto: AutoLabel | None, manual: bool, status: str) -> None:
    r = InstanceReview(auto_label=auto)
    if manual:
        r.landmark_decision = "manual"
    assert annotation_status(r) == status


def view(i: int, direction: str, yaw: float, valid: bool = True, mode: str = "orbit") -> RgbView:
    return RgbView(
        view_id=f"view_{i:02d}_{direction}", path=f"p/{i}.jpg", segmentation_path=f"p/{i}.png", mode=mode,
        label=direction, view_direction=direction, yaw_deg=yaw, pitch_deg=-20, pitch_offset_deg=0,
        camera=CameraPose(x=0, y=0, z=10, yaw_deg=yaw, pitch_deg=-20), bbox_2d_xyxy=[1, 1, 5, 5],
        bbox_2d_xywh=[1, 1, 4, 4], bbox_2d_image_size=[10, 10], bbox_2d_valid=valid, visible_pixels=10,
        visible_ratio=0.5, rendered_instance_id=3, is_valid=valid,
    )  # fmt: skip


def doc() -> InstancesFile:
    ring = [("front", 10.0), ("front_right", -35.0), ("right", -80.0), ("back", 190.0), ("left", 100.0)]
    views = [view(i, d, y, valid=d != "right") for i, (d, y) in enumerate(ring)]
    views.append(view(5, "topdown", 10.0, mode="topdown"))
    lm = LandmarkInstance(
        instance_id="4_3", class_id=4, instance_numeric_id=3, class_name="house", center_3d=[0, 0, 0],
        bbox_3d=Bbox3D(min=[0, 0, 0], max=[1, 1, 1], size=[1, 1, 1], yaw_deg=10), point_count=50, rgb_views=views,
    )  # fmt: skip
    twin = lm.model_copy(update={"instance_id": "4_7", "instance_numeric_id": 7})
    summary = CollectSummary(
        input_points=1,
        valid_points=1,
        candidate_pairs=2,
        dropped_small_instances=0,
        dropped_view_insufficient=0,
        instances=2,
    )
    return InstancesFile(scene_id="s", source_pcd="x.pcd", filters={}, summary=summary, instances=[lm, twin])


def test_auto_review_keeps_and_picks_a_valid_cardinal_main_view() -> None:
    state = review.initial_state("r", doc(), "k", "auto")
    r = state.instances["4_3"]
    assert r.action == "keep" and r.main_view == "view_00_front"
    assert r.invalid_views == ["view_02_right"]


def test_direction_anchor_rederives_the_ring() -> None:
    d = doc()
    state = review.initial_state("r", d, "k", "human")
    # the reviewer says the provisional "back" view actually shows the front
    review.set_direction(state, d, "4_3", "view_03_back", "front", main=True)
    dirs = state.instances["4_3"].view_directions
    assert dirs["view_03_back"] == "front"
    assert dirs["view_00_front"] == "back"
    assert dirs["view_01_front_right"] == "back_left"
    assert dirs["view_04_left"] == "right"
    assert state.instances["4_3"].main_view == "view_03_back"


def test_review_actions_validate_input() -> None:
    d = doc()
    state = review.initial_state("r", d, "k", "human")
    with pytest.raises(review.ReviewError, match="keep_requires_main_view"):
        review.decide(state, d, "4_3", "keep")
    with pytest.raises(review.ReviewError, match="no landmark"):
        review.decide(state, d, "9_9", "drop")
    with pytest.raises(review.ReviewError, match="direction must be"):
        review.set_direction(state, d, "4_3", "view_00_front", "upwards", main=True)
    with pytest.raises(review.ReviewError, match="invalid view cannot be the main"):
        review.set_direction(state, d, "4_3", "view_02_right", "right", main=True)
    review.set_direction(state, d, "4_3", "view_00_front", "front", main=True)
    review.decide(state, d, "4_3", "keep")
    review.set_view_validity(state, d, "4_3", "view_00_front", False)
    assert state.instances["4_3"].main_view == ""  # an invalid view cannot stay main
    assert review.set_class_name(state, d, "4_3", "villa") == ["4_3", "4_7"]
    assert state.instances["4_7"].class_name == "villa"
    with pytest.raises(review.ReviewError):
        review.update_labels(state, d, "4_3", "castle", "keep", "old keep")


def test_a_models_label_loses_markup_with_a_recorded_repair() -> None:
    """Issue 41 item 6: a labeller model's text is untrusted; markup never reaches a label's
    subcategory or description (which released prompts quote), and what was removed is said."""
    label, problem = validate(
        dict(
            GOOD,
            subcategory="<b>office</b> tower",
            description="facade of a tall tower <img src=x onerror=alert(1)>",
        )
    )
    assert label is not None and not problem
    assert (label.subcategory, label.description) == ("office tower", "facade of a tall tower")
    assert label.repairs == ["subcategory_markup_removed", "description_markup_removed"]
    label, _ = validate(dict(GOOD, description="red `brick` & stone\u202e house <unclosed onload=x"))
    assert label is not None and label.description == "red brick stone house"
    # nothing left, or too long to be a description: a failed attempt with the reason, no crash
    assert validate(dict(GOOD, subcategory="<script></script>")) == (
        None,
        "subcategory is empty once markup is removed",
    )
    assert validate(dict(GOOD, description="x" * 301))[1] == "description is longer than 300 characters"
    assert validate(dict(GOOD, subcategory="y" * 65))[1] == "subcategory is longer than 64 characters"
    plain, _ = validate(dict(GOOD, description='a "red" brick tower (old), 3 floors; isn\u2019t tall'))
    assert plain is not None and plain.repairs == []


def test_a_label_result_still_carrying_markup_is_a_failed_label() -> None:
    d = doc()
    state = review.initial_state("r", d, "k", "auto")
    forged = labeller_pb2.LabelResult(
        landmark_id="4_3", ok=True, category="building", subcategory="house", confidence=0.9,
        description="tall tower <img src=x onerror=alert(1)>", model="old-labeller",
    )  # fmt: skip
    r = review.apply_label(state, forged)
    assert r.auto_label is not None and not r.auto_label.ok
    assert r.auto_label.reason.startswith("label refused: description may hold only")
    assert r.auto_label.description == "" and r.landmark_description == ""
    assert r.annotation_status == "failed"


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        (
            {"category": "<img src=x onerror=alert(1)>"},
            "label refused: category is not one of the 8 categories",
        ),
        ({"category": "castle"}, "label refused: category is not one of the 8 categories"),
        ({"model": "<b>m</b>"}, "label refused: model is not a model name"),
        ({"reason": "raw <script>x</script>"}, "label refused: reason may hold only"),
        ({"confidence": float("nan")}, "label refused: confidence must be a number from 0 to 1"),
        ({"confidence": 1.5}, "label refused: confidence must be a number from 0 to 1"),
        ({"confidence": -0.1}, "label refused: confidence must be a number from 0 to 1"),
    ],
)
def test_a_label_result_with_an_unknown_category_or_unchecked_fields_is_a_failed_label(
    fields: dict[str, object], why: str
) -> None:
    d = doc()
    state = review.initial_state("r", d, "k", "auto")
    good: dict[str, object] = dict(
        landmark_id="4_3", ok=True, category="building", subcategory="house", description="red house",
        confidence=0.9, model="Qwen/Qwen2.5-VL-7B-Instruct", reason="raw,description_truncated",
    )  # fmt: skip
    r = review.apply_label(state, labeller_pb2.LabelResult(**good))  # type: ignore[arg-type]
    assert r.auto_label is not None and r.auto_label.ok and r.landmark_category == "building"
    assert r.auto_label.reason == "raw,description_truncated"
    state = review.initial_state("r", d, "k", "auto")
    r = review.apply_label(state, labeller_pb2.LabelResult(**{**good, **fields}))  # type: ignore[arg-type]
    assert r.auto_label is not None and not r.auto_label.ok
    assert r.auto_label.reason.startswith(why), r.auto_label.reason
    assert (r.auto_label.category, r.auto_label.confidence, r.landmark_category) == ("", 0.0, "")
    assert r.annotation_status == "failed"
    for text in (r.auto_label.model, r.auto_label.reason):
        assert not set(text) & set("<>&`\n"), text


def test_the_repro_label_result_and_a_failed_ones_text_are_cleaned() -> None:
    d = doc()
    state = review.initial_state("r", d, "k", "auto")
    forged = labeller_pb2.LabelResult(
        landmark_id="4_3", ok=True, category="<img src=x onerror=alert(1)>", confidence=0.9, model="<b>m</b>",
        subcategory="house", description="red house",
    )  # fmt: skip
    r = review.apply_label(state, forged)
    assert r.auto_label is not None and not r.auto_label.ok and r.auto_label.model == ""
    assert r.landmark_category == "" and r.annotation_status == "failed"
    # a failed result keeps only its model and reason, cleaned: no label text, no markup
    failed = labeller_pb2.LabelResult(
        landmark_id="4_7", ok=False, category="<i>x</i>", description="<b>d</b>", confidence=0.9,
        model="gpt-4o\n<b>", reason="failed after 3 attempt(s): model error ERROR_CLASS_UNAVAILABLE: <html>502</html>",
        views_used=["view_00_front", "<img>"],
    )  # fmt: skip
    r = review.apply_label(state, failed)
    assert r.auto_label is not None and not r.auto_label.ok
    assert (r.auto_label.category, r.auto_label.description, r.auto_label.confidence) == ("", "", 0.0)
    assert r.auto_label.model == "" and r.auto_label.views == ["view_00_front"]
    assert r.auto_label.reason == "failed after 3 attempt(s): model error ERROR_CLASS_UNAVAILABLE: 502"


def test_valid_instances_are_kept_and_labelled_and_honour_invalid_views() -> None:
    d = doc()
    state = review.initial_state("r", d, "runs/r/scene_data/s/landmarks_raw/s.instances.json", "auto")
    ok = labeller_pb2.LabelResult(
        run_id="r",
        landmark_id="4_3",
        ok=True,
        category="building",
        subcategory="house",
        description="red house",
        confidence=0.9,
    )
    low = labeller_pb2.LabelResult(
        run_id="r",
        landmark_id="4_7",
        ok=True,
        category="building",
        subcategory="house",
        description="red house",
        confidence=0.3,
    )
    review.apply_label(state, ok)
    review.apply_label(state, low)
    review.set_view_validity(state, d, "4_3", "view_04_left", False)
    out = review.valid_instances(state, d, "runs/r/scene_data/s/landmarks_review/state.json", "test")
    assert [v.instance_id for v in out.valid_instances] == ["4_3"]
    # paths are relative to the release folder, and the main view is UAV-DualCog's query view
    assert out.source_instances_json == "scene_data/s/landmarks_raw/s.instances.json"
    assert out.decision_file == "scene_data/s/landmarks_review/state.json"
    main = [x.view_id for x in out.valid_instances[0].rgb_views if x.is_query_view]
    assert main == [state.instances["4_3"].main_view]
    v = out.valid_instances[0]
    assert v.landmark_decision == "auto_approved" and v.annotation_status == "labeled"
    assert "view_04_left" not in v.valid_view_ids and "view_02_right" not in v.valid_view_ids
    assert (
        next(x for x in v.rgb_views if x.view_id == "view_04_left").invalid_reason
        == "reviewer_marked_invalid"
    )
    assert out.summary.pending_or_failed == 1
    # a label request never offers invalid views
    req = review.label_request(state, d, "4_3")
    assert {x.view_id for x in req.views} == {"view_00_front", "view_01_front_right", "view_03_back"}
