"""Each family releases a unit on its own rows: a UAV-DualCog landmark whose video rows fail
keeps its image rows, and the other way round; and a row whose media show a twin of its
landmark (another reviewed landmark of its description) fails, while one whose media do not
is asked like any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from partial_models import partial_model
from rows import count_row, image_row, plan_fields, video_row
from skyqa import keys, media
from skyqa.blob import LocalBlobStore
from skyqa.contracts import RgbView, ValidInstance
from skyqa.contracts.qa import ImageRow, VideoRow
from skyqa.families.base import Checked, ReleaseFamily, Rendered
from skyqa.families.dualcog_image.family import FAMILY as IMAGE, UNREADABLE, twins_shown
from skyqa.families.dualcog_video import checks
from skyqa.families.dualcog_video.family import FAMILY as VIDEO, NOT_SEEN
from skyqa.families.twins import TWIN_IN_VIEW

from services.qa_generator import verdicts
from services.qa_generator.pipeline import QAPlan
from services.qa_generator.release import dropped_units, select

pytestmark = pytest.mark.unit


def _rows(landmarks: list[str]) -> tuple[list[ImageRow], list[VideoRow]]:
    images = [
        image_row(sample_id=f"{lm}_i{k}", landmark_id=lm)
        for lm in landmarks
        for k in range(IMAGE.unit_rows or 0)
    ]
    videos = [
        video_row(sample_id=f"{lm}_v{k}", landmark_id=lm, mission_id=f"{lm}_m{k // 2}")
        for lm in landmarks
        for k in range(VIDEO.unit_rows or 0)
    ]
    return images, videos


def test_a_landmark_whose_video_rows_fail_still_ships_its_image_rows() -> None:
    images, videos = _rows(["lm1", "lm2", "lm3"])
    families: list[ReleaseFamily[Any]] = [IMAGE, VIDEO]
    checked: dict[str, Checked[Any]] = {IMAGE.name: Checked(images), VIDEO.name: Checked(videos)}
    items = verdicts.items(families, checked)
    failed = {"lm2_v1": TWIN_IN_VIEW, "lm1_i3": "landmark box falls outside its projected 3D box"}
    # lm3's missions failed (the video family skipped it); lm4 is held from every family
    p = partial_model(
        QAPlan,
        skipped={"lm4": "4 usable orbit views; self_what needs at least 5"},
        family_skipped={VIDEO.name: {"lm3": NOT_SEEN}},
    )
    out = verdicts.incomplete(p, families, checked, items, failed)
    assert out == {
        IMAGE.name: {"lm1": failed["lm1_i3"], "lm4": p.skipped["lm4"]},
        VIDEO.name: {"lm2": TWIN_IN_VIEW, "lm3": NOT_SEEN, "lm4": p.skipped["lm4"]},
    }
    final, alone, counts = select(families, checked, items, failed, out, {})
    assert {r.landmark_id for r in final[IMAGE.name]} == {"lm2", "lm3"}
    assert {r.landmark_id for r in final[VIDEO.name]} <= {"lm1"}
    assert counts["failed_mission_landmarks"] == 1
    shipped = {r.sample_id for rows in final.values() for r in rows}
    why = failed | alone | {s: "unit incomplete" for s, it in items.items() if it.unit in out[it.family]}
    report = dropped_units(families, out, items, shipped, why)
    # lm1's video rows alone carry one visible count: the count balance takes them
    assert alone["lm1_v1"].startswith("one visible count")
    assert report == {
        "dropped_landmarks": {"lm1": failed["lm1_i3"], "lm4": p.skipped["lm4"]},
        "partly_released": {"lm2": f"video rows: {TWIN_IN_VIEW}", "lm3": f"video rows: {NOT_SEEN}"},
    }
    # had the balance kept them, lm1 would be partly released, with the image rows' reason
    kept = shipped | {s for s in items if s.startswith("lm1_v")}
    assert (
        dropped_units(families, out, items, kept, why)["partly_released"]["lm1"]
        == f"image rows: {failed['lm1_i3']}"
    )


def test_a_family_short_of_its_share_for_a_unit_drops_only_its_own_rows() -> None:
    images, videos = _rows(["lm1"])
    families: list[ReleaseFamily[Any]] = [IMAGE, VIDEO]
    checked: dict[str, Checked[Any]] = {IMAGE.name: Checked(images), VIDEO.name: Checked(videos[:2])}
    items = verdicts.items(families, checked)
    p = partial_model(QAPlan, skipped={}, family_skipped={})
    out = verdicts.incomplete(p, families, checked, items, {})
    assert out == {IMAGE.name: {}, VIDEO.name: {"lm1": "2 video rows (needs 4)"}}


def test_a_plan_written_before_families_skipped_on_their_own_skips_for_all() -> None:
    p = QAPlan.model_validate(plan_fields({}, skipped={"lm1": NOT_SEEN}))
    assert p.skipped_by(IMAGE) == p.skipped_by(VIDEO) == {"lm1": NOT_SEEN}


def _view(view_id: str, rid: int) -> RgbView:
    return partial_model(
        RgbView,
        view_id=view_id,
        path=f"views/{view_id}.jpg",
        segmentation_path=f"views/{view_id}.seg.png",
        rendered_instance_id=rid,
    )


def _landmark(instance_id: str, rid: int, description: str) -> ValidInstance:
    views = [_view(f"{instance_id}_front", rid), _view(f"{instance_id}_back", rid)]
    return partial_model(
        ValidInstance,
        instance_id=instance_id,
        class_name="fountain",
        landmark_description=description,
        rgb_views=views,
        main_view=views[0].view_id,
        instance_numeric_id=rid,
    )


def test_an_image_row_fails_where_its_target_shows_a_twin(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    root = keys.run_prefix("run")
    a, b = _landmark("11_1", 1, "fountain, about 3 m tall"), _landmark("11_2", 2, "Fountain, about 3 m tall")
    c = _landmark("11_3", 3, "statue")
    # a stored view whose segmentation path leaves the run: refused as a key, the row fails
    b.rgb_views[0] = b.rgb_views[0].model_copy(update={"segmentation_path": "../../etc/passwd"})
    here = np.zeros((100, 100), np.uint32)
    here[40:60, 40:60] = 1
    with_twin = here.copy()
    with_twin[:5, :10] = 2  # 0.5 % of the image: a fountain across the plaza
    for view, mask in (("11_1_front", here), ("11_1_back", with_twin), ("11_3_front", with_twin)):
        store.put(f"{root}/views/{view}.seg.png", media.encode_segmentation(mask * 0, mask), "image/png")
    seen = Rendered(
        store=store,
        run_id="run",
        requests={},
        masks={"env_clear": here, "env_twin": with_twin},
        landmarks={v.instance_id: v for v in (a, b, c)},
    )
    rows = [
        # the twin in the reference image is fine: its box says which one is meant
        image_row(sample_id="self_ok", task_type="self_where", landmark_id="11_1",
                  reference_image_with_bbox="views/11_1_back.jpg", target_image="views/11_1_front.jpg",
                  images=["views/11_1_back.jpg", "views/11_1_front.jpg"]),
        image_row(sample_id="self_twin", task_type="self_where", landmark_id="11_1",
                  reference_image_with_bbox="ref.jpg", target_image="views/11_1_back.jpg",
                  images=["ref.jpg", "views/11_1_back.jpg"]),
        image_row(sample_id="env_ok", landmark_id="11_1", metadata={"env_request_id": "env_clear"}),
        image_row(sample_id="env_twin", landmark_id="11_1", metadata={"env_request_id": "env_twin"}),
        # no segmentation for the view a row shows: nothing says the twin is not in it
        image_row(sample_id="self_unread", task_type="self_where", landmark_id="11_1",
                  reference_image_with_bbox="ref.jpg", target_image="views/11_1_side.jpg",
                  images=["ref.jpg", "views/11_1_side.jpg"]),
        image_row(sample_id="self_escape", task_type="self_where", landmark_id="11_2",
                  reference_image_with_bbox="ref.jpg", target_image="views/11_2_front.jpg",
                  images=["ref.jpg", "views/11_2_front.jpg"]),
        # a landmark without twins is not looked at, whatever else its image shows
        image_row(sample_id="no_twin", landmark_id="11_3", metadata={"env_request_id": "env_twin"}),
    ]  # fmt: skip
    assert twins_shown(rows, seen) == {
        "self_twin": TWIN_IN_VIEW,
        "env_twin": TWIN_IN_VIEW,
        "self_unread": UNREADABLE,
        "self_escape": UNREADABLE,
    }


def test_a_visibility_count_fails_where_its_video_also_shows_a_twin(tmp_path: Path) -> None:
    shares = [0.01] * 10 + [0.0] * 20
    row = count_row(shares, 1, [[0.0, 1.0]])
    # a twin in view for 0.4 s at 0.15 %: the lenient end of the rule could call it a sighting
    twin = [0.0] * 20 + [0.0015] * 4 + [0.0] * 6
    verdict, _ = checks.check_video_rows([row], {"m": checks.Shares(shares, twin)})
    assert verdict.reasons == {"m_env": TWIN_IN_VIEW}
    # a glimpse of two frames, or a share below the lenient threshold, is no sighting, nor a
    # twin smaller than the landmark beside it
    for glimpse in ([0.0] * 20 + [0.01] * 2 + [0.0] * 8, [0.0] * 20 + [0.001] * 10, [0.009] * 2 + [0.0] * 28):
        verdict, _ = checks.check_video_rows([row], {"m": checks.Shares(shares, glimpse)})
        assert not verdict.reasons
    # as large as the landmark in a frame that shows it, even for one frame
    verdict, _ = checks.check_video_rows([row], {"m": checks.Shares(shares, [0.0, 0.011] + [0.0] * 28)})
    assert verdict.reasons == {"m_env": TWIN_IN_VIEW}
    # one read of each frame gives both shares
    store = LocalBlobStore(tmp_path)
    instance = np.zeros((10, 10), np.uint32)
    instance[:5, :2], instance[9, 9] = 7, 8
    key = f"{keys.mission_root('run', 'm')}/final_task/seg/frame_000000.png"
    store.put(key, media.encode_segmentation(instance * 0, instance), "image/png")
    assert checks.pixel_shares(store, "run", "m", 1, 7, {8}) == checks.Shares([0.1], [0.01])
