"""Media policies: each family's source default, an endpoint's limits clipping it, stills sent as
stored or scaled down without decoding more than needed, and a request's byte limit."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image
from skyqa.errors import InvalidInput
from skyqa.families import FAMILIES
from skyqa.media_policy import Frames, MediaPolicy, effective

from services.evaluator import media

pytestmark = pytest.mark.unit


def _jpeg(w: int, h: int, quality: int = 90) -> bytes:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (h // 16, w // 16, 3), dtype=np.uint8).repeat(16, 0).repeat(16, 1)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def test_every_family_declares_the_policy_of_its_source() -> None:
    by_name = {f.name: f.media_policy for f in FAMILIES}
    assert all(p.source for p in by_name.values())
    # stills as stored for every family: DualCog's 4096x3072 grounding renders, UltraVR's V2
    assert all(p.max_pixels == 0 and p.max_request_bytes == 0 for p in by_name.values())
    assert by_name["urbanvideo_nav"].frames == Frames(count=32)  # UrbanVideo-Bench's run.py
    assert by_name["dualcog_video"].frames == Frames(fps=10.0)  # the released 10 FPS video whole
    assert by_name["dualcog_image"].frames is None and by_name["ultravr"].frames is None


def test_an_endpoint_clips_the_family_policy_and_may_state_its_own_sampling() -> None:
    family = MediaPolicy(frames=Frames(count=32), source="s")
    assert effective(family) == family  # an endpoint that states nothing gets the source's
    clipped = effective(family, max_pixels=640 * 480, max_frames=8, max_request_bytes=10**6)
    assert (clipped.max_pixels, clipped.frames, clipped.max_request_bytes) == (
        307200,
        Frames(count=8, cap=8),
        10**6,
    )
    assert effective(family, video_sample_fps=1.0).frames == Frames(fps=1.0)  # a rate-taking model
    assert effective(family, video_frames=64, max_frames=16).frames == Frames(count=16, cap=16)
    # a family limit stays when the endpoint's is looser
    assert effective(MediaPolicy(max_pixels=100), max_pixels=1000).max_pixels == 100
    assert effective(MediaPolicy(), max_frames=4).frames is None  # no video: nothing to sample


@pytest.mark.parametrize(
    "bad",
    [{"count": 4, "fps": 1.0}, {}, {"count": -1}, {"fps": 1.0, "cap": 0}, {"count": 4, "cap": 257}],
)
def test_frame_sampling_is_a_count_or_a_rate_under_a_cap(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        Frames(**bad)


def test_frame_indices_spread_over_the_video_with_both_ends() -> None:
    assert Frames(count=32).indices(10, 10.0) == list(range(10))  # a short clip: every frame
    assert Frames(count=3).indices(101, 10.0) == [0, 50, 100]
    assert Frames(fps=1.0).indices(101, 10.0) == list(range(0, 101, 10))  # 1 fps over 10 s
    assert len(Frames(fps=10.0, cap=16).indices(1000, 10.0)) == 16
    with pytest.raises(InvalidInput):
        Frames(count=3).indices(10, 0.0)


def test_a_still_within_the_limit_goes_byte_for_byte_with_its_own_type() -> None:
    big = _jpeg(4096, 3072)
    sent = media.still(big, "Image 1", MediaPolicy())
    assert (sent.data, sent.mime, sent.size) == (big, "image/jpeg", (4096, 3072))
    buf = io.BytesIO()
    Image.new("RGB", (64, 48)).save(buf, "PNG")
    png = media.still(buf.getvalue(), "Image 2", MediaPolicy(max_pixels=64 * 48))
    assert (png.data, png.mime) == (buf.getvalue(), "image/png")


def test_a_still_over_the_limit_is_scaled_keeping_its_aspect_and_decoded_at_a_reduced_scale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded: list[tuple[int, int]] = []
    convert = Image.Image.convert

    def spy(self: Image.Image, *args: Any, **kwargs: Any) -> Image.Image:
        decoded.append(self.size)
        return convert(self, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "convert", spy)
    sent = media.still(_jpeg(4096, 3072), "Image 1", MediaPolicy(max_pixels=640 * 480, jpeg_quality=70))
    assert sent.size == (640, 480) and sent.mime == "image/jpeg"
    assert Image.open(io.BytesIO(sent.data)).size == (640, 480)
    # the JPEG was decoded at 1/4 scale (DCT scaling), never at its 12.6 megapixels
    assert decoded and max(w * h for w, h in decoded) == 1024 * 768


def test_a_request_over_its_byte_limit_is_scaled_down_to_fit_or_refused() -> None:
    sources = [media.Source(f"Image {i}", _jpeg(2048, 1536)) for i in (1, 2)]
    free, _ = media.within_bytes(sources, ("full",), MediaPolicy(), encoded=True)
    assert [p.size for p in free] == [(2048, 1536)] * 2
    limit = media.wire_bytes(free, True) // 4
    fitted, used = media.within_bytes(sources, ("full",), MediaPolicy(max_request_bytes=limit), True)
    assert media.wire_bytes(fitted, True) <= limit
    assert 0 < used.max_pixels < 2048 * 1536 and all(
        w * h <= used.max_pixels for w, h in (p.size for p in fitted)
    )
    with pytest.raises(media.MediaTooLarge, match="max_request_bytes 100"):
        media.within_bytes(sources, ("full",), MediaPolicy(max_request_bytes=100), True)


def test_quadrants_keep_their_own_resolution_unless_the_endpoint_limits_pixels() -> None:
    data = _jpeg(1024, 768)
    native = media.parts([media.Source("the image", data)], ("full", "quadrants"), MediaPolicy())
    assert [p.size for p in native] == [(1024, 768)] + [(512, 384)] * 4
    limited = media.parts(
        [media.Source("the image", data)], ("quadrants",), MediaPolicy(max_pixels=256 * 192)
    )
    assert [p.size for p in limited] == [(256, 192)] * 4


def test_a_videos_sampled_frames_go_in_each_media_kind_and_text_only_decodes_nothing() -> None:
    from skyqa.video import Mp4Writer, discard

    with Mp4Writer(320, 240, 10.0, 200_000) as writer:
        for i in range(21):  # 2 s at 10 FPS
            writer.write(np.full((240, 320, 3), i * 10, dtype=np.uint8))
    with open(writer.path, "rb") as fh:
        video = media.Source("video", fh.read(), fps=10.0)
    discard(writer.path)
    policy = MediaPolicy(frames=Frames(count=3))
    full = media.parts([video], ("full",), policy)
    assert [(p.label, p.size) for p in full] == [
        (f"video frame at {t} s", (320, 240)) for t in ("0.0", "1.0", "2.0")
    ]
    small = media.parts([video], ("thumbnail",), policy)
    assert [(p.label, p.size) for p in small] == [(f"{p.label} (thumbnail)", (160, 120)) for p in full]
    assert media.parts([video], (), policy) == []
    assert media.parts([video], ("full",), effective(policy, max_pixels=160 * 120))[0].size == (160, 120)
