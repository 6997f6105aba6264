"""scripts/audit.py: a pip-audit run that checked nothing must never read as a clean result."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "audit.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skyqa_audit_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


audit = _load()

# pip-audit 2.10.1 on this machine (PyPI's JSON API answers 404, OSV unreachable), exit 0
RECORDED_OFFLINE = (
    '{"dependencies": [{"name": "idna", "skip_reason": "Dependency not found on PyPI and could not be '
    'audited: idna (3.10)"}, {"name": "six", "skip_reason": "Dependency not found on PyPI and could '
    'not be audited: six (1.16.0)"}], "fixes": []}'
)
# pip-audit 2.10.1 against the OSV stub below, exit 1
RECORDED_FOUND = (
    '{"dependencies": [{"name": "idna", "version": "3.10", "vulns": [{"id": "CVE-0000-1", '
    '"fix_versions": ["3.7"], "aliases": ["OSV-TEST-1"], "description": "test"}]}, '
    '{"name": "six", "version": "1.16.0", "vulns": []}], "fixes": []}'
)
CLEAN = json.dumps(
    {
        "dependencies": [
            {"name": "idna", "version": "3.10", "vulns": []},
            {"name": "six", "version": "1.16.0", "vulns": []},
        ],
        "fixes": [],
    }
)


def judge(stdout: str, returncode: int = 0, offline_ok: bool = False, stderr: str = "") -> Any:
    return audit.judge(returncode, stdout, stderr, offline_ok)


def test_nothing_audited_is_not_a_clean_result() -> None:
    got = judge(RECORDED_OFFLINE)
    assert got.code == 3
    assert got.line.startswith("pip-audit: AUDITED NOTHING: 0 of 2 dependencies could be checked (")
    assert '2x "Dependency not found on PyPI and could not be audited"' in got.line
    assert "no vulnerability database answered" in got.line
    assert "this is not a clean result" in got.line
    assert "\n" not in got.line


def test_nothing_audited_passes_only_with_the_explicit_opt_in() -> None:
    got = judge(RECORDED_OFFLINE, offline_ok=True)
    assert got.code == 0
    # still says plainly that nothing was checked
    assert got.line.startswith("pip-audit: AUDITED NOTHING: 0 of 2")
    assert got.line.endswith("accepted: SKYQA_AUDIT_OFFLINE_OK=1 (this machine reaches no advisory source)")


def test_vulnerabilities_fail_with_what_and_where() -> None:
    got = judge(RECORDED_FOUND, returncode=1)
    assert got == audit.Outcome(
        "pip-audit: 2 of 2 dependencies audited, 0 skipped; 1 known vulnerability in 1 dependency: "
        "idna 3.10 (CVE-0000-1)",
        1,
    )
    # the opt-in is about reachability; it never excuses findings
    assert judge(RECORDED_FOUND, returncode=1, offline_ok=True).code == 1
    # findings count even when the exit code disagrees
    assert judge(RECORDED_FOUND, returncode=0).code == 1


def test_clean_and_partly_skipped_audits_pass_and_say_what_was_skipped() -> None:
    assert judge(CLEAN) == audit.Outcome(
        "pip-audit: 2 of 2 dependencies audited, 0 skipped; no known vulnerabilities", 0
    )
    doc = json.loads(CLEAN)
    doc["dependencies"].append({"name": "skyqa", "skip_reason": "requirement marked as editable"})
    got = judge(json.dumps(doc))
    assert got == audit.Outcome(
        'pip-audit: 2 of 3 dependencies audited, 1 skipped: 1x "requirement marked as editable"; '
        "no known vulnerabilities",
        0,
    )


def test_an_empty_report_audited_nothing() -> None:
    got = judge('{"dependencies": [], "fixes": []}')
    assert got.code == 3 and got.line.startswith("pip-audit: AUDITED NOTHING: 0 of 0")


def test_pip_audit_failing_is_exit_3_with_its_last_error() -> None:
    stderr = "Traceback ...\nrequests.exceptions.ConnectionError: api.osv.dev unreachable\n"
    got = judge("", returncode=1, stderr=stderr, offline_ok=True)
    assert got == audit.Outcome(
        "pip-audit: FAILED: exit 1, no report; last error: requests.exceptions.ConnectionError: "
        "api.osv.dev unreachable; nothing was audited",
        3,
    )


@pytest.mark.parametrize(
    ("returncode", "stdout"),
    [(1, CLEAN), (2, CLEAN), (-9, RECORDED_OFFLINE)],
    ids=["exit-1-without-findings", "exit-2", "killed"],
)
def test_an_exit_code_the_report_does_not_explain_is_a_failure(returncode: int, stdout: str) -> None:
    got = judge(stdout, returncode=returncode, offline_ok=True)
    assert got.code == 3 and got.line.startswith(f"pip-audit: FAILED: exit {returncode} with a report")


@pytest.mark.parametrize(
    "stdout",
    [
        "No known vulnerabilities found",
        "[]",
        '{"fixes": []}',
        '{"dependencies": {}}',
        '{"dependencies": ["idna"]}',
        '{"dependencies": [{"name": 1, "version": "1", "vulns": []}]}',
        '{"dependencies": [{"name": "a"}]}',
        '{"dependencies": [{"name": "a", "version": "1", "vulns": [], "skip_reason": "x"}]}',
        '{"dependencies": [{"name": "a", "version": "1", "vulns": {}}]}',
        '{"dependencies": [{"name": "a", "version": "1", "vulns": ["GHSA-1"]}]}',
        '{"dependencies": [{"name": "a", "version": "1", "vulns": [{"id": null}]}]}',
        '{"dependencies": [{"name": "a", "vulns": []}]}',
        '{"dependencies": [{"name": "a", "version": "1", "vulns": []}, {"name": "a", "skip_reason": "x"}]}',
    ],
)
def test_a_report_of_the_wrong_shape_is_exit_3(stdout: str) -> None:
    got = judge(stdout, offline_ok=True)
    assert got.code == 3
    assert got.line.startswith("pip-audit: FAILED: exit 0, unreadable report (")


def test_report_text_reaches_the_terminal_printable_and_short() -> None:
    doc = {"dependencies": [{"name": "evil\x1b[2J\nname", "version": "1" * 500, "vulns": [{"id": "X"}]}]}
    got = judge(json.dumps(doc), returncode=1)
    assert got.code == 1
    assert "\x1b" not in got.line and "\n" not in got.line
    assert "evil?[2J?name " + "1" * 60 + " (X)" in got.line


def test_arguments_that_skip_the_audit_are_refused() -> None:
    assert audit.main(["-r", "requirements.lock", "--dry-run"]) == 2
    assert audit.main(["--fix"]) == 2


class _OsvStub(BaseHTTPRequestHandler):
    """OSV's query API on loopback: idna has one advisory, anything else none."""

    broken = False

    def do_POST(self) -> None:
        query = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body: dict[str, Any] = {}
        if query["package"]["name"] == "idna":
            affected = {
                "package": {"name": "idna", "ecosystem": "PyPI"},
                "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "3.7"}]}],
            }
            body = {"vulns": [{"id": "OSV-TEST-1", "summary": "test", "affected": [affected]}]}
        data = json.dumps(body).encode()
        self.send_response(500 if self.broken else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def osv(request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("Handler", (_OsvStub,), {"broken": getattr(request, "param", False)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1/query"
    server.shutdown()
    server.server_close()
    thread.join(5)


def run_script(tmp_path: Path, osv_url: str, *pins: str) -> subprocess.CompletedProcess[str]:
    req = tmp_path / "requirements.txt"
    req.write_text("".join(f"{p}\n" for p in pins))
    env = {k: v for k, v in os.environ.items() if k != "SKYQA_AUDIT_OFFLINE_OK"}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "-r", str(req), "--no-deps", "--disable-pip", "-s", "osv",
         "--osv-url", osv_url, "--timeout", "5", "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("pins", "code", "line"),
    [
        (
            ("idna==3.10", "six==1.16.0"),
            1,
            "pip-audit: 2 of 2 dependencies audited, 0 skipped; 1 known vulnerability in 1 dependency: "
            "idna 3.10 (OSV-TEST-1)",
        ),
        (("six==1.16.0",), 0, "pip-audit: 1 of 1 dependencies audited, 0 skipped; no known vulnerabilities"),
    ],
    ids=["vulnerable", "clean"],
)
def test_the_real_script_prints_one_plain_line(
    tmp_path: Path, osv: str, pins: tuple[str, ...], code: int, line: str
) -> None:
    # the real pip-audit, pointed at a loopback OSV so the answer is the same on every machine
    done = run_script(tmp_path, osv, *pins)
    assert (done.returncode, done.stdout) == (code, f"{line}\n"), done.stderr[-2000:]


@pytest.mark.parametrize("osv", [True], indirect=True, ids=["osv-answers-500"])
def test_the_real_script_reports_a_failing_database_as_exit_3(tmp_path: Path, osv: str) -> None:
    done = run_script(tmp_path, osv, "idna==3.10")
    assert done.returncode == 3, done.stdout + done.stderr[-2000:]
    assert done.stdout.startswith("pip-audit: FAILED: exit 1, no report; last error: ")
    assert done.stdout.endswith("; nothing was audited\n") and done.stdout.count("\n") == 1
