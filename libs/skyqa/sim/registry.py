"""Scene catalog: which scene ids exist and how to open a simulator on one."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from skyqa.errors import SimulatorUnavailable, UnknownScene
from skyqa.settings import AirSimSettings
from skyqa.sim.airsim import AirSimSimulator, LabelMap
from skyqa.sim.city import generate_city
from skyqa.sim.protocol import Simulator
from skyqa.sim.scene import Scene, load_mesh_scene

# id -> (seed, blocks)
BUILTIN_SCENES: dict[str, tuple[int, int]] = {
    "demo_city": (7, 5),
    "tiny_town": (3, 2),
}
_PROCEDURAL = re.compile(r"^procedural_(\d{1,9})_(\d{1,2})$")

_cache: dict[tuple[str, str], Scene] = {}
_lock = threading.Lock()


def known_scenes(scenes_dir: Path | None = None) -> list[str]:
    names = sorted(BUILTIN_SCENES)
    if scenes_dir is not None and scenes_dir.is_dir():
        names += sorted(p.parent.name for p in scenes_dir.glob("*/scene.yaml"))
    return names


def check_scene(scene_id: str, scenes_dir: Path | None = None) -> str:
    """Raise :class:`UnknownScene` unless ``scene_id`` names a scene, without building it.

    Returns the kind: ``builtin``, ``procedural`` or ``mesh``. The gateway and the CLI call it
    so an unknown scene is refused when it is submitted, not when capture starts.
    """
    if scene_id in BUILTIN_SCENES:
        return "builtin"
    if (m := _PROCEDURAL.match(scene_id)) and 1 <= int(m.group(2)) <= 12:
        return "procedural"
    if scenes_dir is not None and (scenes_dir / scene_id / "scene.yaml").is_file():
        return "mesh"
    raise UnknownScene(
        f"unknown scene {scene_id!r}; known: {', '.join(known_scenes(scenes_dir))}, "
        "or procedural_<seed>_<blocks 1-12>"
    )


def load_scene(scene_id: str, scenes_dir: Path | None = None) -> Scene:
    """Resolve a scene id: built-in, ``procedural_<seed>_<blocks>``, or ``<scenes_dir>/<id>/scene.yaml``."""
    key = (scene_id, str(scenes_dir))
    with _lock:
        if key in _cache:
            return _cache[key]
        kind = check_scene(scene_id, scenes_dir)
        if kind == "builtin":
            seed, blocks = BUILTIN_SCENES[scene_id]
            scene = generate_city(scene_id, seed, blocks)
        elif kind == "procedural":
            _, seed_text, blocks_text = scene_id.split("_")
            scene = generate_city(scene_id, int(seed_text), int(blocks_text))
        else:
            assert scenes_dir is not None  # check_scene found the file
            scene = load_mesh_scene(scenes_dir / scene_id / "scene.yaml", scene_id)
        _cache[key] = scene
        return scene


class SimulatorCache:
    """One simulator per (backend, scene) per process, shared by a service's worker threads.

    Building the ray-casting scene is the expensive part; the simulators lock their own casts.
    """

    def __init__(
        self, scenes_dir: Path | None = None, airsim: AirSimSettings | None = None, threads: int = 0
    ) -> None:
        self.scenes_dir = scenes_dir
        self.airsim = airsim
        self.threads = threads
        self._sims: dict[tuple[str, str], Simulator] = {}
        self._lock = threading.Lock()

    def get(self, backend: str, scene_id: str) -> Simulator:
        with self._lock:
            key = (backend, scene_id)
            if key not in self._sims:
                self._sims[key] = open_simulator(
                    backend, scene_id, self.scenes_dir, self.airsim, self.threads
                )
            return self._sims[key]


def open_simulator(
    backend: str,
    scene_id: str,
    scenes_dir: Path | None = None,
    airsim: AirSimSettings | None = None,
    threads: int = 0,
) -> Simulator:
    """Open ``scene_id`` on a backend. For ``airsim`` the scene is whatever the configured
    simulator has loaded; ``scene_id`` only names it. ``threads`` bounds the built-in one."""
    if backend == "builtin":
        # Open3D and the numba kernels load with the first simulator, as the AirSim client does:
        # the gateway validates scene ids through this module and never renders
        from skyqa.sim.builtin import BuiltinSimulator

        return BuiltinSimulator(load_scene(scene_id, scenes_dir), threads=threads)
    if backend == "airsim":
        cfg = airsim or AirSimSettings()
        try:
            return AirSimSimulator(
                scene_id,
                LabelMap([(p, c) for p, c in cfg.labels]),
                host=cfg.host,
                port=cfg.port,
                vehicle=cfg.vehicle,
                camera=cfg.camera,
                lidar_names=tuple(cfg.lidar_names),
                bgr=cfg.bgr,
                extent=cfg.extent,
                segmentation=cfg.segmentation,
                lidar_frame=cfg.lidar_frame,
            )
        except RuntimeError as exc:  # client library missing
            raise SimulatorUnavailable(str(exc)) from None
    raise UnknownScene(f"unknown simulator backend {backend!r}; use 'builtin' or 'airsim'")
