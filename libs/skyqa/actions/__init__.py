"""Discrete action spaces, capsule bodies and action trajectories built as exact instances of
algebraic identities (Reasoning-Structured Videos).

Names resolve on first use: the scan rules need only the action space, not the constructions
or the collision sweep (and :mod:`skyqa.contracts.rsv`, which the sweep writes, imports the
space).
"""

from typing import TYPE_CHECKING

from skyqa._lazy import lazy_exports

if TYPE_CHECKING:
    from skyqa.actions.constructions import Built, NoConstruction, build, inverse_of
    from skyqa.actions.motion import Clearance, Executed, camera_pose, execute, overlaps
    from skyqa.actions.space import (
        ACTION_IDS,
        ACTIONS,
        INVERSE,
        ActionSpace,
        Capsule,
        Kinematics,
        Root,
        State,
    )
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "skyqa.actions.constructions": ("Built", "NoConstruction", "build", "inverse_of"),
            "skyqa.actions.motion": ("Clearance", "Executed", "camera_pose", "execute", "overlaps"),
            "skyqa.actions.space": (
                "ACTIONS",
                "ACTION_IDS",
                "INVERSE",
                "ActionSpace",
                "Capsule",
                "Kinematics",
                "Root",
                "State",
            ),
        },
    )

__all__ = [
    "ACTIONS",
    "ACTION_IDS",
    "INVERSE",
    "ActionSpace",
    "Built",
    "Capsule",
    "Clearance",
    "Executed",
    "Kinematics",
    "NoConstruction",
    "Root",
    "State",
    "build",
    "camera_pose",
    "execute",
    "inverse_of",
    "overlaps",
]
