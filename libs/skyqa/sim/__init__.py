"""Simulators: the built-in ray-cast city and the AirSim bridge, behind one protocol."""

from skyqa.sim.builtin import BuiltinSimulator
from skyqa.sim.camera import Intrinsics, Pose, look_at, project, project_box, rotation_matrix, unproject
from skyqa.sim.classes import BY_ID, BY_NAME, CATEGORIES, CLASSES, SemanticClass
from skyqa.sim.protocol import CameraSpec, Frame, LidarScan, LidarSpec, Simulator
from skyqa.sim.registry import SimulatorCache, known_scenes, load_scene, open_simulator
from skyqa.sim.scene import Scene, SceneObject, load_mesh_scene

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
