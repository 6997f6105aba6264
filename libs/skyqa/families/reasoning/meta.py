"""The card's ``_meta.json`` of one trajectory.

Poses follow the card's Unreal convention: centimetres, x east, y south (a left-handed frame),
z up; rotations ``[pitch, yaw, roll]`` in degrees with yaw clockwise seen from above, so
``move_right`` at yaw -120 moves by (86.6, -50) cm as in the card's example. skyqa's own
records are ENU metres with yaw counter-clockwise; the conversion is here and only here.
Fields the card does not name sit under ``skyqa``.
"""

from __future__ import annotations

import json
from typing import Any

from skyqa.actions.space import ACTION_IDS
from skyqa.contracts.rsv import Execution, TrajectoryPlan, TrajectoryRow, Vec5
from skyqa.families.reasoning.layout import FOLDER, keyframe_path

PROPERTY = {
    "inverse": "inverse: A ∘ A⁻¹ = id (explore then reverse)",
    "loop": "loop: T_A(s₀) = s₀ (a closed action sequence returns to the start)",
    "equivalence": "equivalence: T_A(s₀) = T_B(s₀), A ≠ B (two sequences reach one state)",
    "random_walk": "none (uncontrolled walk, or a relation that failed validation)",
}
RELATION = {
    "commutative_shuffle": "path_A and path_B are commutative shuffles, should reach same final state",
    "l_shape_zigzag": "path_A (L-shape) and path_B (zig-zag) share only origin and terminus, "
    "should reach same final state",
    "turned_side_step": "one path side-steps where the other turns a quarter, moves forward and "
    "turns back (a non-abelian witness: a commuting model puts their ends apart), should reach "
    "same final state",
}
FRAME = (
    "Unreal convention: centimetres, x east, y south, z up (left-handed); rotation [pitch, yaw, roll] "
    "in degrees, yaw clockwise from +x seen from above; positions are the capsule centre"
)


def root_position(v: Vec5) -> list[float]:
    return [round(v[0] * 100.0, 4), round(-v[1] * 100.0, 4), round(v[2] * 100.0, 4)]


def root_rotation(v: Vec5) -> list[float]:
    yaw = round(-v[3], 6) + 0.0
    return [round(v[4], 6) + 0.0, 180.0 if yaw == -180.0 else yaw, 0.0]


def card_meta(row: TrajectoryRow, plan: TrajectoryPlan, record: Execution) -> bytes:
    # a half that failed is released alone, in random_walk/, and asserts no pairing
    paired: dict[str, Any] = {"is_paired": bool(row.role) and row.split != "random_walk"}
    if paired["is_paired"]:
        paired |= {
            "role": row.role,
            "primary_trajectory_id": row.number if row.role == "path_A" else row.partner_number,
            "partner_trajectory_id": row.partner_number,
            "relation": RELATION.get(row.construction, "should reach same final state"),
        }
    f = row.frames_per_action
    meta = {
        "trajectory_id": row.number,
        "data_type": "random_walk" if row.split == "random_walk" else "reasoning",
        "trajectory_type": row.trajectory_type,
        "algebraic_property": PROPERTY[row.trajectory_type],
        "paired_trajectory": paired,
        "has_collision": row.collisions > 0,
        "collision_count": row.collisions,
        "total_steps": len(row.actions),
        "frames_per_step": f,
        "total_frames": row.frames,
        "render_config": {
            "resolution": [row.width, row.height],
            "fov": plan.fov_deg,
            "image_format": "png",
            "modalities": ["rgb"],
        },
        "root_state": {"position": root_position(row.root), "rotation": root_rotation(row.root)},
        "action_sequence": row.actions,
        "collision_mask": record.collisions,
        "steps": [
            {
                "step": s.step,
                "action": s.action,
                "action_id": ACTION_IDS[s.action],
                "start_pos": root_position(s.start),
                "start_rot": root_rotation(s.start),
                "expected_end_pos": root_position(s.expected_end),
                "expected_end_rot": root_rotation(s.expected_end),
                "actual_end_pos": root_position(s.actual_end),
                "actual_end_rot": root_rotation(s.actual_end),
                "collision": s.collision,
                "collision_displacement": round(s.collision_displacement_m * 100.0, 4),
                "frames": [s.step * f, s.step * f + f - 1],
            }
            for s in record.steps
        ],
        "video_encoding": {
            "fps": row.fps,
            "crf": plan.crf,
            "resolution": f"{row.width}x{row.height}",
            "codec": "libx264",
        },
        "skyqa": {
            "split": row.split,
            "built_as": row.built_as,
            "construction": row.construction,
            "coordinate_frame": FRAME,
            "action_space": plan.space.model_dump(mode="json"),
            "capsule": plan.capsule.model_dump(mode="json"),
            "identities": [p.model_dump(mode="json") for p in row.identities],
            "anchor_frames": row.anchors,
            "keyframes": {
                str(f): keyframe_path(row.split, row.stem, f).removeprefix(f"{FOLDER}/{row.split}/")
                for f in row.keyframes
            },
            "shortcut_witness": row.witness,
            "closure_residual_cm": round(row.closure_residual_m * 100.0, 4),
            "validation": {
                "pose_error_max_cm": round(row.pose_error_max_m * 100.0, 4),
                "identity_error_max_cm": round(row.identity_error_max_m * 100.0, 4),
                "pixel_mse": row.pixel_mse,
                "passed": not row.failure and row.split != "random_walk",
                "failure": row.failure,
            },
        },
    }
    return (json.dumps(meta, indent=1, ensure_ascii=False) + "\n").encode()
