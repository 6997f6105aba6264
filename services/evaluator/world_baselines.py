"""Honest world-model baselines, each a :class:`~skyqa.models.world.WorldModel`:

- ``oracle``: skyqa's renderer itself, moving the body through the scene from the privileged
  root state exactly as the release was made. The GT-anchored tier must find it exact.
- ``copy_last``: every frame is the last context frame. It satisfies every self-consistency
  pair and every anchor that shows the start state, and nothing else.
- ``symmetric_shortcut`` (MIND-style): a perfect renderer whose dynamics commute: every move
  goes along the root's heading whatever the turns before it, so a round trip returns by
  cancelling counts. Right wherever the actions commute (the easy inverse tier), wrong where the
  hard tiers put their non-abelian witnesses and polygon loops.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from skyqa.actions import ActionSpace, Capsule, Clearance, Kinematics, Root, camera_pose, execute
from skyqa.models.world import Frames, RolloutFailed, decode_png, validate_request, wanted
from skyqa.sim import CameraSpec, Pose, Simulator, SimulatorCache
from skyqa.v1 import world_model_pb2


class CopyLast:
    name = "copy_last"
    privileged = False

    async def rollout(self, request: world_model_pb2.RolloutRequest) -> Frames:
        last = decode_png(request.context_frames[-1], request.width, request.height, "the last context frame")
        return {i: last for i in wanted(request)}


class Rendered:
    """A renderer-backed model: ``commuting`` False is the oracle, True the symmetric shortcut."""

    privileged = True

    def __init__(
        self, name: str, commuting: bool, scenes_dir: Path | None = None, simulator: Simulator | None = None
    ) -> None:
        """``simulator``: the one scene to render, whatever the request names (a hand-built
        scene); else the built-in or ``scenes_dir`` scene the request names."""
        self.name = name
        self.commuting = commuting
        self._sims = SimulatorCache(scenes_dir, None, 0)
        self._fixed = simulator

    async def rollout(self, request: world_model_pb2.RolloutRequest) -> Frames:
        return await asyncio.to_thread(self._rollout, request)

    def _rollout(self, request: world_model_pb2.RolloutRequest) -> Frames:
        validate_request(request)  # in process too: the scene id names files
        p = request.privileged
        if not p.scene_id:
            raise RolloutFailed(f"{self.name} needs the privileged root state and scene")
        sim = self._fixed or self._sims.get("builtin", p.scene_id)
        if not isinstance(sim, Clearance):
            raise RolloutFailed(f"the {sim.backend} simulator cannot move a capsule body")
        g = request.grid
        space = ActionSpace(
            translation_m=g.translation_m,
            yaw_deg=g.yaw_deg,
            pitch_deg=g.pitch_deg,
            max_pitch_deg=p.max_pitch_deg,
            frames_per_action=request.frames_per_action,
            actions=len(request.actions),
        )
        capsule = Capsule(
            radius_m=p.capsule_radius_m,
            half_height_m=p.capsule_half_height_m,
            camera_offset_m=p.camera_offset_m,
        )
        kin = Kinematics(space, capsule)
        r = p.root
        root = Root(r.x, r.y, r.z, r.yaw_deg, r.pitch_deg)
        # the oracle meets the scene as the renderer did; the shortcut believes in no obstacles
        ran = execute(kin, list(request.actions), root, None if self.commuting else sim, self.commuting)
        camera = CameraSpec(request.width, request.height, p.fov_deg)
        return {
            i: sim.render(Pose(*camera_pose(ran.frames[i], capsule)), camera).rgb for i in wanted(request)
        }


def builtin_world_models(scenes_dir: Path | None = None) -> list[Rendered | CopyLast]:
    return [
        Rendered("oracle", False, scenes_dir),
        Rendered("symmetric_shortcut", True, scenes_dir),
        CopyLast(),
    ]
