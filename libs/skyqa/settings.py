"""Configuration for every service: environment variables (``SKYQA_`` prefix, ``__`` for nesting)
over an optional YAML file (``SKYQA_CONFIG``) over defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from skyqa.contracts.base import first_error
from skyqa.errors import InvalidInput
from skyqa.sim.classes import CLASSES


class ConfigError(InvalidInput):
    reason = "invalid_config"


class StoreSettings(BaseModel):
    backend: Literal["local", "s3"] = "local"
    local_root: Path = Path(".skyqa/store")
    s3_endpoint: str = "127.0.0.1:9000"
    s3_access_key: str = "skyqa"
    s3_secret_key: SecretStr = SecretStr("")
    s3_bucket: str = "skyqa"
    s3_secure: bool = False
    s3_region: str | None = None
    s3_create_bucket: bool = False


class BusSettings(BaseModel):
    nats_url: str = "nats://127.0.0.1:4222"
    connect_timeout_s: float = Field(5.0, gt=0)
    ack_wait_s: float = Field(30.0, gt=0)
    # with the delays below a message is retried for about 90 s (1+2+4+8+16+30+30) before it is
    # dead-lettered, so an object-store or simulator outage of a minute heals on its own
    max_deliver: int = Field(8, ge=1, le=100)
    retry_base_s: float = Field(1.0, gt=0)
    retry_max_s: float = Field(30.0, gt=0)
    fetch_timeout_s: float = Field(2.0, gt=0)
    drain_timeout_s: float = Field(10.0, gt=0)
    duplicate_window_s: float = Field(600.0, gt=0)


class HttpSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)


class AirSimServerSettings(BaseModel):
    """What one client of `skyqa sim serve` may make the server hold; past a bound the server
    closes that connection and logs why (see skyqa.sim.rpc_server.Limits)."""

    # one request (an image request is a few hundred bytes), buffered until it is whole
    max_message_bytes: int = Field(64 * 1024, ge=1024, le=64 * 1024 * 1024)
    # unfinished requests of every connection together
    max_buffered_bytes: int = Field(8 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    # one more closes the connection idle longest, or is closed itself while every one has a
    # call in flight; each open one may have a call running
    max_connections: int = Field(64, ge=1, le=1024)
    # lengths of one array, map, string and bin inside a request
    max_array_len: int = Field(1024, ge=16, le=1 << 24)
    max_map_len: int = Field(256, ge=16, le=1 << 24)
    max_str_len: int = Field(16 * 1024, ge=256, le=64 * 1024 * 1024)
    max_bin_len: int = Field(16 * 1024, ge=0, le=64 * 1024 * 1024)
    # from a request's first byte to its last, however its bytes trickle in
    message_timeout_s: float = Field(10.0, gt=0, le=3600)
    # a connection with no request in flight that sends nothing this long is closed. Long:
    # the pinned Cosys-AirSim client does not reconnect, so a script that pauses longer breaks; at
    # max_connections the connection idle longest makes room for a newcomer whatever this is
    idle_timeout_s: float = Field(3600.0, gt=0, le=7 * 24 * 3600)
    # an answer its client does not take within this (down to the socket buffer's high-water
    # mark, 64 KiB) closes the connection and drops the answer
    write_timeout_s: float = Field(30.0, gt=0, le=3600)
    # answers not yet taken, every connection together; past it the connection holding the most
    # is closed. An answer bigger than this can never be sent (a 4096x3072 float image is 63 MB)
    max_unsent_bytes: int = Field(256 * 1024 * 1024, ge=1024 * 1024, le=64 * 1024 * 1024 * 1024)


class AirSimSettings(BaseModel):
    """Where the AirSim-family simulator runs and how its object names map to skyqa classes."""

    host: str = "127.0.0.1"
    port: int = Field(41451, ge=1, le=65535)
    vehicle: str = ""
    camera: str = "0"
    # those the simulator lacks are left out at connect (logged); none of them there is an error
    lidar_names: list[str] = ["LidarSensor1", "LidarSensor2"]
    bgr: bool = False  # Microsoft AirSim and `skyqa sim serve` send BGR, Cosys-AirSim RGB
    # how Segmentation colours name objects: Cosys-AirSim's colormap at the object's
    # segmentation id, or the id itself (R + 256 G + 65536 B); `skyqa sim serve --palette`
    # paints either
    segmentation: Literal["cosys", "ids"] = "cosys"
    lidar_frame: Literal["sensor", "world"] = "sensor"  # settings.json DataFrame: SensorLocal or not
    # (regex on the object name, skyqa class name), first match wins; then skyqa's own names
    # (`<class>` or `<class>_<n>`, as `skyqa sim serve` names objects)
    labels: list[tuple[str, str]] = [
        (r"(?i)ground.*|landscape.*", "ground"),
        (r"(?i)road.*", "road"),
        *((rf"(?i){c.name}(_\d+)?", c.name) for c in CLASSES),
    ]
    extent: tuple[float, float, float, float] = (-500.0, 500.0, -500.0, 500.0)
    server: AirSimServerSettings = AirSimServerSettings()  # `skyqa sim serve`'s limits


class ModelEndpoint(BaseModel):
    """Which model a service calls; swapping models is a configuration change."""

    # world_grpc: an action-conditioned video world model (skyqa.v1.WorldModel) at host:port
    kind: Literal["heuristic", "openai", "grpc", "world_grpc"] = "heuristic"
    url: str = ""  # OpenAI-compatible base URL (…/v1) or gRPC target host:port
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(60.0, gt=0)
    max_attempts: int = Field(4, ge=1, le=20)
    rpm: int = Field(0, ge=0)
    tpm: int = Field(0, ge=0)  # tokens per minute (prompt estimate + max_tokens); 0 = no limit
    # how a video reaches the model: 0 = as each family's source benchmark samples it
    # (skyqa.media_policy); else this many frames spread over it, or that many frames per second
    video_frames: int = Field(0, ge=0, le=256)
    video_sample_fps: float = Field(0.0, ge=0.0, le=30.0)
    # what the endpoint accepts, 0 = no stated limit: the largest width x height of one image
    # (stills go as stored unless larger), the most frames of one video, and the most media
    # bytes of one request (media are scaled down to fit, or the request is not sent)
    max_pixels: int = Field(0, ge=0)
    max_frames: int = Field(0, ge=0, le=256)
    max_request_bytes: int = Field(0, ge=0)
    # a world model that receives the scene and root state (a reference renderer, not a model
    # under test); only the operator's entry can say so
    privileged: bool = False


class EvaluationSettings(BaseModel):
    """Which models the evaluator runs besides its baselines, and how."""

    models: list[ModelEndpoint] = []
    # the only endpoints a request may name (matched by kind and url); each entry's
    # api_key_env, timeout and limits apply, so a request can never choose them
    allowed_endpoints: list[ModelEndpoint] = []
    cache_dir: Path = Path(".skyqa/eval-cache")  # content-addressed, safe to share between runs
    concurrency: int = Field(4, ge=1, le=256)
    budget: int = Field(0, ge=0)  # most requests per model and run; 0 = no cap
    # services/evaluator/conditions.py; "full" always runs
    conditions: list[str] = ["full", "text_only", "circular", "schema_cot"]


class QASettings(BaseModel):
    """How the qa-generator treats a release that blind solvers can answer."""

    # enforce: the release fails (no manifests) when the blind gate finds a leak; report: the
    # release is written and qc_report.json and the dataset card say what leaks
    blind_gate: Literal["enforce", "report"] = "enforce"


class GatewaySettings(BaseModel):
    """The HTTP API and dashboard in front of the bus."""

    # bearer token of write routes (POST /v1/scans); writes are refused while it is empty
    token: SecretStr = SecretStr("")
    # set: reads under /v1/ (runs, releases, the workbench's data) need it or the write token;
    # empty: reads are open, as a published release is
    read_token: SecretStr = SecretStr("")
    max_body_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    # where browsers reach the review web (landmark service), linked from the dashboard
    review_url: str = ""
    presign_expiry_s: int = Field(3600, ge=60, le=7 * 24 * 3600)
    max_listing: int = Field(5000, ge=1, le=100_000)  # most files one release listing returns
    # release files streamed at once (each holds a 256 KiB buffer and, on S3, a connection);
    # one more is answered 503 with Retry-After instead of queueing without bound
    max_file_streams: int = Field(64, ge=1, le=10_000)
    # wrong tokens one client address may send to POST /v1/session in a minute; more are
    # answered 429 with Retry-After until the oldest failure is a minute old
    signin_failures_per_minute: int = Field(10, ge=1, le=10_000)
    # release files one client address streams at once; one more is answered 503 with
    # Retry-After, so a few idle sockets from one address cannot take every stream slot
    max_file_streams_per_client: int = Field(8, ge=1, le=10_000)
    # seconds a client may take to accept one 256 KiB chunk of a release file; past that the
    # connection is aborted and its stream slot given back
    file_send_timeout_s: float = Field(30.0, gt=0, le=3600)
    # proxies whose X-Forwarded-For / X-Forwarded-Proto every HTTP server of this deployment
    # believes (uvicorn's forwarded_allow_ips: comma-separated addresses or networks, "*" for
    # any); empty: none, so a client is its socket's peer address (what the sign-in limiter
    # and the per-client stream cap count) and any forwarded header is ignored
    forwarded_allow_ips: str = Field("", max_length=4096)
    # rows of every (family, task) the workbench's human answerability audit asks; raising it
    # extends the sample (it is drawn in a fixed order seeded by the run id), never redraws it
    audit_per_stratum: int = Field(5, ge=1, le=1000)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SKYQA_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = False
    concurrency: int = Field(1, ge=1, le=64)
    # threads of each built-in ray cast and shading kernel; 0 = every core. Scaled-out renderer
    # replicas set it to the cores each one is given, so replicas do not fight over cores.
    render_threads: int = Field(0, ge=0, le=256)
    store: StoreSettings = StoreSettings()
    bus: BusSettings = BusSettings()
    http: HttpSettings = HttpSettings()
    scenes_dir: Path | None = None
    airsim: AirSimSettings = AirSimSettings()
    labeller_model: ModelEndpoint = ModelEndpoint()
    # show the labeller the segmentation class name (UAV-DualCog does); off, the category is
    # the model's own reading of the views and the measured size, not the simulator's truth
    labeller_class_hint: bool = False
    evaluation: EvaluationSettings = EvaluationSettings()
    qa: QASettings = QASettings()
    # keep full-resolution (4096x3072) frames of every mission video next to the MP4
    archive_video_frames: bool = False
    # bearer token of the review web; the web refuses writes while it is empty
    review_token: SecretStr = SecretStr("")
    gateway: GatewaySettings = GatewaySettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_path = os.environ.get("SKYQA_CONFIG")
        if config_path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_path))
        return tuple(sources)


def load_settings(**overrides: Any) -> Settings:
    """Load settings, turning every problem into one :class:`ConfigError` line."""
    config_path = os.environ.get("SKYQA_CONFIG")
    if config_path and not Path(config_path).is_file():
        raise ConfigError(f"SKYQA_CONFIG points to {config_path!r}, which is not a file")
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise ConfigError(f"invalid configuration at {where or 'settings'}: {msg}") from None
    except (ValueError, OSError, yaml.YAMLError) as exc:  # malformed YAML, unreadable files
        detail = " ".join(str(exc).split())
        raise ConfigError(f"cannot read configuration {config_path}: {detail}") from None
