"""Scan requests: profile defaults, validation with one-line messages, the pose grid, run ids.

Both the CLI/gateway (before publishing) and the capture service (on receipt) apply the same
defaults and validation, so a request is judged the same wherever it enters.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from google.protobuf import json_format
from pydantic import ValidationError

from skyqa import keys
from skyqa.actions.space import ActionSpace, Capsule
from skyqa.blob import BlobStore
from skyqa.contracts.base import first_error
from skyqa.contracts.urbanvideo import NAV_TASKS
from skyqa.errors import BlobNotFound, InvalidInput, InvalidScanRequest, RunConflict
from skyqa.keys import validate_id
from skyqa.kinematics import least_action_frames
from skyqa.models.endpoints import resolve
from skyqa.protojson import to_json
from skyqa.settings import EvaluationSettings
from skyqa.sim.camera import Pose
from skyqa.sim.protocol import LidarSpec
from skyqa.sim.registry import check_scene
from skyqa.v1 import common_pb2, eval_pb2, scan_pb2

MAX_POSES = 20_000
MAX_EXTENT_M = 20_000.0
PROFILES = ("preview", "release")
MAX_LANDMARKS = 2000
MAX_NAVIGATION = 200  # navigation missions of each kind per run
MAX_SURVEYS = 16  # ultra-resolution survey areas per run (two 50-megapixel views each)
# Pillow, which every reader of the release decodes JPEGs with, warns above 89 megapixels
MAX_SURVEY_PIXELS = 80_000_000
MAX_STILL_PIXELS = 8192 * 6144  # a still is one image a reader decodes whole
MAX_TRAJECTORY_FRAMES = 6000  # the renderer's cap on one video
MAX_TRAJECTORY_PIXELS = 10**12  # about 3000 card-size trajectories (the card ships 1377)
MIN_GROUP, MAX_GROUP = 2, 8  # UAVs in a group (AirCopBench flies 2 to 6)
TASK_QUOTA = 30  # rows per question task type a release aims at
MAX_QUOTA = 100_000
MAX_PER_TYPE = 8  # navigation questions per mission and type: the candidates run out well before
MAX_EVAL_MODELS = 32

# The evidence-access conditions the evaluator implements (services/evaluator/conditions.py).
EvalCondition = Literal[
    "full",
    "text_only",
    "thumbnail",
    "crop",
    "full_crop",
    "circular",
    "generic_cot",
    "schema_cot",
    "fewshot_cot",
    "pred_step",
    "gt_prefix",
]
EVAL_CONDITIONS: tuple[EvalCondition, ...] = get_args(EvalCondition)


@dataclass(frozen=True)
class Stills:
    """The size and quality of the still views a run ships (landmark views, env observations),
    and the size the landmark stage checks candidates' views at."""

    width: int
    height: int
    working_width: int
    working_height: int
    jpeg_quality: int = 80

    @property
    def reshot(self) -> bool:
        """Whether views checked at the working size are rendered again at the shipped size."""
        return (self.working_width, self.working_height) != (self.width, self.height)


def stills(scan: scan_pb2.ScanRequest) -> Stills:
    s = scan.stills
    if s.width:
        return Stills(s.width, s.height, s.working_width or s.width, s.working_height or s.height)
    # requests stored before the setting existed: the profile's sizes, checked where shipped
    # UAV-DualCog releases DCI-4K-class stills at JPEG 80; a preview works at 640x480
    return Stills(4096, 3072, 4096, 3072) if scan.profile == "release" else Stills(640, 480, 640, 480)


def lidar_range_auto(spacing_x: float, spacing_y: float) -> float:
    """UAV-DualCog's auto range: clamp(hypot(dx, dy) * 1.5, 60, 140)."""
    return float(min(140.0, max(60.0, math.hypot(spacing_x, spacing_y) * 1.5)))


def default_request(scene_id: str, profile: str = "preview") -> scan_pb2.ScanRequest:
    """The demo scan of a scene: a grid at one altitude, two LiDARs (level and pitched 90)."""
    if profile not in PROFILES:
        raise InvalidScanRequest(f"unknown profile {profile!r}; use one of {', '.join(PROFILES)}")
    req = scan_pb2.ScanRequest(scene_id=scene_id, profile=profile)
    return apply_defaults(req)


def apply_defaults(req: scan_pb2.ScanRequest) -> scan_pb2.ScanRequest:
    """Fill unset fields from the profile; explicit values are kept."""
    out = scan_pb2.ScanRequest()
    out.CopyFrom(req)
    release = out.profile == "release"
    out.profile = out.profile or "preview"
    out.backend = out.backend or "builtin"
    if not out.HasField("bound"):
        out.bound.CopyFrom(common_pb2.MapBound(xmin=-120, xmax=120, ymin=-120, ymax=120, zmin=0, zmax=100))
    out.spacing_x_m = out.spacing_x_m or 40.0
    out.spacing_y_m = out.spacing_y_m or 40.0
    if not out.altitudes_m:
        out.altitudes_m.append(60.0)
    if not out.yaw_deg:
        out.yaw_deg.append(0.0)
    cam = out.camera
    cam.width = cam.width or (4096 if release else 640)
    cam.height = cam.height or (3072 if release else 480)
    cam.fov_deg = cam.fov_deg or 72.0
    if not cam.HasField("pitch_deg"):
        cam.pitch_deg = -60.0
    cam.jpeg_quality = cam.jpeg_quality or 80
    lidar = out.lidar
    lidar.channels = lidar.channels or (128 if release else 32)
    if not lidar.HasField("vfov_upper_deg"):
        lidar.vfov_upper_deg = 45.0
    if not lidar.HasField("vfov_lower_deg"):
        lidar.vfov_lower_deg = -45.0
    lidar.horizontal_samples = lidar.horizontal_samples or (2048 if release else 1024)
    lidar.range_m = lidar.range_m or lidar_range_auto(out.spacing_x_m, out.spacing_y_m)
    if not lidar.mount_pitch_deg:
        lidar.mount_pitch_deg.extend([0.0, 90.0])
    fusion = out.fusion
    fusion.voxel_size_m = fusion.voxel_size_m or (0.05 if release else 0.2)
    fusion.instance_voxel_size_m = fusion.instance_voxel_size_m or 1.0
    fusion.instance_min_points = fusion.instance_min_points or 20
    fusion.coverage_grid_m = fusion.coverage_grid_m or 1.0
    out.poses_per_job = out.poses_per_job or 8
    out.landmark_count = out.landmark_count or (50 if release else 10)
    if not out.HasField("task_quota"):
        out.task_quota = TASK_QUOTA
    video = out.video
    video.width = video.width or (1440 if release else 480)
    video.height = video.height or (1080 if release else 360)
    video.bitrate = video.bitrate or (10_000_000 if release else 2_000_000)
    # AirSim's default camera field of view
    video.fov_deg = video.fov_deg or 90.0
    nav = out.navigation
    nav.goals = nav.goals if nav.HasField("goals") else 3
    nav.routes = nav.routes if nav.HasField("routes") else 2
    nav.per_type = nav.per_type if nav.HasField("per_type") else 1
    groups = out.groups
    if not groups.sizes:
        groups.sizes.extend((3, 5, 6))
    groups.per_size = groups.per_size if groups.HasField("per_size") else 1
    rs = out.reasoning
    for name in ("per_split", "random_walks"):
        if not rs.HasField(name):
            setattr(rs, name, 8 if release else 2)
    rs.width = rs.width or (1280 if release else 320)
    rs.height = rs.height or (720 if release else 180)
    rs.fps = rs.fps or 16.0
    rs.fov_deg = rs.fov_deg or 79.0
    rs.crf = rs.crf or 28
    space, capsule = ActionSpace(), Capsule()
    rs.translation_m = rs.translation_m or space.translation_m
    rs.yaw_deg = rs.yaw_deg or space.yaw_deg
    rs.pitch_deg = rs.pitch_deg or space.pitch_deg
    # the source's 9 frames per action move 1 m in 0.5 s at 16 fps, from rest to rest: 16 m/s²
    # at the least, beyond a_max; the default is the fewest frames within the limits
    least = least_action_frames(rs.translation_m, rs.yaw_deg, rs.pitch_deg, rs.fps)
    rs.frames_per_action = rs.frames_per_action or max(space.frames_per_action, least)
    rs.actions = rs.actions or space.actions
    rs.capsule_radius_m = rs.capsule_radius_m or capsule.radius_m
    rs.capsule_half_height_m = rs.capsule_half_height_m or capsule.half_height_m
    if not rs.HasField("camera_offset_m"):
        rs.camera_offset_m = capsule.camera_offset_m
    sv = out.surveys
    # the AirSim backend renders whole frames only: no survey unless asked for one it can render
    sv.count = sv.count if sv.HasField("count") else (0 if out.backend == "airsim" else 1)
    sv.width = sv.width or 8192
    sv.height = sv.height or 6144
    sv.fov_deg = sv.fov_deg or 90.0
    sv.gsd_m = sv.gsd_m or 0.04
    st = out.stills
    if not st.width:
        st.width, st.height = (4096, 3072) if release else (640, 480)
    if not st.working_width:
        # release views are checked at a sixteenth of their pixels and rendered in full only
        # for the landmarks that pass review (the check needs the instance mask, not 4K)
        st.working_width, st.working_height = (
            (st.width // 4, st.height // 4) if release and st.width >= 2048 else (st.width, st.height)
        )
    out.review_mode = out.review_mode or "auto"
    return out


def action_space(req: scan_pb2.ScanRequest) -> tuple[ActionSpace, Capsule]:
    """The (defaulted) request's action space and body; ``ValueError`` says what is wrong."""
    rs = req.reasoning
    space = ActionSpace(
        translation_m=rs.translation_m,
        yaw_deg=rs.yaw_deg,
        pitch_deg=rs.pitch_deg,
        frames_per_action=rs.frames_per_action,
        actions=rs.actions,
    )
    capsule = Capsule(
        radius_m=rs.capsule_radius_m,
        half_height_m=rs.capsule_half_height_m,
        camera_offset_m=rs.camera_offset_m,
    )
    return space, capsule


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def validate(req: scan_pb2.ScanRequest) -> None:
    """Raise :class:`InvalidScanRequest` naming the first problem."""

    def bad(msg: str) -> InvalidScanRequest:
        return InvalidScanRequest(msg)

    try:
        validate_id(req.run_id, "run id")
        validate_id(req.scene_id, "scene id")
    except Exception as exc:
        raise bad(str(exc)) from None
    if req.backend not in ("builtin", "airsim"):
        raise bad(f"backend must be 'builtin' or 'airsim', got {req.backend!r}")
    if req.profile not in PROFILES:
        raise bad(f"profile must be one of {', '.join(PROFILES)}, got {req.profile!r}")
    b = req.bound
    if not _finite(b.xmin, b.xmax, b.ymin, b.ymax, b.zmin, b.zmax):
        raise bad("MapBound has a non-finite value")
    if not (b.xmin < b.xmax and b.ymin < b.ymax and b.zmin <= b.zmax):
        raise bad(f"MapBound must have xmin < xmax, ymin < ymax, zmin <= zmax; got {list(_bound(b))}")
    if max(b.xmax - b.xmin, b.ymax - b.ymin, b.zmax - b.zmin) > MAX_EXTENT_M:
        raise bad(f"MapBound spans more than {MAX_EXTENT_M:.0f} m")
    # a spacing below a centimetre is no grid (and a denormal one overflows the pose count)
    if not (_finite(req.spacing_x_m, req.spacing_y_m) and min(req.spacing_x_m, req.spacing_y_m) >= 0.01):
        raise bad("pose spacing must be positive metres, at least 0.01")
    if not req.altitudes_m or not _finite(*req.altitudes_m):
        raise bad("altitudes must be a non-empty list of finite metres")
    for z in req.altitudes_m:
        if not b.zmin <= z <= b.zmax:
            raise bad(f"altitude {z} m lies outside MapBound z range [{b.zmin}, {b.zmax}]")
    if not req.yaw_deg or len(req.yaw_deg) > 36 or not _finite(*req.yaw_deg):
        raise bad("yaw sweep must hold 1 to 36 finite angles")
    c = req.camera
    if not (16 <= c.width <= 8192 and 16 <= c.height <= 8192):
        raise bad(f"camera resolution must be within 16..8192 px, got {c.width}x{c.height}")
    if not (_finite(c.fov_deg, c.pitch_deg) and 10 <= c.fov_deg <= 170 and -90 <= c.pitch_deg <= 90):
        raise bad("camera fov must be 10..170 degrees and pitch -90..90 degrees")
    if not 1 <= c.jpeg_quality <= 100:
        raise bad(f"jpeg quality must be 1..100, got {c.jpeg_quality}")
    try:
        lidar_spec(req).validate()
    except ValueError as exc:
        raise bad(str(exc)) from None
    f = req.fusion
    if not (_finite(f.voxel_size_m, f.instance_voxel_size_m, f.coverage_grid_m)):
        raise bad("fusion sizes must be finite")
    if not (
        0.005 <= f.voxel_size_m <= 5
        and 0.1 <= f.instance_voxel_size_m <= 10
        and 0.1 <= f.coverage_grid_m <= 50
    ):
        raise bad("fusion voxel must be 0.005..5 m, instance voxel 0.1..10 m, coverage grid 0.1..50 m")
    if req.review_mode not in ("auto", "human"):
        raise bad(f"review mode must be 'auto' or 'human', got {req.review_mode!r}")
    if not 1 <= req.poses_per_job <= 1000:
        raise bad(f"poses per job must be 1..1000, got {req.poses_per_job}")
    if not 1 <= req.landmark_count <= MAX_LANDMARKS:
        raise bad(f"landmark count must be 1..{MAX_LANDMARKS}, got {req.landmark_count}")
    v = req.video
    if not (16 <= v.width <= 4096 and 16 <= v.height <= 3072) or v.width % 2 or v.height % 2:
        raise bad(f"video size must be even and within 16x16..4096x3072, got {v.width}x{v.height}")
    if not 100_000 <= v.bitrate <= 100_000_000:
        raise bad(f"video bitrate must be 100 kb/s..100 Mb/s, got {v.bitrate}")
    if not (_finite(v.fov_deg) and 10 <= v.fov_deg <= 170):
        raise bad(f"video fov must be 10..170 degrees, got {v.fov_deg}")
    if req.navigation.goals > MAX_NAVIGATION or req.navigation.routes > MAX_NAVIGATION:
        raise bad(f"navigation goals and routes must be 0..{MAX_NAVIGATION} each")
    if not 1 <= req.navigation.per_type <= MAX_PER_TYPE:
        raise bad(f"navigation questions per type must be 1..{MAX_PER_TYPE}, got {req.navigation.per_type}")
    if not all(MIN_GROUP <= n <= MAX_GROUP for n in req.groups.sizes) or len(req.groups.sizes) > MAX_GROUP:
        raise bad(f"UAV group sizes must be {MIN_GROUP}..{MAX_GROUP}, at most {MAX_GROUP} of them")
    if req.groups.per_size > MAX_NAVIGATION:
        raise bad(f"UAV groups per size must be 0..{MAX_NAVIGATION}")

    if req.task_quota > MAX_QUOTA:
        raise bad(f"the rows per task type must be 0..{MAX_QUOTA}, got {req.task_quota}")
    rs = req.reasoning
    if rs.per_split > MAX_NAVIGATION or rs.random_walks > MAX_NAVIGATION:
        raise bad(f"reasoning trajectories per split and random walks must be 0..{MAX_NAVIGATION} each")
    if not (16 <= rs.width <= 4096 and 16 <= rs.height <= 3072) or rs.width % 2 or rs.height % 2:
        raise bad(
            f"reasoning video size must be even and within 16x16..4096x3072, got {rs.width}x{rs.height}"
        )
    if not (_finite(rs.fps, rs.fov_deg) and 1 <= rs.fps <= 60 and 10 <= rs.fov_deg <= 170) or rs.crf > 51:
        raise bad("reasoning video needs 1..60 fps, a 10..170 degree FOV and crf 0..51")
    if rs.HasField("altitude_m") and not (_finite(rs.altitude_m) and 0.0 <= rs.altitude_m <= 500.0):
        raise bad(f"reasoning altitude must be 0..500 m above the ground, got {rs.altitude_m}")
    try:
        space, _ = action_space(req)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise bad(f"reasoning action space: {where + ': ' if where else ''}{msg}") from None
    trajectories = 6 * rs.per_split + rs.random_walks  # an equivalence pair is two
    if space.frames > MAX_TRAJECTORY_FRAMES:
        raise bad(
            f"a reasoning trajectory renders at most {MAX_TRAJECTORY_FRAMES} frames, got {space.frames}"
        )
    if trajectories * space.frames * rs.width * rs.height > MAX_TRAJECTORY_PIXELS:
        raise bad(
            f"the reasoning trajectories ask for more than {MAX_TRAJECTORY_PIXELS / 1e12:g} terapixels; "
            "lower the count, the length or the size"
        )
    st = req.stills
    if not (64 <= st.width <= 8192 and 64 <= st.height <= 6144) or st.width * st.height > MAX_STILL_PIXELS:
        raise bad(f"stills must be within 64x64..8192x6144 pixels, got {st.width}x{st.height}")
    if not (16 <= st.working_width <= st.width and 16 <= st.working_height <= st.height) or (
        st.working_width * st.height != st.working_height * st.width
    ):
        raise bad(
            f"the stills' working size {st.working_width}x{st.working_height} must be at most "
            f"{st.width}x{st.height} and of its aspect ratio"
        )
    sv = req.surveys
    if sv.count > MAX_SURVEYS:
        raise bad(f"surveys must be 0..{MAX_SURVEYS}, got {sv.count}")
    if not (64 <= sv.width <= 16384 and 64 <= sv.height <= 12288) or sv.width * sv.height > MAX_SURVEY_PIXELS:
        raise bad(
            f"survey size must be within 64x64..16384x12288 and at most {MAX_SURVEY_PIXELS / 1e6:.0f} "
            f"megapixels, got {sv.width}x{sv.height}"
        )
    if sv.count and req.backend == "airsim" and sv.width * sv.height > 4096 * 3072:
        raise bad("the airsim backend renders surveys up to 4096x3072 (whole frames); lower --surveys' size")
    if not (_finite(sv.fov_deg, sv.gsd_m) and 10 <= sv.fov_deg <= 120 and 0.005 <= sv.gsd_m <= 1.0):
        raise bad("a survey needs a 10..120 degree FOV and a ground pixel of 0.005..1 m")
    unknown = sorted(set(req.navigation.types) - set(NAV_TASKS))
    if unknown or len(set(req.navigation.types)) != len(req.navigation.types):
        raise bad(
            f"navigation types must be distinct names of {', '.join(NAV_TASKS)}; "
            f"got {', '.join(unknown) or 'a repeated one'}"
        )
    try:
        validate_evaluation(req.evaluation)
    except InvalidInput as exc:
        raise bad(str(exc)) from None
    n = pose_count(req)
    if n > MAX_POSES:
        raise bad(f"the scan has {n} poses, more than the limit of {MAX_POSES}; widen the spacing")
    if n * c.width * c.height > 2_000_000_000:
        raise bad("the scan asks for more than 2 gigapixels; lower the resolution or the pose count")


def admit(req: scan_pb2.ScanRequest, scenes_dir: Path | None, evaluation: EvaluationSettings) -> None:
    """What only a deployment can judge, checked where a request enters (gateway, CLI, capture):
    the scene exists here (:class:`UnknownScene`), and every model endpoint is on the operator's
    allow-list (:class:`EndpointNotAllowed`)."""
    if req.backend == "builtin":
        check_scene(req.scene_id, scenes_dir)
    resolve(req.evaluation.models, evaluation)


def carried(req: scan_pb2.ScanRequest, run_id: str, what: str) -> scan_pb2.ScanRequest:
    """The scan request of a run as a stage reads it, refused when it is empty or not this run's.

    A later stage must never fall back to defaults: a lost scan would silently render at the
    wrong size, with the wrong seed, and evaluate what nobody asked for.
    """
    if not req.scene_id:
        raise InvalidScanRequest(f"{what} of run {run_id!r} carries no scan request")
    if req.run_id != run_id:
        raise InvalidScanRequest(f"{what} of run {run_id!r} carries the scan request of run {req.run_id!r}")
    validate(req)
    return req


def stored(store: BlobStore, run_id: str) -> scan_pb2.ScanRequest:
    """The scan request capture stored when it accepted the run (``keys.scan_request``).

    Stages read a run's settings here, by reference, instead of from a copy in every event: one
    document per run, written before the first job is published, that outlives any restart.
    The stored file is treated as untrusted: a missing, unparsable or foreign one is refused.
    """
    try:
        data = store.get(keys.scan_request(run_id))
    except BlobNotFound:
        raise InvalidScanRequest(f"run {run_id!r} has no stored scan request") from None
    try:
        # a field a newer capture wrote is skipped, as the binary wire format skips it: replicas
        # of two versions must be able to read each other's runs during a rolling deploy
        req = json_format.Parse(data, scan_pb2.ScanRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, UnicodeDecodeError) as exc:
        raise InvalidScanRequest(f"the stored scan request of run {run_id!r} does not parse: {exc}") from None
    return carried(req, run_id, "the stored scan request")


def store_once(store: BlobStore, req: scan_pb2.ScanRequest) -> None:
    """Store a run's accepted request; the same request again (a redelivery) is a no-op, another
    one under the same run id is refused: stages read these settings while the run is going."""
    body = to_json(req)
    key = keys.scan_request(req.run_id)
    try:
        stored = store.get(key)
    except BlobNotFound:
        store.put(key, body, "application/json")
        return
    # compared as messages: a run stored by an older version wrote its JSON without defaults
    try:
        same = json_format.Parse(stored, scan_pb2.ScanRequest(), ignore_unknown_fields=True) == req
    except (json_format.ParseError, UnicodeDecodeError):
        same = False
    if same:
        return
    raise RunConflict(f"run {req.run_id!r} already exists with other settings; submit under another run id")


def validate_evaluation(spec: eval_pb2.EvaluationSpec) -> None:
    """Raise :class:`InvalidInput` naming the first bad model or condition of an evaluation."""
    if len(spec.models) > MAX_EVAL_MODELS:
        raise InvalidInput(f"an evaluation names at most {MAX_EVAL_MODELS} models, got {len(spec.models)}")
    for m in spec.models:
        if m.kind not in ("openai", "grpc", "world_grpc") or not m.url:
            raise InvalidInput(
                f"model {m.model or m.url!r}: kind must be openai, grpc or world_grpc and url is required"
            )
    unknown = sorted(set(spec.conditions) - set(EVAL_CONDITIONS))
    if unknown:
        raise InvalidInput(f"unknown evaluation conditions {unknown}; known: {', '.join(EVAL_CONDITIONS)}")


def _bound(b: common_pb2.MapBound) -> tuple[float, ...]:
    return (b.xmin, b.xmax, b.ymin, b.ymax, b.zmin, b.zmax)


def _axis(lo: float, hi: float, step: float) -> list[float]:
    n = math.floor((hi - lo) / step + 1e-9) + 1
    return [round(lo + i * step, 6) for i in range(n)]


def pose_count(req: scan_pb2.ScanRequest) -> int:
    b = req.bound
    nx = math.floor((b.xmax - b.xmin) / req.spacing_x_m + 1e-9) + 1
    ny = math.floor((b.ymax - b.ymin) / req.spacing_y_m + 1e-9) + 1
    return nx * ny * len(req.altitudes_m) * len(req.yaw_deg)


def poses(req: scan_pb2.ScanRequest) -> list[Pose]:
    """The sampled poses in UAV-DualCog order: altitude, then x, then y, then yaw."""
    b = req.bound
    out = []
    for z in req.altitudes_m:
        for x in _axis(b.xmin, b.xmax, req.spacing_x_m):
            for y in _axis(b.ymin, b.ymax, req.spacing_y_m):
                for yaw in req.yaw_deg:
                    out.append(Pose(x, y, z, yaw, req.camera.pitch_deg, 0.0))
    return out


def lidar_spec(req: scan_pb2.ScanRequest) -> LidarSpec:
    lidar = req.lidar
    return LidarSpec(
        channels=lidar.channels,
        vfov_upper_deg=lidar.vfov_upper_deg,
        vfov_lower_deg=lidar.vfov_lower_deg,
        horizontal_samples=lidar.horizontal_samples,
        range_m=lidar.range_m,
        mount_pitch_deg=tuple(lidar.mount_pitch_deg),
    )


def run_id_for(req: scan_pb2.ScanRequest) -> str:
    """A deterministic run id: the same request resumes the same run."""
    body = scan_pb2.ScanRequest()
    body.CopyFrom(req)
    body.run_id = ""
    digest = hashlib.sha256(body.SerializeToString(deterministic=True)).hexdigest()[:12]
    # the digest is what tells requests apart, so the scene id is cut, never the digest
    return f"{req.scene_id[: 96 - 1 - len(digest)]}-{digest}"


def overlaps(req: scan_pb2.ScanRequest, extent: tuple[float, float, float, float]) -> bool:
    b = req.bound
    return b.xmin < extent[1] and b.xmax > extent[0] and b.ymin < extent[3] and b.ymax > extent[2]


__all__ = [
    "EVAL_CONDITIONS",
    "EvalCondition",
    "admit",
    "apply_defaults",
    "carried",
    "default_request",
    "lidar_range_auto",
    "lidar_spec",
    "overlaps",
    "pose_count",
    "poses",
    "run_id_for",
    "validate",
    "validate_evaluation",
]
