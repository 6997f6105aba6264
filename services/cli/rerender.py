"""What ``skyqa refresh`` does: re-render a run's assets from their recorded camera poses.

Image assets come from the stored plan's render requests: environment observations (their first
looks at a working size too) are rendered again by the simulator at the size each was,
reference overlays redrawn, video clips cut again; with ``videos`` every mission video (action
trajectory, survey) is rendered again from its recorded ``render_request.json``. Manifests are
then rebuilt from the stored plan, so no id, option or answer changes: a deterministic simulator
gives byte-identical manifests and pixel-identical images.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from google.protobuf import json_format
from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts import load_json
from skyqa.settings import AirSimSettings, QASettings
from skyqa.sim import SimulatorCache
from skyqa.v1 import render_pb2

from services.mission_planner.missions import bundle_mission
from services.qa_generator.assets import cut_clips, degrade_view, draw_overlay, render_env, render_view
from services.qa_generator.observations import at_shipped_size, first_round, shipping
from services.qa_generator.pipeline import QAPlan, scan_of
from services.qa_generator.release import finish
from services.renderer.jobs import completion_marker, renderer_for


@dataclass
class Refreshed:
    env_observations: int
    overlays: int
    clips: int
    videos: int
    manifests: dict[str, str]


def rerender(
    store: BlobStore,
    run_id: str,
    videos: bool = False,
    scenes_dir: Path | None = None,
    airsim: AirSimSettings | None = None,
    gate_mode: Literal["enforce", "report"] | None = None,
) -> Refreshed:
    """Re-render every asset of the run's plan and rebuild its manifests; ``gate_mode`` defaults
    to the operator setting's default, as the service that built the release used."""
    p = load_json(QAPlan, store.get(keys.qa_plan(run_id)), "qa plan")
    root = keys.run_prefix(run_id)
    sim = SimulatorCache(scenes_dir, airsim or AirSimSettings()).get(p.engine, p.scene_id)
    for view in p.requests.views:  # before the overlays drawn on them
        render_view(store, root, view, sim)
    # the first round, then (where there were first looks) what the stage rendered where it
    # ships: its stored choice, or the choice it would make, made now
    observations = first_round(p)
    for req in observations:
        render_env(store, root, req, sim)
    if p.requests.first_looks:
        again = at_shipped_size(p, shipping(p, store))
        for req in again:
            render_env(store, root, req, sim)
        observations = [*observations, *again]
    for o in p.requests.overlays:
        draw_overlay(store, root, o)
    done_videos = 0
    if videos:
        scan = scan_of(p)
        for traj_id in sorted(p.missions):
            key = keys.mission_file(run_id, traj_id, keys.RENDER_REQUEST)
            job = json_format.Parse(store.get(key), render_pb2.VideoJob())
            store.delete(completion_marker(job))  # so the renderer does not reuse it
            done = renderer_for(job)(job, sim, store, None)
            bundle_mission(done, store, scan)
            done_videos += 1
    cut_clips(store, root, p.requests.clips)  # after the videos: clips are cut from their frames
    for g in p.requests.degraded:  # after the videos too: degraded from their frames
        degrade_view(store, root, g)
    _, out = finish(p, store, gate_mode or QASettings().blind_gate)
    return Refreshed(len(observations), len(p.requests.overlays), len(p.requests.clips), done_videos, out)
