"""Render an action program: move the capsule body through the scene, render every frame, encode
the MP4 at a constant quality, keep the frames the relations name losslessly, and record what
the body did (``execution.json``).

The scene is the simulator's own geometry, so this is where a move that the planner's map
thought clear can still be blocked. A program whose MP4 and execution record exist is complete
and is not rendered again.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError
from skyqa import keys, media
from skyqa.actions import ActionSpace, Capsule, Clearance, Kinematics, Root, camera_pose, execute
from skyqa.actions.space import ACTIONS
from skyqa.blob import BlobStore
from skyqa.contracts.base import dump_json, first_error
from skyqa.contracts.rsv import Execution
from skyqa.errors import InvalidInput
from skyqa.sim import CameraSpec, Pose, Simulator
from skyqa.v1 import render_pb2
from skyqa.video import Mp4Writer

from services.renderer.video import MAX_FRAMES, FrameSink, done_event, encoded, reuse, validate_video_job

MAX_ACTIONS = 400
MAX_KEPT = 64


def program_parts(job: render_pb2.VideoJob) -> tuple[Kinematics, Root, list[str]]:
    """The job's kinematics, root and actions, or :class:`InvalidInput` saying what is wrong."""
    p = job.program
    actions = list(p.actions)
    if not 4 <= len(actions) <= MAX_ACTIONS:
        raise InvalidInput(f"an action program needs 4..{MAX_ACTIONS} actions, got {len(actions)}")
    r = p.root
    if (
        not all(math.isfinite(v) for v in (r.x, r.y, r.z, r.yaw_deg, r.pitch_deg))
        or max(abs(r.x), abs(r.y), abs(r.z)) > 1e6
    ):
        raise InvalidInput("an action program's root must be finite and within 1000 km")
    unknown = sorted(set(actions) - set(ACTIONS))
    if unknown:
        raise InvalidInput(f"unknown actions {unknown}; known: {', '.join(ACTIONS)}")
    if job.poses:
        raise InvalidInput("a video job with an action program takes no poses")
    try:
        space = ActionSpace(
            translation_m=p.translation_m,
            yaw_deg=p.yaw_deg,
            pitch_deg=p.pitch_deg,
            max_pitch_deg=p.max_pitch_deg,
            frames_per_action=p.frames_per_action,
            actions=len(actions),
        )
        capsule = Capsule(
            radius_m=p.capsule_radius_m,
            half_height_m=p.capsule_half_height_m,
            camera_offset_m=p.camera_offset_m,
        )
        kin = Kinematics(space, capsule)
        root = Root(r.x, r.y, r.z, r.yaw_deg, r.pitch_deg)
        kin.root_steps(root)
        if abs(r.pitch_deg) > space.max_pitch_deg:
            raise ValueError(f"root pitch {r.pitch_deg} is beyond the pitch limit {space.max_pitch_deg}")
    except ValidationError as exc:
        where, msg = first_error(exc)
        raise InvalidInput(f"invalid action program: {where + ': ' if where else ''}{msg}") from None
    except ValueError as exc:
        raise InvalidInput(f"invalid action program: {exc}") from None
    if space.frames > MAX_FRAMES:
        raise InvalidInput(f"an action program renders at most {MAX_FRAMES} frames, got {space.frames}")
    if len(p.keep_frames) > MAX_KEPT or any(f >= space.frames for f in p.keep_frames):
        raise InvalidInput(f"an action program keeps at most {MAX_KEPT} of its {space.frames} frames")
    if not 0 <= p.crf <= 51:
        raise InvalidInput(f"crf must be 0..51, got {p.crf}")
    return kin, root, actions


def render_trajectory(
    job: render_pb2.VideoJob, sim: Simulator, store: BlobStore, on_frame: Callable[[], None] | None = None
) -> render_pb2.VideoDone:
    validate_video_job(job)
    kin, root, actions = program_parts(job)
    if not isinstance(sim, Clearance):
        raise InvalidInput(f"the {sim.backend} simulator cannot move a capsule body; use the builtin one")
    video_key = f"{job.output_prefix}/{keys.VIDEO}"
    exec_key = f"{job.output_prefix}/{keys.EXECUTION}"
    done = done_event(job, kin.space.frames)
    if reuse(done, store, video_key, "execution", exec_key):
        return done
    ran = execute(kin, actions, root, sim)
    camera = CameraSpec(job.width, job.height, job.fov_deg)
    keep = set(job.program.keep_frames)
    kept: dict[int, str] = {}
    with Mp4Writer(job.width, job.height, job.fps, 0, crf=job.program.crf) as writer, FrameSink() as sink:

        def emit(i: int, rgb: NDArray[np.uint8]) -> bytes:
            writer.write(rgb)
            if i in keep:
                store.put(f"{job.output_prefix}/{keys.key_frame(i)}", media.encode_png(rgb), "image/png")
                kept[i] = keys.key_frame(i)
            if on_frame is not None:
                on_frame()
            return b""

        for i, body in enumerate(ran.frames):
            sink.submit(emit, i, sim.render(Pose(*camera_pose(body, kin.capsule)), camera).rgb)
    done.video.CopyFrom(store.put(video_key, encoded(writer), "video/mp4").to_ref())
    record = Execution(
        traj_id=job.job_id,
        steps=ran.steps,
        frame_count=len(ran.frames),
        kept_frames=dict(sorted(kept.items())),
        root_clear=ran.root_clear,
    )
    # written last: its presence (with the MP4) marks the program rendered
    done.execution.CopyFrom(store.put(exec_key, dump_json(record), "application/json").to_ref())
    return done
