"""A labelled scene: objects with ground-truth class, instance id and attributes.

Scenes come from the procedural city generator or from mesh files (OBJ/PLY/GLB) plus a label
map, see :func:`load_mesh_scene`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from skyqa.errors import InvalidInput
from skyqa.sim.classes import BY_ID, BY_NAME, COLOURS, SemanticClass
from skyqa.sim.mesh import PLAIN, Part, merge


@dataclass
class SceneObject:
    instance_id: int  # 0 for stuff classes
    semantic: SemanticClass
    colour_name: str
    yaw_deg: float
    vertices: NDArray[np.float64]
    triangles: NDArray[np.int32]
    tri_colors: NDArray[np.float32]
    tri_materials: NDArray[np.uint8]
    attributes: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_parts(
        cls,
        instance_id: int,
        semantic: SemanticClass,
        colour_name: str,
        yaw_deg: float,
        parts: list[Part],
        **attributes: Any,
    ) -> SceneObject:
        v, t, c, m = merge(parts)
        return cls(instance_id, semantic, colour_name, yaw_deg, v, t, c, m, dict(attributes))

    @property
    def aabb_min(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.vertices.min(axis=0)
        return out

    @property
    def aabb_max(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self.vertices.max(axis=0)
        return out

    @property
    def center(self) -> NDArray[np.float64]:
        return (self.aabb_min + self.aabb_max) / 2.0

    @property
    def size(self) -> NDArray[np.float64]:
        return self.aabb_max - self.aabb_min

    def ground_truth(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "class_id": self.semantic.id,
            "class_name": self.semantic.name,
            "category": self.semantic.category,
            "colour": self.colour_name,
            "center": [round(float(v), 4) for v in self.center],
            "aabb_min": [round(float(v), 4) for v in self.aabb_min],
            "aabb_max": [round(float(v), 4) for v in self.aabb_max],
            "yaw_deg": round(self.yaw_deg, 3),
            "attributes": self.attributes,
        }


@dataclass
class Scene:
    scene_id: str
    objects: list[SceneObject]
    classes: dict[int, SemanticClass]
    extent: tuple[float, float, float, float]  # xmin, xmax, ymin, ymax
    seed: int = 0

    def things(self) -> list[SceneObject]:
        return [o for o in self.objects if o.instance_id > 0]


def load_mesh_scene(path: str | Path, scene_id: str | None = None) -> Scene:
    """Load a scene from a YAML label map that lists mesh files.

    The label map looks like::

        scene_id: my_block
        objects:
          - mesh: tower.glb        # OBJ, PLY, GLB/GLTF; relative to the YAML file
            class: office_tower    # a built-in class name, or give class_id + category
            colour: gray
            instance_id: 7         # optional; numbered in order otherwise
            yaw_deg: 0
            attributes: {floors: 12}
          - mesh: ground.ply
            class: ground          # stuff classes get instance id 0

    Each mesh file is one object. Vertex colours are used when the file has them.
    """
    import open3d as o3d

    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"scene label map {path} does not exist")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InvalidInput(f"scene label map {path} is not valid YAML: {exc}") from None
    entries = spec.get("objects")
    if not isinstance(entries, list) or not entries:
        raise InvalidInput(f"scene label map {path} needs a non-empty 'objects' list")
    classes = dict(BY_ID)
    objects: list[SceneObject] = []
    next_id = 1
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "mesh" not in entry or "class" not in entry:
            raise InvalidInput(f"{path}: objects[{i}] needs 'mesh' and 'class'")
        name = str(entry["class"])
        semantic = BY_NAME.get(name)
        if semantic is None:
            if "class_id" not in entry or "category" not in entry:
                raise InvalidInput(
                    f"{path}: objects[{i}] class {name!r} is not built in; give class_id and category"
                )
            semantic = SemanticClass(int(entry["class_id"]), name, str(entry["category"]))
            classes[semantic.id] = semantic
        mesh_path = path.parent / str(entry["mesh"])
        mesh = o3d.io.read_triangle_mesh(str(mesh_path))
        if not mesh_path.is_file() or len(mesh.triangles) == 0:
            raise InvalidInput(f"{path}: objects[{i}] mesh {mesh_path} is missing or has no triangles")
        v = np.asarray(mesh.vertices, dtype=np.float64)
        t = np.asarray(mesh.triangles, dtype=np.int32)
        colour = str(entry.get("colour", "gray"))
        if mesh.has_vertex_colors():
            vc = np.asarray(mesh.vertex_colors, dtype=np.float32)
            tri_colors = vc[t].mean(axis=1)
        else:
            tri_colors = np.tile(np.asarray(COLOURS.get(colour, (0.6, 0.6, 0.6)), np.float32), (len(t), 1))
        instance_id = 0 if semantic.stuff else int(entry.get("instance_id", next_id))
        if not semantic.stuff:
            next_id = max(next_id, instance_id) + 1
        objects.append(
            SceneObject(
                instance_id,
                semantic,
                colour,
                float(entry.get("yaw_deg", 0.0)),
                v,
                t,
                tri_colors.astype(np.float32),
                np.full(len(t), PLAIN, dtype=np.uint8),
                dict(entry.get("attributes", {})),
            )
        )
    ids = [o.instance_id for o in objects if o.instance_id > 0]
    if len(ids) != len(set(ids)):
        raise InvalidInput(f"{path}: instance ids are not unique")
    allv = np.vstack([o.vertices for o in objects])
    extent = (
        float(allv[:, 0].min()),
        float(allv[:, 0].max()),
        float(allv[:, 1].min()),
        float(allv[:, 1].max()),
    )
    return Scene(scene_id or str(spec.get("scene_id", path.stem)), objects, classes, extent)
