#!/usr/bin/env python3
"""Run pip-audit and say plainly what it checked.

pip-audit prints "No known vulnerabilities found" and exits 0 even when it could check nothing
(every dependency skipped because no vulnerability database answered). This reads its JSON
report instead and prints one line: how many dependencies were audited, how many skipped and
why, and what was found.

    python scripts/audit.py [pip-audit arguments]    (default: -r requirements.lock)

Exit codes:
  0  dependencies were audited and none has a known vulnerability; or nothing could be audited
     and SKYQA_AUDIT_OFFLINE_OK=1 says this machine reaches no advisory source
  1  known vulnerabilities found
  2  arguments this script cannot vouch for (--dry-run, --fix)
  3  nothing could be audited (without the opt-in), pip-audit failed, or its report is unreadable
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OFFLINE_OK = "SKYQA_AUDIT_OFFLINE_OK"
TIMEOUT_S = 1200.0  # resolving the full lock file through pip takes ~90 s here
# --dry-run reports every dependency as audited with no vulnerabilities without asking anyone
REFUSED = {"-d", "--dry-run", "--fix"}
_REASON_SUFFIX = re.compile(r": \S+ \([^()]*\)$")  # pip-audit appends ": <name> (<version>)"
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


class Malformed(ValueError):
    """The report does not have the shape pip-audit's JSON format gives it."""


@dataclass
class Report:
    audited: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # name: (version, ids)
    skipped: dict[str, str] = field(default_factory=dict)  # name: reason


@dataclass(frozen=True)
class Outcome:
    line: str
    code: int


def _text(value: object, what: str, limit: int = 200) -> str:
    # the report is untrusted: only short, printable text reaches the terminal
    if not isinstance(value, str):
        raise Malformed(f"{what} is not a string")
    return _UNPRINTABLE.sub("?", value)[:limit]


def parse(stdout: str) -> Report:
    """pip-audit's ``-f json`` document: ``{"dependencies": [{name, version, vulns: [{id, ...}]}
    or {name, skip_reason}], "fixes": [...]}``."""
    try:
        doc = json.loads(stdout)
    except ValueError as exc:
        raise Malformed(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("dependencies"), list):
        raise Malformed("no dependencies list")
    report = Report()
    for i, dep in enumerate(doc["dependencies"]):
        if not isinstance(dep, dict):
            raise Malformed(f"dependency {i} is not an object")
        name = _text(dep.get("name"), f"dependency {i} name")
        if name in report.audited or name in report.skipped:
            raise Malformed(f"dependency {name} listed twice")
        if "skip_reason" in dep and "vulns" not in dep:
            report.skipped[name] = _text(dep["skip_reason"], f"{name} skip_reason")
        elif "vulns" in dep and "skip_reason" not in dep:
            vulns = dep["vulns"]
            if not isinstance(vulns, list) or not all(isinstance(v, dict) for v in vulns):
                raise Malformed(f"{name} vulns is not a list of objects")
            ids = [_text(v.get("id"), f"{name} vulnerability id", 60) for v in vulns]
            report.audited[name] = (_text(dep.get("version"), f"{name} version", 60), ids)
        else:
            raise Malformed(f"{name} has neither vulns nor a skip_reason")
    return report


def _reasons(skipped: dict[str, str]) -> str:
    counts = Counter(_REASON_SUFFIX.sub("", reason) for reason in skipped.values())
    return ", ".join(f'{n}x "{reason}"' for reason, n in counts.most_common())


def summarize(report: Report, offline_ok: bool) -> Outcome:
    total = len(report.audited) + len(report.skipped)
    skipped = f"{len(report.skipped)} skipped" + (f": {_reasons(report.skipped)}" if report.skipped else "")
    if not report.audited:
        unreachable = report.skipped and all(
            r.startswith("Dependency not found on") for r in report.skipped.values()
        )
        why = "; no vulnerability database answered" if unreachable else ""
        line = (
            f"pip-audit: AUDITED NOTHING: 0 of {total} dependencies could be checked ({skipped}{why}); "
            "this is not a clean result"
        )
        if offline_ok:
            return Outcome(f"{line}; accepted: {OFFLINE_OK}=1 (this machine reaches no advisory source)", 0)
        return Outcome(f"{line}; set {OFFLINE_OK}=1 only where no advisory source is reachable", 3)
    head = f"pip-audit: {len(report.audited)} of {total} dependencies audited, {skipped}"
    vulnerable = {name: entry for name, entry in report.audited.items() if entry[1]}
    if not vulnerable:
        return Outcome(f"{head}; no known vulnerabilities", 0)
    count = sum(len(ids) for _, ids in vulnerable.values())
    found = ", ".join(f"{name} {version} ({', '.join(ids)})" for name, (version, ids) in vulnerable.items())
    noun = "vulnerability" if count == 1 else "vulnerabilities"
    deps = "dependency" if len(vulnerable) == 1 else "dependencies"
    return Outcome(f"{head}; {count} known {noun} in {len(vulnerable)} {deps}: {found}", 1)


def judge(returncode: int, stdout: str, stderr: str, offline_ok: bool) -> Outcome:
    """The verdict on one pip-audit run (``-f json`` on stdout)."""
    try:
        report = parse(stdout)
    except Malformed as exc:
        last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "no output")
        why = "no report" if not stdout.strip() else f"unreadable report ({exc})"
        return Outcome(
            f"pip-audit: FAILED: exit {returncode}, {why}; last error: {_text(last, 'stderr')}; "
            "nothing was audited",
            3,
        )
    outcome = summarize(report, offline_ok)
    # pip-audit exits 1 for findings and for fatal errors; 1 without findings, or any other
    # code, means the report cannot be taken at its word
    if returncode not in (0, 1) or (returncode == 1 and outcome.code != 1):
        return Outcome(f"pip-audit: FAILED: exit {returncode} with a report saying: {outcome.line}", 3)
    return outcome


def main(argv: list[str]) -> int:
    args = argv or ["-r", str(ROOT / "requirements.lock")]
    refused = sorted(REFUSED.intersection(args))
    if refused:
        print(f"pip-audit: refusing {' '.join(refused)}: the result would not be an audit", file=sys.stderr)
        return 2
    # the format flags last, so they win over anything in ``args``
    cmd = [sys.executable, "-m", "pip_audit", *args, "-f", "json", "--progress-spinner", "off"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        print(f"pip-audit: FAILED: no answer within {TIMEOUT_S:.0f} s; nothing was audited")
        return 3
    outcome = judge(done.returncode, done.stdout, done.stderr, os.environ.get(OFFLINE_OK) == "1")
    print(outcome.line)
    return outcome.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
