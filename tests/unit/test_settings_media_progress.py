from pathlib import Path

import numpy as np
import pytest
from skyqa import media
from skyqa.bus import retry_delay
from skyqa.contracts import RunState
from skyqa.runtime import ConfigError, apply_progress, load_settings
from skyqa.runtime.progress import FINAL_STAGE, PIPELINE_STAGES, is_request_stage, request_stage
from skyqa.v1 import common_pb2


def test_settings_env_over_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "skyqa.yaml"
    cfg.write_text("bus:\n  nats_url: nats://yaml:4222\n  max_deliver: 7\nstore:\n  backend: s3\n")
    monkeypatch.setenv("SKYQA_CONFIG", str(cfg))
    monkeypatch.setenv("SKYQA_BUS__NATS_URL", "nats://env:4222")
    s = load_settings()
    assert s.bus.nats_url == "nats://env:4222"
    assert s.bus.max_deliver == 7
    assert s.store.backend == "s3"


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        ("SKYQA_BUS__MAX_DELIVER", "0", "bus.max_deliver"),
        ("SKYQA_STORE__BACKEND", "ftp", "store.backend"),
        ("SKYQA_HTTP__PORT", "http", "http.port"),
    ],
)
def test_invalid_settings_give_one_line(
    monkeypatch: pytest.MonkeyPatch, env: str, value: str, message: str
) -> None:
    monkeypatch.setenv(env, value)
    with pytest.raises(ConfigError, match=message):
        load_settings()


def test_missing_or_bad_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKYQA_CONFIG", str(tmp_path / "nope.yaml"))
    with pytest.raises(ConfigError, match="not a file"):
        load_settings()
    bad = tmp_path / "bad.yaml"
    bad.write_text("bus: [unclosed")
    monkeypatch.setenv("SKYQA_CONFIG", str(bad))
    with pytest.raises(ConfigError):
        load_settings()


def test_retry_delay_is_exponential_and_capped() -> None:
    assert [retry_delay(n, 1.0, 10.0) for n in (1, 2, 3, 4, 5, 6)] == [1, 2, 4, 8, 10, 10]


def test_segmentation_and_depth_roundtrip() -> None:
    sem = np.array([[0, 10], [70, 255]], dtype=np.uint16)
    inst = np.array([[0, 300], [65535, 1]], dtype=np.uint32)
    s2, i2 = media.decode_segmentation(media.encode_segmentation(sem, inst))
    assert np.array_equal(s2, sem)
    assert np.array_equal(i2, inst)
    depth = np.array([[1.234, np.inf], [600.0, 0.5]], dtype=np.float32)
    back = media.decode_depth(media.encode_depth(depth))
    assert back[0, 0] == pytest.approx(1.23)
    assert np.isinf(back[0, 1])
    assert back[1, 0] == pytest.approx(600.0)
    with pytest.raises(ValueError, match="class ids"):
        media.encode_segmentation(np.array([[300]]), np.array([[1]]))
    assert s2.dtype == np.uint16 and i2.dtype == np.uint32


def test_a_segmentation_file_that_is_not_a_sane_png_is_refused_before_decoding() -> None:
    png = media.encode_segmentation(np.zeros((4, 4), np.uint16), np.zeros((4, 4), np.uint32))
    with pytest.raises(ValueError, match="must be a PNG"):
        media.decode_segmentation(media.encode_jpeg(np.zeros((4, 4, 3), np.uint8), 90))
    with pytest.raises(ValueError, match="must be a PNG"):
        media.decode_segmentation(png[:20])
    # a header claiming 100000x100000 pixels: refused from the header, nothing allocated
    huge = png[:16] + (100_000).to_bytes(4, "big") * 2 + png[24:]
    with pytest.raises(ValueError, match="larger than any skyqa renders"):
        media.decode_segmentation(huge)
    with pytest.raises(ValueError, match="unreadable"):
        media.decode_segmentation(png[:40])


def test_lidar_file_is_deterministic_and_checked() -> None:
    pts = np.array([[1, 2, 3]], dtype=np.float32)
    a = media.encode_lidar(pts, np.array([4]), np.array([5]))
    assert a == media.encode_lidar(pts, np.array([4]), np.array([5]))
    assert media.decode_lidar(a)["instance"][0] == 5
    with pytest.raises(Exception, match="LiDAR"):
        media.decode_lidar(b"garbage")


def test_progress_never_moves_a_stage_backwards() -> None:
    state = RunState(run_id="r")

    def ev(done: int, status: common_pb2.RunStatus.ValueType) -> common_pb2.Progress:
        return common_pb2.Progress(run_id="r", stage="capture", done=done, total=4, status=status)

    apply_progress(state, ev(3, common_pb2.RUN_STATUS_RUNNING), 1.0)
    apply_progress(state, ev(1, common_pb2.RUN_STATUS_RUNNING), 2.0)  # late, out of order
    assert state.stages["capture"].done == 3
    apply_progress(state, ev(4, common_pb2.RUN_STATUS_COMPLETED), 3.0)
    apply_progress(state, ev(2, common_pb2.RUN_STATUS_RUNNING), 4.0)
    # state.status is compared in tuples: mypy keeps an `x.status == "..."` narrowing across the
    # apply_progress calls that change it, and would call the next comparison impossible
    assert (state.stages["capture"].status, state.status) == ("completed", "running")
    # wall time: first event to the completing one; a late event does not move either end
    assert (state.stages["capture"].started_at, state.stages["capture"].finished_at) == (1.0, 3.0)
    apply_progress(
        state,
        common_pb2.Progress(
            run_id="r", stage=FINAL_STAGE, done=1, total=1, status=common_pb2.RUN_STATUS_COMPLETED
        ),
        5.0,
    )
    assert state.status == "completed"
    apply_progress(
        state,
        common_pb2.Progress(
            run_id="r", stage=FINAL_STAGE, status=common_pb2.RUN_STATUS_FAILED, message="boom"
        ),
        6.0,
    )
    assert (state.status, state.errors) == ("failed", ["boom"])


def test_a_failed_request_stage_fails_only_itself() -> None:
    """An evaluation asked for through the API (``eval-<request>``) that fails must not fail
    the run it was asked about, before or after the pipeline's own final stage completes."""
    state = RunState(run_id="r")

    def ev(stage: str, status: common_pb2.RunStatus.ValueType) -> common_pb2.Progress:
        return common_pb2.Progress(run_id="r", stage=stage, done=1, total=1, status=status, message=stage)

    apply_progress(state, ev("qa", common_pb2.RUN_STATUS_COMPLETED), 1.0)
    apply_progress(state, ev(request_stage(FINAL_STAGE, "ask1"), common_pb2.RUN_STATUS_FAILED), 2.0)
    assert (state.stages["eval-ask1"].status, state.status, state.errors) == ("failed", "running", [])
    apply_progress(state, ev(FINAL_STAGE, common_pb2.RUN_STATUS_COMPLETED), 3.0)
    apply_progress(state, ev(request_stage(FINAL_STAGE, "ask2"), common_pb2.RUN_STATUS_FAILED), 4.0)
    assert (state.stages["eval-ask2"].status, state.status) == ("failed", "completed")
    # a pipeline stage's failure still fails the run
    apply_progress(state, ev("views", common_pb2.RUN_STATUS_FAILED), 5.0)
    assert state.status == "failed"
    assert not any(is_request_stage(s) for s in PIPELINE_STAGES)
