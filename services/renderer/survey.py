"""Render a survey: ultra-resolution stills, each in row bands, every instance they show measured.

A band of ``BAND_PIXELS`` holds its depth and labels only while it is measured, so a view's
memory is its colour image (3 bytes a pixel, kept in the JPEG encoder's channel order so it is
encoded without a copy) plus one band, whatever its size. Per
instance the bands add up its pixels, box, class and pixel moments (the long axis of its pixels
and its elongation come from them); for the job's targets they also add up the pixels' colours
and, for each sample of the target's 3D box surface, whether the band's depth shows it or
something in front of it. The numbers are those one whole-frame render would give, because a
band is the frame's own rows (:meth:`BuiltinSimulator.render_rows`).

``survey.json`` is written last: with every view's JPEG it marks the job complete, and a job
found complete is not rendered again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from skyqa import keys, media
from skyqa.blob import BlobStore
from skyqa.contracts import dump_json
from skyqa.contracts.ultra import MeasuredObject, MeasuredView, SurveyMeasurement
from skyqa.errors import InvalidInput
from skyqa.geometry.visibility import DEPTH_MARGIN_M, box_surface_grid
from skyqa.sim import CameraSpec, Frame, Intrinsics, Pose, RowRenderer, Simulator, project
from skyqa.sim.classes import BY_ID
from skyqa.v1 import render_pb2

from services.renderer.video import done_event, validate_geometry

BAND_PIXELS = 1 << 22
MAX_WIDTH, MAX_HEIGHT = 16384, 12288
FULL_FRAME_MAX = 4096 * 3072  # what a simulator without row bands may render at once
MAX_VIEWS = 8
MAX_TARGETS = 4000
PIXEL_VARIANCE = 1.0 / 12.0  # of a uniform unit pixel: the spread floor of a one-pixel object


def survey_image(index: int) -> str:
    return f"survey/view_{index:02d}.jpg"


def validate_survey_job(job: render_pb2.VideoJob) -> None:
    keys.validate_id(job.run_id, "run id")
    keys.validate_id(job.requester, "requester")
    keys.validate_id(job.job_id, "survey id")
    keys.validate_key(job.output_prefix)
    if not 1 <= len(job.poses) <= MAX_VIEWS:
        raise InvalidInput(f"a survey needs 1..{MAX_VIEWS} views, got {len(job.poses)}")
    if not (16 <= job.width <= MAX_WIDTH and 16 <= job.height <= MAX_HEIGHT):
        raise InvalidInput(
            f"survey size must be within 16x16..{MAX_WIDTH}x{MAX_HEIGHT}, got {job.width}x{job.height}"
        )
    if not 10.0 <= job.fov_deg <= 170.0:
        raise InvalidInput(f"survey fov must be 10..170 degrees, got {job.fov_deg}")
    if len(job.targets) > MAX_TARGETS:
        raise InvalidInput(f"a survey measures at most {MAX_TARGETS} targets, got {len(job.targets)}")
    validate_geometry(job)


@dataclass
class _Samples:
    """Every target's box-surface samples that project into the image, flattened."""

    target: NDArray[np.int64]  # index into the targets
    rows: NDArray[np.int64]
    cols: NDArray[np.int64]
    depth: NDArray[np.float64]
    total: NDArray[np.int64]  # samples per target
    inframe: NDArray[np.int64]  # of them in the image, per target


def _samples(job: render_pb2.VideoJob, pose: Pose, k: Intrinsics) -> _Samples:
    parts: list[tuple[int, NDArray[np.float64], NDArray[np.float64]]] = []
    total, inframe = [], []
    for n, t in enumerate(job.targets):
        grid = box_surface_grid(np.array(t.center, dtype=np.float64), np.array(t.size, dtype=np.float64))
        px, d = project(grid, pose, k)
        ok = (d > 0.05) & (px[:, 0] >= 0) & (px[:, 0] < k.width) & (px[:, 1] >= 0) & (px[:, 1] < k.height)
        parts.append((n, px[ok], d[ok]))
        total.append(len(grid))
        inframe.append(int(ok.sum()))
    if not parts:
        empty = np.zeros(0, np.int64)
        return _Samples(empty, empty, empty, np.zeros(0), empty, empty)
    return _Samples(
        target=np.concatenate([np.full(len(d), n, np.int64) for n, _, d in parts]),
        rows=np.concatenate([px[:, 1].astype(np.int64) for _, px, _ in parts]),
        cols=np.concatenate([px[:, 0].astype(np.int64) for _, px, _ in parts]),
        depth=np.concatenate([d for _, _, d in parts]),
        total=np.asarray(total, np.int64),
        inframe=np.asarray(inframe, np.int64),
    )


@dataclass
class ViewStats:
    """What the bands of one view add up to."""

    width: int
    targets: dict[int, int]  # instance id -> index into the job's targets
    samples: _Samples
    # instance id -> [pixels, x0, y0, x1, y1, sum x, sum y, sum xx, sum yy, sum xy]
    moments: dict[int, NDArray[np.float64]] = field(default_factory=dict)
    classes: dict[int, int] = field(default_factory=dict)
    colours: dict[int, list[NDArray[np.uint8]]] = field(default_factory=dict)
    seen: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    hidden: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        self.ids = np.zeros(len(self.samples.total), np.int64)  # instance id of each target
        for iid, k in self.targets.items():
            self.ids[k] = iid
        self.seen = np.zeros(len(self.samples.total), np.int64)
        self.hidden = np.zeros(len(self.samples.total), np.int64)

    def add(self, first: int, frame: Frame) -> None:
        instance, w = frame.instance, self.width
        flat = instance.ravel()
        pix = np.flatnonzero(flat)
        if pix.size:
            ids = flat[pix]
            order = np.argsort(ids, kind="stable")
            ids, pix = ids[order], pix[order]
            starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
            rows, cols = np.divmod(pix, w)
            x, y = cols.astype(np.float64), (rows + first).astype(np.float64)
            stats = np.column_stack(
                [
                    np.diff(np.r_[starts, len(pix)]),
                    np.minimum.reduceat(cols, starts),
                    np.minimum.reduceat(rows, starts) + first,
                    np.maximum.reduceat(cols, starts) + 1,
                    np.maximum.reduceat(rows, starts) + first + 1,
                    *(np.add.reduceat(v, starts) for v in (x, y, x * x, y * y, x * y)),
                ]
            ).astype(np.float64)
            semantic = frame.semantic.ravel()[pix[starts]]
            rgb = frame.rgb.reshape(-1, 3)
            ends = np.r_[starts[1:], len(pix)]
            for i, s in enumerate(starts):
                iid = int(ids[s])
                old = self.moments.get(iid)
                if old is None:
                    self.moments[iid] = stats[i]
                    self.classes[iid] = int(semantic[i])
                else:
                    old[0] += stats[i, 0]
                    old[1:3] = np.minimum(old[1:3], stats[i, 1:3])
                    old[3:5] = np.maximum(old[3:5], stats[i, 3:5])
                    old[5:] += stats[i, 5:]
                if iid in self.targets:
                    self.colours.setdefault(iid, []).append(rgb[pix[s : ends[i]]])
        smp = self.samples
        band = (smp.rows >= first) & (smp.rows < first + instance.shape[0])
        r, c, t = smp.rows[band] - first, smp.cols[band], smp.target[band]
        shows = frame.depth[r, c]
        seen = smp.depth[band] <= shows + DEPTH_MARGIN_M
        # a hidden sample whose pixel shows the target itself is on its far side
        other = ~seen & (instance[r, c].astype(np.int64) != self.ids[t])
        self.seen += np.bincount(t[seen], minlength=len(smp.total))
        self.hidden += np.bincount(t[other], minlength=len(smp.total))

    def objects(self) -> list[MeasuredObject]:
        out = []
        for iid in sorted(self.moments):
            n, x0, y0, x1, y1, sx, sy, sxx, syy, sxy = (float(v) for v in self.moments[iid])
            mx, my = sx / n, sy / n
            cxx, cyy, cxy = sxx / n - mx * mx, syy / n - my * my, sxy / n - mx * my
            spread = math.hypot((cxx - cyy) / 2.0, cxy)
            major = (cxx + cyy) / 2.0 + spread
            minor = max(PIXEL_VARIANCE, (cxx + cyy) / 2.0 - spread)
            cls = BY_ID.get(self.classes[iid])
            obj = MeasuredObject(
                instance_id=iid,
                class_name=cls.name if cls else f"class_{self.classes[iid]}",
                category=cls.category if cls else "other",
                pixels=int(n),
                box=[int(x0), int(y0), int(x1), int(y1)],
                centroid=[round(mx, 2), round(my, 2)],
                axis_deg=round(math.degrees(0.5 * math.atan2(2.0 * cxy, cxx - cyy)) % 180.0, 2),
                elongation=round(math.sqrt(max(major, PIXEL_VARIANCE) / minor), 3),
            )
            k = self.targets.get(iid)
            if k is not None:
                obj.lit_rgb = _lit(np.concatenate(self.colours[iid]))
                total, facing = int(self.samples.total[k]), int(self.seen[k] + self.hidden[k])
                obj.in_frame = round(int(self.samples.inframe[k]) / max(1, total), 4)
                obj.occluded = round(int(self.hidden[k]) / facing, 4) if facing else 0.0
            out.append(obj)
        return out


def _lit(rgb: NDArray[np.uint8]) -> list[float]:
    """Median colour of the brightest quarter of the pixels: shade scales a colour down."""
    px = rgb.astype(np.float64) / 255.0
    lum = px @ np.array([0.299, 0.587, 0.114])
    lit = np.median(px[lum >= np.quantile(lum, 0.75)], axis=0)
    return [round(float(v), 4) for v in lit]


def render_view(
    sim: Simulator, job: render_pb2.VideoJob, pose: Pose, camera: CameraSpec
) -> tuple[NDArray[np.uint8], list[MeasuredObject]]:
    """The view's image (in BGR order) and its measured objects."""
    k = camera.intrinsics
    targets = {int(t.instance_id): n for n, t in enumerate(job.targets)}
    stats = ViewStats(k.width, targets, _samples(job, pose, k))
    bgr = np.empty((k.height, k.width, 3), np.uint8)
    if isinstance(sim, RowRenderer):
        rows = max(1, BAND_PIXELS // k.width)
        for first in range(0, k.height, rows):
            frame = sim.render_rows(pose, camera, first, min(k.height, first + rows))
            bgr[first : first + frame.rgb.shape[0]] = frame.rgb[..., ::-1]
            stats.add(first, frame)
    else:
        if k.width * k.height > FULL_FRAME_MAX:
            raise InvalidInput(
                f"the {sim.backend} backend renders whole frames only, up to 4096x3072 for a survey; "
                f"got {k.width}x{k.height}"
            )
        frame = sim.render(pose, camera)
        bgr[:] = frame.rgb[..., ::-1]
        stats.add(0, frame)
    return bgr, stats.objects()


def render_survey(
    job: render_pb2.VideoJob, sim: Simulator, store: BlobStore, on_frame: Callable[[], None] | None = None
) -> render_pb2.VideoDone:
    validate_survey_job(job)
    done = done_event(job, len(job.poses))
    marker = f"{job.output_prefix}/{keys.SURVEY}"
    images = [f"{job.output_prefix}/{survey_image(i)}" for i in range(len(job.poses))]
    info = store.head(marker)
    if info is not None and all(store.exists(k) for k in images):
        done.survey.CopyFrom(info.to_ref())
        done.reused = True
        return done
    camera = CameraSpec(job.width, job.height, job.fov_deg)
    views = []
    for i, p in enumerate(job.poses):
        bgr, objects = render_view(sim, job, Pose(p.x, p.y, p.z, p.yaw_deg, p.pitch_deg, p.roll_deg), camera)
        store.put(images[i], media.encode_jpeg(bgr, job.jpeg_quality, bgr=True), "image/jpeg")
        del bgr
        views.append(MeasuredView(image=survey_image(i), objects=objects))
        if on_frame is not None:
            on_frame()
    measured = SurveyMeasurement(width=job.width, height=job.height, views=views)
    done.survey.CopyFrom(store.put(marker, dump_json(measured), "application/json").to_ref())
    return done
