"""Simulators: the built-in ray-cast city and the AirSim bridge, behind one protocol.

The names below are imported on first use: camera maths and the class table are needed by
services that never render (gateway, qa-generator, evaluator), and must not bring Open3D and
the numba kernels of :mod:`skyqa.sim.builtin` with them.
"""

from typing import TYPE_CHECKING

from skyqa._lazy import lazy_exports

if TYPE_CHECKING:
    from skyqa.sim.builtin import BuiltinSimulator
    from skyqa.sim.camera import Intrinsics, Pose, look_at, project, project_box, rotation_matrix, unproject
    from skyqa.sim.classes import BY_ID, BY_NAME, CATEGORIES, CLASSES, SemanticClass
    from skyqa.sim.protocol import CameraSpec, Frame, LidarScan, LidarSpec, RowRenderer, Simulator
    from skyqa.sim.registry import SimulatorCache, known_scenes, load_scene, open_simulator
    from skyqa.sim.scene import Scene, SceneObject, load_mesh_scene
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "skyqa.sim.builtin": ("BuiltinSimulator",),
            "skyqa.sim.camera": (
                "Intrinsics",
                "Pose",
                "look_at",
                "project",
                "project_box",
                "rotation_matrix",
                "unproject",
            ),
            "skyqa.sim.classes": ("BY_ID", "BY_NAME", "CATEGORIES", "CLASSES", "SemanticClass"),
            "skyqa.sim.protocol": (
                "CameraSpec",
                "Frame",
                "LidarScan",
                "LidarSpec",
                "RowRenderer",
                "Simulator",
            ),
            "skyqa.sim.registry": ("SimulatorCache", "known_scenes", "load_scene", "open_simulator"),
            "skyqa.sim.scene": ("Scene", "SceneObject", "load_mesh_scene"),
        },
    )

__all__ = [
    "BY_ID",
    "BY_NAME",
    "CATEGORIES",
    "CLASSES",
    "BuiltinSimulator",
    "CameraSpec",
    "Frame",
    "Intrinsics",
    "LidarScan",
    "LidarSpec",
    "Pose",
    "RowRenderer",
    "Scene",
    "SceneObject",
    "SemanticClass",
    "Simulator",
    "SimulatorCache",
    "known_scenes",
    "load_mesh_scene",
    "load_scene",
    "look_at",
    "open_simulator",
    "project",
    "project_box",
    "rotation_matrix",
    "unproject",
]
