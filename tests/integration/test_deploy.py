"""compose.yaml and the image's command, checked with what runs here (no Docker engine)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from pydantic import BaseModel
from skyqa.blob import LocalBlobStore, S3BlobStore
from skyqa.servers import NatsServer, SeaweedS3, free_port
from skyqa.settings import Settings

from services.registry import SERVICES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())


def skyqa_services() -> dict[str, dict[str, Any]]:
    """The bus services (``skyqa serve <name>``); tools such as the AirSim server are not."""
    return {
        name: svc
        for name, svc in COMPOSE["services"].items()
        if svc.get("image", "").startswith("skyqa") and svc["command"][0] == "serve"
    }


def is_setting(key: str) -> bool:
    """Whether the variable ``SKYQA_A__B`` names a field of :class:`Settings` (``a.b``)."""
    model: object = Settings
    for part in key.removeprefix("SKYQA_").lower().split("__"):
        if not (isinstance(model, type) and issubclass(model, BaseModel) and part in model.model_fields):
            return False
        model = model.model_fields[part].annotation
    return True


def interpolate(value: object) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR:?message}`` with nothing set: the default, or a
    stand-in for a required secret."""
    return re.sub(
        r"\$\{[A-Z0-9_]+(?::-([^}]*)|:\?[^}]*)\}",
        lambda m: m.group(1) if m.group(1) is not None else "test-secret",
        str(value),
    )


def test_every_implemented_service_is_deployed_with_a_real_command() -> None:
    deployed = skyqa_services()
    assert {svc["command"][1] for svc in deployed.values()} == set(SERVICES)
    for name, svc in deployed.items():
        assert svc["command"] == ["serve", name]
        assert svc["restart"] == "unless-stopped"
        assert svc["depends_on"]["nats"]["condition"] == "service_healthy"


def test_every_env_var_is_a_setting() -> None:
    for svc in skyqa_services().values():
        for key in svc["environment"]:
            assert key.startswith("SKYQA_")
            assert is_setting(key), f"{key} is not read by skyqa"


def test_no_secret_is_committed() -> None:
    text = (ROOT / "compose.yaml").read_text()
    for secret in (
        "MINIO_ROOT_PASSWORD",
        "SKYQA_GATEWAY_TOKEN",
        "SKYQA_REVIEW_TOKEN",
        "GRAFANA_ADMIN_PASSWORD",
    ):
        assert f"${{{secret}:?" in text, secret
    assert "skyqa-dev-secret" not in text


def test_images_are_pinned_and_every_service_is_health_checked() -> None:
    for name, svc in COMPOSE["services"].items():
        if "image" in svc and not svc["image"].startswith("skyqa"):
            tag = svc["image"].rsplit(":", 1)
            assert len(tag) == 2 and tag[1] not in ("latest", ""), f"{name} image is not pinned"
    assert COMPOSE["services"]["nats"]["image"].endswith("-alpine")  # wget for the health check
    for name, svc in skyqa_services().items():
        assert "/readyz" in " ".join(svc["healthcheck"]["test"]), name
    assert "HEALTHCHECK" in (ROOT / "deploy/Dockerfile").read_text()
    assert "USER skyqa" in (ROOT / "deploy/Dockerfile").read_text()


def test_grafana_is_provisioned_with_a_dashboard_of_real_metrics(tmp_path: Path) -> None:
    grafana = COMPOSE["services"]["grafana"]
    mounts = {v.split(":")[1]: ROOT / v.split(":")[0] for v in grafana["volumes"]}
    provisioning = mounts["/etc/grafana/provisioning"]
    source = yaml.safe_load((provisioning / "datasources/prometheus.yaml").read_text())["datasources"][0]
    assert source["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((provisioning / "dashboards/skyqa.yaml").read_text())["providers"][0]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    dashboard = json.loads((mounts["/var/lib/grafana/dashboards"] / "skyqa.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert all(t["datasource"]["uid"] == source["uid"] for p in dashboard["panels"] for t in p["targets"])
    # every skyqa metric a panel queries is one the services export
    exported = set()
    for name in SERVICES:
        svc = SERVICES[name](Settings(), LocalBlobStore(tmp_path))
        exported |= {m.name for m in svc.metrics.registry.collect()}
    queried = {m for e in exprs for m in re.findall(r"\b(skyqa_[a-z_]+?)(?:_bucket|_total)?\b", e)}
    assert queried and queried <= exported, queried - exported


def test_prometheus_scrapes_every_service() -> None:
    prom = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "skyqa")
    assert set(job["dns_sd_configs"][0]["names"]) == set(SERVICES)


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_container_command_runs_and_becomes_ready(
    name: str, nats_server: NatsServer, s3_server: SeaweedS3, s3_store: S3BlobStore, tmp_path: Path
) -> None:
    svc = skyqa_services()[name]
    port = free_port()
    env = {**os.environ}
    for key, value in svc["environment"].items():
        env[key] = interpolate(value)
    env.update(
        SKYQA_BUS__NATS_URL=nats_server.url,
        SKYQA_STORE__S3_ENDPOINT=s3_server.endpoint,
        SKYQA_STORE__S3_BUCKET=s3_store.bucket,
        SKYQA_STORE__S3_ACCESS_KEY=s3_server.access_key,
        SKYQA_STORE__S3_SECRET_KEY=s3_server.secret_key,
        SKYQA_HTTP__HOST="127.0.0.1",
        SKYQA_HTTP__PORT=str(port),
    )
    log = tmp_path / f"{name}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli", *svc["command"]], env=env, stdout=fh, stderr=fh
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                    if ready.status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            assert ready.json()["checks"] == {"bus": True, "store": True, "draining": False}
        finally:
            proc.terminate()
            assert proc.wait(timeout=30) == 0, log.read_text()


def test_kubernetes_manifests_deploy_every_service_with_probes() -> None:
    k8s = ROOT / "deploy/k8s"
    listed = yaml.safe_load((k8s / "kustomization.yaml").read_text())["resources"]
    docs = [d for f in listed for d in yaml.safe_load_all((k8s / f).read_text()) if d]
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    assert set(deployments) == {n.replace("_", "-") for n in SERVICES}
    config = next(d for d in docs if d["kind"] == "ConfigMap")
    for name, dep in deployments.items():
        c = dep["spec"]["template"]["spec"]["containers"][0]
        assert c["args"][0] == "serve" and c["args"][1].replace("_", "-") == name
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert c["securityContext"]["runAsNonRoot"] is True
        assert {"configMapRef": {"name": config["metadata"]["name"]}} in c["envFrom"]
    env = {
        (name, e["name"]): e["value"]
        for name, dep in deployments.items()
        for e in dep["spec"]["template"]["spec"]["containers"][0].get("env", [])
    }
    renderer = deployments["renderer"]["spec"]["template"]["spec"]["containers"][0]
    assert env[("renderer", "SKYQA_RENDER_THREADS")] == renderer["resources"]["limits"]["cpu"]
    for key in [*config["data"], *(k for _, k in env)]:  # every configured variable is a setting
        assert is_setting(key), key
    assert not [d for d in docs if d["kind"] == "Secret"], "secrets are created from a secret store"
    scaled = next(d for d in docs if d["kind"] == "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] in deployments
    from services.renderer.app import CONSUMER, VIDEO_CONSUMER

    consumers = {t["metadata"]["consumer"] for t in scaled["spec"]["triggers"]}
    assert consumers == {CONSUMER.durable, VIDEO_CONSUMER.durable}
    assert {t["metadata"]["stream"] for t in scaled["spec"]["triggers"]} == {CONSUMER.stream}


def test_every_service_connects_as_its_own_nats_user() -> None:
    conf = (ROOT / "deploy/nats/nats.conf").read_text()
    users = set(re.findall(r"user: (\w+)", conf))
    assert users == {*SERVICES, "client"}
    nats = COMPOSE["services"]["nats"]
    assert "./deploy/nats/nats.conf:/etc/nats/nats.conf:ro" in nats["volumes"]
    for user in users:
        assert f"password: $NATS_{user.upper()}_PASSWORD" in conf
        assert nats["environment"][f"NATS_{user.upper()}_PASSWORD"].startswith(
            f"${{NATS_{user.upper()}_PASSWORD:?"
        )
    for name, svc in skyqa_services().items():
        assert svc["environment"]["SKYQA_BUS__NATS_URL"].startswith(f"nats://{name}:${{NATS_{name.upper()}_")


async def test_nats_users_may_publish_only_their_own_events(tmp_path: Path) -> None:
    import nats as nats_client
    from skyqa.bus import Bus, topology
    from skyqa.settings import BusSettings

    passwords = {"capture": "pw-capture", "qa_generator": "pw-qa"}
    env = {f"NATS_{u.upper()}_PASSWORD": f"pw-{u}" for u in [*SERVICES, "client"]} | {
        f"NATS_{u.upper()}_PASSWORD": pw for u, pw in passwords.items()
    }
    server = NatsServer(tmp_path / "nats", config=ROOT / "deploy/nats/nats.conf", env=env).start()
    try:
        host = server.url.removeprefix("nats://")
        with pytest.raises(ConnectionError):  # a wrong password is refused
            await Bus(BusSettings(nats_url=f"nats://capture:nope@{host}"), "capture").connect(
                retry_forever=False
            )
        bus = Bus(BusSettings(nats_url=f"nats://capture:pw-capture@{host}"), "capture")
        await bus.connect(retry_forever=False)
        try:
            await bus.ensure_streams()  # the JetStream API is open to every service
            runs = await bus.kv(topology.RUNS_BUCKET)
            await runs.update("r1", lambda doc: {"ok": True})
            ack = await bus.js.publish(topology.CAPTURE_JOB, b"x", headers={"Nats-Msg-Id": "perm-1"})
            assert ack.stream == topology.EVENTS_STREAM
            # another stage's event is refused by the server: no ack ever comes
            with pytest.raises(nats_client.errors.TimeoutError):
                await bus.js.publish(topology.QA_COMPLETED, b"x", timeout=1.5)
        finally:
            await bus.stop()
    finally:
        server.stop()


def test_the_airsim_service_command_serves_airsims_rpc(tmp_path: Path) -> None:
    import msgpack

    svc = COMPOSE["services"]["airsim"]
    assert svc["image"].startswith("skyqa") and svc["profiles"] == ["sim"] and svc["healthcheck"]["test"]
    port = free_port()
    command = [interpolate(a) for a in svc["command"]]
    command[command.index("--port") + 1] = str(port)
    command[command.index("--host") + 1] = "127.0.0.1"  # 0.0.0.0 in the container; loopback here
    command[command.index("--scene") + 1] = "tiny_town"
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.cli", *command], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and f"127.0.0.1:{port}" in proc.stdout.readline()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(msgpack.packb([0, 1, "ping", []]))
            assert msgpack.unpackb(s.recv(64), raw=False) == [1, 1, None, True]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_render_path_scales_out_as_replicas_of_one_core_each() -> None:
    """``RENDERER_REPLICAS`` / ``MISSION_PLANNER_REPLICAS`` (or ``--scale``): N replicas bind the
    same durable consumers, so neither may claim a fixed host port or container name."""
    services = COMPOSE["services"]
    for name in ("renderer", "mission_planner"):
        svc = services[name]
        assert int(interpolate(svc["deploy"]["replicas"])) == 1, name
        assert "ports" not in svc and "container_name" not in svc, name
    renderer = services["renderer"]
    assert float(renderer["cpus"]) == 1.0
    assert renderer["environment"]["SKYQA_RENDER_THREADS"] == "1"
