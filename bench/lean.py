"""Resident memory of the services that neither render nor fuse, right after they start.

Each runs as its container does (``skyqa serve <name>``, through :class:`services.fleet.Fleet`)
against a real nats-server and a local store; once ``/readyz`` answers 200, ``VmRSS`` is read
from ``/proc``. Issue 17 sets 150 MB as the budget: a process that never renders has no use for
Open3D, numba or scipy, and every replica of it pays for them if they load at import.

``python -m bench.lean`` runs only this part and merges it into ``bench/results.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from skyqa.servers import NatsServer, free_port

from services.fleet import Fleet

TARGET_MB = 150
LEAN_SERVICES = ("gateway", "labeller", "qa_generator", "evaluator")


def _status_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"process {pid} reports no {field}")


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def service_start_rss(
    services: tuple[str, ...] = LEAN_SERVICES, timeout_s: float = 120.0, settle_s: float = 1.0
) -> dict[str, Any]:
    """``rss_mb``: VmRSS of each service once ready; ``peak_rss_mb``: VmHWM, what the start
    itself needed at most; ``seconds_to_ready`` from spawn."""
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(Path(tmp) / "nats").start()
        ports = {name: free_port() for name in services}
        env = {
            "SKYQA_BUS__NATS_URL": server.url,
            "SKYQA_STORE__BACKEND": "local",
            "SKYQA_STORE__LOCAL_ROOT": str(Path(tmp) / "store"),
            "SKYQA_HTTP__HOST": "127.0.0.1",
            "SKYQA_LOG_LEVEL": "WARNING",
            "SKYQA_EVALUATION__CACHE_DIR": str(Path(tmp) / "eval-cache"),
        }
        fleet = Fleet(
            env,
            Path(tmp) / "logs",
            services=services,
            per_service={name: {"SKYQA_HTTP__PORT": str(port)} for name, port in ports.items()},
        )
        start = time.monotonic()
        fleet.start()
        try:
            ready_after: dict[str, float] = {}
            while len(ready_after) < len(services):
                for name in services:
                    if name in ready_after:
                        continue
                    if fleet.procs[name].poll() is not None:
                        raise RuntimeError(f"{name} exited before it was ready:\n{fleet.log(name)}")
                    if _ready(ports[name]):
                        ready_after[name] = time.monotonic() - start
                if time.monotonic() - start > timeout_s:
                    waiting = sorted(set(services) - set(ready_after))
                    raise RuntimeError(f"not ready after {timeout_s:.0f} s: {', '.join(waiting)}")
                time.sleep(0.1)
            # ready means the consumers are bound; give their first fetch a moment to settle
            time.sleep(settle_s)
            rss = {name: round(_status_mb(fleet.procs[name].pid, "VmRSS"), 1) for name in services}
            peak = {name: round(_status_mb(fleet.procs[name].pid, "VmHWM"), 1) for name in services}
        finally:
            fleet.stop()
            server.stop()
    return {
        "command": "skyqa serve <name>",
        "target_mb": TARGET_MB,
        "rss_mb": rss,
        "peak_rss_mb": peak,
        "seconds_to_ready": {name: round(s, 1) for name, s in ready_after.items()},
        "within_target": {name: mb <= TARGET_MB for name, mb in rss.items()},
    }


def table(result: dict[str, Any]) -> list[str]:
    rss, peak = result["rss_mb"], result["peak_rss_mb"]
    lines = [f"RSS after start (skyqa serve <name>, target <= {TARGET_MB} MB):"]
    for name, mb in rss.items():
        verdict = "ok" if mb <= TARGET_MB else "OVER"
        lines.append(f"  {name:<14} {mb:>6.0f} MB  (peak {peak[name]:>4.0f} MB)  {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/results.json"))
    args = parser.parse_args()
    result = service_start_rss()
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    results["lean_processes"] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print("\n".join(table(result)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
