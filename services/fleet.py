"""Every service as its own ``skyqa serve <name>`` process, the way a container runs it.

Used by the reliability tests (kill and restart processes mid-run) and the benchmarks (peak
memory per service); ``Embedded`` is the in-process alternative.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from services.registry import SERVICES


class Fleet:
    def __init__(
        self,
        env: Mapping[str, str],
        log_dir: Path,
        services: Iterable[str] = SERVICES,
        per_service: Mapping[str, Mapping[str, str]] | None = None,
        replicas: Mapping[str, int] | None = None,
    ) -> None:
        """``env`` is every process's; ``per_service`` adds one service's own (e.g. its NATS user).
        ``replicas`` runs more than one process of a service, as ``docker compose --scale`` does:
        they share its durable consumers. The first is named after the service, the others
        ``<service>#2`` and on; a ``per_service`` entry under a replica's name adds its own."""
        self.env = {**os.environ, **env}
        self.per_service = per_service or {}
        self.log_dir = Path(log_dir)
        counts = replicas or {}
        self.names = [
            service if i == 1 else f"{service}#{i}"
            for service in services
            for i in range(1, counts.get(service, 1) + 1)
        ]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str | None = None) -> Fleet:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for n in [name] if name else self.names:
            service = n.partition("#")[0]
            log = open(self.log_dir / f"{n}.log", "ab")  # noqa: SIM115 - owned by the process
            self.procs[n] = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "serve", service],
                env={**self.env, **self.per_service.get(service, {}), **self.per_service.get(n, {})},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def kill(self, name: str) -> None:
        """SIGKILL: no drain, no ack of what is in flight, like a crashed container."""
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def alive(self) -> dict[str, bool]:
        return {n: p.poll() is None for n, p in self.procs.items()}

    def stop(self, timeout_s: float = 30.0) -> dict[str, int]:
        """SIGTERM every process and wait; returns the exit codes."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait()
        return codes

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""
