"""A scan request from the options a person types: CLI flags, a test's or a benchmark's options.

Every message names the flag to fix, so the CLI prints it as its one line and exits 2.
"""

from __future__ import annotations

from skyqa import scan
from skyqa.errors import InvalidInput
from skyqa.settings import ModelEndpoint
from skyqa.v1 import scan_pb2


def model_specs(urls: list[str] | None, flag: str = "--model") -> list[ModelEndpoint]:
    """``URL[#MODEL]``: an http(s) URL is OpenAI-compatible (…/v1), ``world://host:port`` a
    world model over gRPC, anything else host:port gRPC."""
    out = []
    for text in urls or []:
        url, _, model = text.partition("#")
        kind = "openai" if url.startswith(("http://", "https://")) else "grpc"
        if url.startswith("world://"):
            kind, url = "world_grpc", url.removeprefix("world://")
        if not url or (kind != "openai" and ":" not in url):
            raise InvalidInput(f"{flag} needs URL[#MODEL] (http://host:port/v1 or host:port), got {text!r}")
        out.append(ModelEndpoint(kind=kind, url=url, model=model))
    return out


def condition_list(text: str | None) -> list[str] | None:
    """A comma list of evaluation conditions, or None for the configured default."""
    if not text:
        return None
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(scan.EVAL_CONDITIONS))
    if unknown:
        raise InvalidInput(f"unknown conditions {unknown}; choose from {', '.join(scan.EVAL_CONDITIONS)}")
    return wanted


def build_request(
    scene: str,
    profile: str,
    run_id: str | None,
    bound: str | None,
    spacing: float | None,
    altitude: list[float] | None,
    seed: int,
    review: str = "auto",
    landmarks: int | None = None,
    video: str | None = None,
    stills: str | None = None,
    navigation: str | None = None,
    navigation_types: str | None = None,
    groups: str | None = None,
    reasoning: str | None = None,
    surveys: str | None = None,
    eval_models: list[str] | None = None,
    eval_conditions: str | None = None,
) -> scan_pb2.ScanRequest:
    """The full request (profile defaults applied, validated) the options describe; the run id
    is derived from the request unless given."""
    req = scan_pb2.ScanRequest(scene_id=scene, profile=profile, seed=seed, review_mode=review)
    for ep in model_specs(eval_models, "--eval-model"):
        req.evaluation.models.add(kind=ep.kind, url=ep.url, model=ep.model)
    req.evaluation.conditions.extend(condition_list(eval_conditions) or [])
    if landmarks is not None:
        if landmarks < 1:
            raise InvalidInput("--landmarks must be a positive count")
        req.landmark_count = landmarks
    if video:
        try:
            req.video.width, req.video.height = (int(v) for v in video.lower().split("x"))
        except ValueError:
            raise InvalidInput(f"--video needs WIDTHxHEIGHT, e.g. 480x360, got {video!r}") from None
    if stills:
        try:
            shapes = [[int(v) for v in size.lower().split("x")] for size in stills.split("@")]
            if len(shapes) > 2 or any(len(s) != 2 or min(s) < 1 or max(s) > 65535 for s in shapes):
                raise ValueError
        except ValueError:
            raise InvalidInput(
                f"--stills needs WIDTHxHEIGHT[@WIDTHxHEIGHT] (shipped size, then the size views are "
                f"checked at), e.g. 4096x3072@1024x768, got {stills!r}"
            ) from None
        req.stills.width, req.stills.height = shapes[0]
        req.stills.working_width, req.stills.working_height = shapes[-1]
    if navigation:
        try:
            counts = [int(v) for v in navigation.split(",")]
            if len(counts) not in (2, 3) or min(counts) < 0:
                raise ValueError
        except ValueError:
            raise InvalidInput(
                f"--navigation needs GOALS,ROUTES[,PER_TYPE], e.g. 3,2 or 3,2,2, got {navigation!r}"
            ) from None
        req.navigation.goals, req.navigation.routes = counts[:2]
        if len(counts) == 3:
            req.navigation.per_type = counts[2]
    if groups is not None:
        listed, _, times = groups.lower().partition("x")
        try:
            sizes = [int(v) for v in listed.split(",")]
            per_size = int(times) if times else None
        except ValueError:
            raise InvalidInput(
                f"--groups needs UAV group sizes[xGROUPS_PER_SIZE], e.g. 3,5,6 or 3,5,6x12 (0 for none), "
                f"got {groups!r}"
            ) from None
        if sizes == [0]:
            req.groups.per_size = 0
        else:
            req.groups.sizes.extend(sizes)
            if per_size is not None:
                req.groups.per_size = per_size
    if reasoning is not None:
        try:
            counts = [int(v) for v in reasoning.split(",")]
            if len(counts) not in (1, 2) or min(counts) < 0:
                raise ValueError
        except ValueError:
            raise InvalidInput(
                f"--reasoning needs PER_SPLIT[,RANDOM_WALKS], e.g. 2 or 2,1 (0 for none), got {reasoning!r}"
            ) from None
        req.reasoning.per_split = counts[0]
        req.reasoning.random_walks = counts[-1]
    if surveys is not None:
        parts = surveys.split(",")
        try:
            count = int(parts[0])
            size = [int(v) for v in parts[1].lower().split("x")] if len(parts) == 2 else []
            if len(parts) > 2 or count < 0 or len(size) not in (0, 2):
                raise ValueError
        except ValueError:
            raise InvalidInput(
                f"--surveys needs COUNT[,WIDTHxHEIGHT], e.g. 1 or 2,4096x3072 (0 for none), got {surveys!r}"
            ) from None
        req.surveys.count = count
        if size:
            req.surveys.width, req.surveys.height = size
    if navigation_types:
        req.navigation.types.extend(t.strip() for t in navigation_types.split(",") if t.strip())
    if bound:
        try:
            values = [float(v) for v in bound.split(",")]
        except ValueError:
            raise InvalidInput(
                f"--bound needs six numbers xmin,xmax,ymin,ymax,zmin,zmax, got {bound!r}"
            ) from None
        if len(values) != 6:
            raise InvalidInput(f"--bound needs six numbers xmin,xmax,ymin,ymax,zmin,zmax, got {len(values)}")
        (
            req.bound.xmin,
            req.bound.xmax,
            req.bound.ymin,
            req.bound.ymax,
            req.bound.zmin,
            req.bound.zmax,
        ) = values
    if spacing is not None:
        req.spacing_x_m = req.spacing_y_m = spacing
        if spacing <= 0:
            raise InvalidInput("--spacing must be positive metres")
    if altitude:
        req.altitudes_m.extend(altitude)
    if review not in ("auto", "human"):
        raise InvalidInput("--review must be auto or human")
    if profile not in scan.PROFILES:
        raise InvalidInput(f"--profile must be one of {', '.join(scan.PROFILES)}")
    full = scan.apply_defaults(req)
    full.run_id = run_id or scan.run_id_for(full)
    scan.validate(full)
    return full
