"""The embedded launcher owns its nats-server (issue 15 item 5).

Real processes: ``skyqa up`` (``python -m services.cli``) in its own session with a real
nats-server. ``up`` stands in for ``demo``, which is slower (it runs a pipeline) but stops through
the same ``_run_embedded`` helper. Each test looks for leftovers by scanning ``/proc`` for a
nats-server whose command line names the test's folder, and kills whatever it finds afterwards,
so a failing test leaks nothing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from skyqa.bus import topology
from skyqa.runtime import Service, Settings
from skyqa.servers import NatsServer, free_port

from services.embedded import client_bus, wait_for_run

READY_S = 90.0  # imports alone take ~5 s; generous for a loaded 2-core machine
EXIT_S = 30.0  # services drain, then nats-server gets up to 10 s before SIGKILL


def nats_servers_for(folder: Path) -> list[int]:
    """Live nats-server processes whose command line names ``folder`` (zombies have none)."""
    found = []
    needle = str(folder).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"nats-server") and any(needle in arg for arg in argv):
            found.append(int(entry.name))
    return found


def wait_until_gone(folder: Path, timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (left := nats_servers_for(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


class Launcher:
    """``skyqa up`` on ``data_dir`` as a session leader, its stderr in a file."""

    def __init__(self, data_dir: Path, name: str, log_level: str = "WARNING") -> None:
        self.data_dir = data_dir
        self.err_path = data_dir.parent / f"{name}.stderr"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "up", "--data-dir", str(data_dir),
                 "--nats-port", str(free_port())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd=data_dir.parent,
                env={**os.environ, "SKYQA_LOG_LEVEL": log_level},
                start_new_session=True,
            )  # fmt: skip

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if any(line.startswith("NATS nats://") for line in self.stderr.splitlines()):
                return
            assert self.proc.poll() is None, f"launcher exited with {self.proc.returncode}:\n{self.stderr}"
            time.sleep(0.1)
        raise AssertionError(f"launcher not ready within {READY_S} s:\n{self.stderr}")

    def wait(self, timeout_s: float = EXIT_S) -> tuple[int, float]:
        """Exit code and seconds taken."""
        t = time.monotonic()
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"launcher still running after {timeout_s} s:\n{self.stderr}") from None
        return code, time.monotonic() - t

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Launcher]]:
    """Start launchers on ``tmp_path/data``; all of them and any nats-server they left die after."""
    started: list[Launcher] = []

    def start(name: str = "launcher", log_level: str = "WARNING") -> Launcher:
        started.append(Launcher(tmp_path / "data", f"{name}-{len(started)}", log_level))
        return started[-1]

    yield start
    for launcher in started:
        launcher.kill()
    for pid in nats_servers_for(tmp_path):
        os.kill(pid, signal.SIGKILL)
    assert not wait_until_gone(tmp_path, 10)


def server_log(data_dir: Path) -> str:
    return (data_dir / "nats" / "nats-server.log").read_text(errors="replace")


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)],
    ids=["SIGTERM", "SIGINT", "SIGHUP"],
)
def test_signal_stops_the_services_and_nats_server(
    launch: Callable[..., Launcher], tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    launcher = launch()
    launcher.wait_ready()
    assert len(nats_servers_for(tmp_path)) == 1
    launcher.proc.send_signal(sig)
    got, took = launcher.wait()
    assert got == code, launcher.stderr
    assert took < EXIT_S
    assert launcher.stderr.splitlines()[-1] == (
        f"skyqa up stopped on {sig.name}: services and nats-server are down"
    ), launcher.stderr
    # gone when the launcher returns, not some time later
    assert nats_servers_for(tmp_path) == []
    # asked to stop (SIGTERM), not killed: a JetStream store shut down cleanly
    assert server_log(tmp_path / "data").rstrip().endswith("Server Exiting..")


def test_signal_during_start_up_leaves_through_the_cleanup(
    launch: Callable[..., Launcher], tmp_path: Path
) -> None:
    # the window between nats-server starting and the services being up is about half a second;
    # on a loaded machine the signal can land after it, so a late attempt is tried again (every
    # attempt must still leave cleanly) and one must land inside the window
    during_start_up = 0
    for _ in range(3):
        launcher = launch()
        deadline = time.monotonic() + READY_S
        while not nats_servers_for(tmp_path):
            assert time.monotonic() < deadline and launcher.proc.poll() is None, launcher.stderr
            time.sleep(0.02)
        launcher.proc.send_signal(signal.SIGTERM)
        got, _ = launcher.wait()
        assert got == 143, launcher.stderr
        assert launcher.stderr.splitlines()[-1].startswith("skyqa up stopped on SIGTERM")
        assert nats_servers_for(tmp_path) == []
        if "NATS nats://" not in launcher.stderr:
            during_start_up += 1
            break
    assert during_start_up, "every signal came after start-up; this test proved nothing"


def test_second_launcher_on_the_same_folder_fails_at_once(
    launch: Callable[..., Launcher], tmp_path: Path
) -> None:
    first = launch("first")
    first.wait_ready()
    (server,) = nats_servers_for(tmp_path)
    second = launch("second")
    got, _ = second.wait(READY_S)  # import time, then the lock refuses
    assert got == 2, second.stderr
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert lines[0].startswith("error: ")
    assert str(tmp_path / "data" / "nats" / "jetstream") in lines[0]
    assert f"pid {first.proc.pid}" in lines[0] and f"nats-server is pid {server}" in lines[0]
    # the first one is untouched and still the only server on the folder
    assert first.proc.poll() is None
    assert nats_servers_for(tmp_path) == [server]
    first.proc.send_signal(signal.SIGTERM)
    assert first.wait()[0] == 143
    assert nats_servers_for(tmp_path) == []


def test_sigkill_of_the_launcher_leaves_no_nats_server(
    launch: Callable[..., Launcher], tmp_path: Path
) -> None:
    launcher = launch()
    launcher.wait_ready()
    assert len(nats_servers_for(tmp_path)) == 1
    os.kill(launcher.proc.pid, signal.SIGKILL)  # the launcher only, not its group
    assert launcher.wait()[0] == -signal.SIGKILL
    # the parent-death signal: SIGTERM from the kernel, a clean JetStream shutdown
    assert wait_until_gone(tmp_path, 15) == []
    log = server_log(tmp_path / "data")
    assert 'Trapped "terminated" signal' in log and log.rstrip().endswith("Server Exiting..")
    # the dead launcher's lock does not block the next one, which finds its streams intact
    again = launch("again")
    again.wait_ready()
    assert "errored" not in server_log(tmp_path / "data")
    again.proc.send_signal(signal.SIGTERM)
    assert again.wait()[0] == 143
    assert nats_servers_for(tmp_path) == []


def test_lock_refuses_a_second_server_and_is_released_by_stop(tmp_path: Path) -> None:
    from skyqa.servers import DataDirLocked

    # a lock file left by a dead process names pids but holds no lock
    (tmp_path / "nats").mkdir()
    (tmp_path / "nats" / "nats-server.lock").write_text("999999999 999999998\n")
    first = NatsServer(tmp_path / "nats").start()
    assert first.proc is not None
    try:
        second = NatsServer(tmp_path / "nats")
        with pytest.raises(DataDirLocked) as refused:
            second.start()
        assert second.proc is None  # refused before anything was spawned
        assert str(tmp_path / "nats" / "jetstream") in str(refused.value)
        assert f"pid {os.getpid()} (its nats-server is pid {first.proc.pid})" in str(refused.value)
    finally:
        first.stop()
    assert nats_servers_for(tmp_path) == []
    second.start().stop()  # released by stop()
    first.start().stop()  # and the same object can start again (restart tests do)


def test_server_outlives_the_thread_that_started_it(tmp_path: Path) -> None:
    # PR_SET_PDEATHSIG fires when the forking *thread* exits; a server started from a worker
    # thread must not die with it
    server = NatsServer(tmp_path / "nats")
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and server.proc is not None
    try:
        time.sleep(1.0)
        assert server.proc.poll() is None, server_log(tmp_path)
    finally:
        server.stop()


async def test_services_leave_the_signal_handlers_of_their_process_alone(settings: Settings) -> None:
    """uvicorn's own handlers, nested once per service and restored in the order the servers
    stopped, left a stopped server's handler in place: SIGTERM was then swallowed for good."""

    async def nothing(svc: Service) -> None:
        return None

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    first, second = Service("first", settings, nothing), Service("second", settings, nothing)
    await first.start()
    await second.start()
    assert {sig: signal.getsignal(sig) for sig in before} == before
    await first.stop()  # not the reverse of the start order
    await second.stop()
    assert {sig: signal.getsignal(sig) for sig in before} == before


@pytest.mark.parametrize("service", ["capture", "renderer", "labeller", "evaluator"])
def test_sigterm_while_the_services_start_stops_everything(
    launch: Callable[..., Launcher], tmp_path: Path, service: str
) -> None:
    """A signal that lands while a service connects may have its cancellation swallowed by a
    library: the launcher cancels until the start-up ends, so the signal is never spent."""
    launcher = launch(log_level="INFO")
    deadline = time.monotonic() + READY_S
    while f"{service} started" not in launcher.stderr:
        assert launcher.proc.poll() is None and time.monotonic() < deadline, launcher.stderr
        time.sleep(0.01)
    launcher.proc.send_signal(signal.SIGTERM)
    code, _ = launcher.wait()
    assert code == 128 + signal.SIGTERM, launcher.stderr
    assert not wait_until_gone(tmp_path, 10)


async def test_following_a_run_outlasts_a_restarted_nats_server(tmp_path: Path) -> None:
    """A 40-landmark demo stopped following its run (the services went on) when its one client
    connection dropped on a loaded machine: the follower connects again until its deadline."""
    server = NatsServer(tmp_path / "nats").start()
    try:
        running = {"run_id": "r1", "status": "running", "stages": {"qa": {"status": "running"}}}
        async with client_bus(server.url) as bus:
            await (await bus.kv(topology.RUNS_BUCKET)).put("r1", running)
        seen: list[str] = []
        follow = asyncio.create_task(
            wait_for_run(server.url, "r1", "qa", 60, on_state=lambda s: seen.append(s.stages["qa"].status))
        )
        await asyncio.sleep(1.0)
        await asyncio.to_thread(server.stop)  # the follower's connection closes for good
        await asyncio.sleep(1.5)
        assert not follow.done()
        await asyncio.to_thread(server.start)
        done = {**running, "status": "completed", "stages": {"qa": {"status": "completed"}}}
        async with client_bus(server.url) as bus:
            await (await bus.kv(topology.RUNS_BUCKET)).put("r1", done)
        state = await asyncio.wait_for(follow, 30)
        assert state.stages["qa"].status == "completed" and seen[0] == "running"
    finally:
        server.stop()
    # a server never reached is a wrong address, not a blip: that fails at once
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="cannot connect to NATS"):
        await wait_for_run(f"nats://127.0.0.1:{free_port()}", "r1", "qa", 60)
    assert time.monotonic() - started < 30
