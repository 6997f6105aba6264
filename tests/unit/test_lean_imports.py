"""Services that neither render nor fuse start without the renderer's libraries (issue 17).

Each check runs in a fresh interpreter: this test process has long since imported Open3D
through other tests, so its own ``sys.modules`` proves nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Open3D, numba (and llvmlite under it) only render and fuse; scipy.stats and scikit-learn run
# once per release. Any of them at import put these services at 300-480 MB resident.
HEAVY = ("open3d", "numba", "llvmlite", "scipy.stats", "sklearn")
LEAN_APPS = (
    "services.gateway.app",
    "services.labeller.app",
    "services.qa_generator.app",
    "services.evaluator.app",
)


def loaded_after(code: str) -> list[str]:
    """Which of ``HEAVY`` a fresh interpreter holds after running ``code``."""
    probe = f"import json, sys\n{code}\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


@pytest.mark.parametrize("module", LEAN_APPS)
def test_service_app_imports_no_render_or_release_only_library(module: str) -> None:
    assert loaded_after(f"import {module}") == []


def test_the_container_command_loads_only_the_service_it_serves() -> None:
    # every container runs `skyqa serve <name>`: the CLI itself must be as lean as a service,
    # and the release tools (task families, exports) load only in their own commands
    assert loaded_after("import services.cli") == []
    tools = ("skyqa.families", "skyqa.exports", "skyqa.integrity")
    code = f"import services.cli\nassert not [m for m in {tools!r} if m in sys.modules]"
    assert loaded_after(code) == []


def test_service_registry_imports_no_service() -> None:
    # `skyqa serve gateway` goes through the registry; listing services must not load them all
    code = "import services.registry\nassert not [m for m in sys.modules if m.endswith('.app')], sys.modules"
    assert loaded_after(code) == []


@pytest.mark.parametrize("package", ["skyqa.sim", "skyqa.models", "skyqa.geometry"])
def test_lazy_package_exports_every_listed_name(package: str) -> None:
    # the names are resolved on first use, so a wrong origin would only surface at a caller
    code = (
        f"import importlib\np = importlib.import_module({package!r})\n"
        "missing = [n for n in p.__all__ if getattr(p, n, None) is None]\n"
        "assert not missing, missing\nassert set(p.__all__) <= set(dir(p))"
    )
    loaded_after(code)


def test_camera_maths_do_not_load_the_simulator_until_it_is_asked_for() -> None:
    assert loaded_after("from skyqa.sim import Pose, project_box, CLASSES") == []
    assert "open3d" in loaded_after("from skyqa.sim import BuiltinSimulator")


def test_the_mission_planner_loads_the_task_families_only_when_it_plans() -> None:
    # it asks them which landmarks are held on the first run it plans (missions.py), not at start
    code = "import services.mission_planner.app\nassert 'skyqa.families' not in sys.modules"
    assert loaded_after(code) == []
