"""The shipped size of the landmark views: when a scan checks candidates' views at a working size
(``stills.working_*``), the QA stage renders the reviewed landmarks' valid views again at the
size the release ships, from the camera poses the landmark stage recorded, into the same files,
and measures each view's box there. Only reviewed landmarks a release can include pay for
full-size views; the candidates the review left out and the landmarks no release can include
(:mod:`skyqa.families.held`) keep their working-size ones.

The re-render is a pure function of the recorded poses (``render_requests`` lists it, so
``skyqa refresh`` renders it again), and the measurements replace the working-size ones in
``instances.json`` and ``valid_instances.json``, so every file of the release describes the
images it ships.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import json_format
from skyqa import keys, scan
from skyqa.blob import BlobStore
from skyqa.contracts import Contract, InstancesFile, RgbView, ValidInstancesFile, load_json
from skyqa.contracts.base import dump_json
from skyqa.contracts.qa import ViewRequest
from skyqa.errors import InvalidInput
from skyqa.families import RELEASED, ReleaseFamily
from skyqa.families.held import held_landmarks
from skyqa.protojson import pose_message, to_dict
from skyqa.scan import Stills
from skyqa.v1 import mission_pb2, render_pb2

REQUESTER = "qa-views"
STAGE = "views"  # its own stage of the run, so what shipping the views costs shows


class Reshoot(Contract):
    """A run's views to render again at the shipped size, and the event the QA stage plans from
    once they are in (stored, so any replica can take any result)."""

    run_id: str
    scene_id: str
    backend: str
    valid_instances: str  # the key of the reviewed landmarks
    missions_completed: dict[str, Any]  # the event, as protobuf JSON
    requests: list[ViewRequest]

    @property
    def landmarks(self) -> list[str]:
        return sorted({r.landmark_id for r in self.requests})

    @property
    def event(self) -> mission_pb2.MissionsCompleted:
        return json_format.ParseDict(self.missions_completed, mission_pb2.MissionsCompleted())


def reshoot_key(run_id: str) -> str:
    return f"{keys.image_tasks(run_id)}/shipped_views.json"


def prepare(
    event: mission_pb2.MissionsCompleted,
    store: BlobStore,
    families: Sequence[ReleaseFamily[Any]] = RELEASED,
) -> Reshoot | None:
    """The views to render again, stored; None when the scan checked views where they ship."""
    request = scan.stored(store, event.run_id)
    size = scan.stills(request)
    if not size.reshot:
        return None
    valid = load_json(ValidInstancesFile, store.get(event.valid_instances.key), "valid instances")
    raw = load_json(
        InstancesFile, store.get(keys.stored(event.run_id, valid.source_instances_json)), "instances"
    )
    fov = raw.filters.get("camera_fov_deg")
    if not isinstance(fov, int | float):
        raise InvalidInput("instances.json's filters name no camera_fov_deg to render its views with")
    run = Reshoot(
        run_id=event.run_id,
        scene_id=event.scene_id,
        backend=request.backend or "builtin",
        valid_instances=event.valid_instances.key,
        missions_completed=to_dict(event),
        requests=view_requests(valid, size, float(fov), held_landmarks(valid.valid_instances, families)),
    )
    store.put(reshoot_key(event.run_id), dump_json(run), "application/json")
    return run


def load(store: BlobStore, run_id: str) -> Reshoot:
    return load_json(Reshoot, store.get(reshoot_key(run_id)), "shipped views")


def view_requests(
    valid: ValidInstancesFile, size: Stills, fov_deg: float, held: Mapping[str, str]
) -> list[ViewRequest]:
    """Every valid view of every reviewed landmark not ``held``, at the shipped size."""
    out = []
    for vi in sorted(valid.valid_instances, key=lambda v: v.instance_id):
        if vi.instance_id in held:
            continue
        for v in vi.rgb_views:
            if not v.is_valid:
                continue
            c = v.camera
            out.append(
                ViewRequest(
                    landmark_id=vi.instance_id,
                    view_id=v.view_id,
                    pose=[c.x, c.y, c.z, c.yaw_deg, c.pitch_deg, c.roll_deg],
                    width=size.width,
                    height=size.height,
                    fov_deg=fov_deg,
                    jpeg_quality=size.jpeg_quality,
                    output_image=v.path,
                    output_segmentation=v.segmentation_path,
                    output_depth=v.path.removesuffix(keys.STILL_FILES["rgb"]) + keys.STILL_FILES["depth"],
                    rendered_instance_id=v.rendered_instance_id,
                )
            )
    return out


def view_jobs(run: Reshoot) -> list[render_pb2.RenderJob]:
    """One job per landmark, writing where the landmark stage wrote its views."""
    jobs: dict[str, render_pb2.RenderJob] = {}
    for r in run.requests:
        job = jobs.get(r.landmark_id)
        if job is None:
            job = jobs[r.landmark_id] = render_pb2.RenderJob(
                run_id=run.run_id,
                job_id=f"views-{r.landmark_id}",
                scene_id=run.scene_id,
                backend=run.backend,
                width=r.width,
                height=r.height,
                fov_deg=r.fov_deg,
                jpeg_quality=r.jpeg_quality,
                modalities=["rgb", "segmentation", "depth"],
                output_prefix=keys.landmark_views(run.run_id, run.scene_id, r.landmark_id),
                requester=REQUESTER,
                correlation=r.landmark_id,
            )
        job.views.add(view_id=r.view_id, pose=pose_message(r.pose))
    return [jobs[k] for k in sorted(jobs)]


def measured(view: RgbView, result: render_pb2.ViewResult, width: int, height: int) -> RgbView:
    """The view with its box and pixels measured at the shipped size (its validity, decided by
    the landmark stage and the review, and its visible ratio, a share, stay)."""
    stat = next((s for s in result.instances if s.instance_id == view.rendered_instance_id), None)
    if stat is None:
        raise InvalidInput(
            f"view {view.view_id} rendered at {width}x{height} does not show instance "
            f"{view.rendered_instance_id}, which it showed at the working size"
        )
    box = [int(stat.x0), int(stat.y0), int(stat.x1), int(stat.y1)]
    return view.model_copy(
        update={
            "bbox_2d_xyxy": box,
            "bbox_2d_xywh": [box[0], box[1], box[2] - box[0], box[3] - box[1]],
            "bbox_2d_image_size": [width, height],
            "visible_pixels": int(stat.pixels),
        }
    )


def part_key(run_id: str, scene_id: str, landmark_id: str) -> str:
    return f"{keys.review_root(run_id, scene_id)}/shipped/{keys.validate_id(landmark_id, 'landmark id')}.json"


def record(store: BlobStore, run: Reshoot, done: render_pb2.RenderDone) -> None:
    """One landmark's views as measured at the shipped size, kept until all are in."""
    valid = load_json(ValidInstancesFile, store.get(run.valid_instances), "valid instances")
    vi = next((v for v in valid.valid_instances if v.instance_id == done.correlation), None)
    if vi is None:
        raise InvalidInput(f"shipped views of {done.correlation!r}, which the review did not keep")
    results = {r.view_id: r for r in done.views}
    views = [
        measured(v, results[v.view_id], done.width, done.height) if v.view_id in results else v
        for v in vi.rgb_views
    ]
    part = vi.model_copy(update={"rgb_views": views})
    store.put(part_key(done.run_id, done.scene_id, vi.instance_id), dump_json(part), "application/json")


def merge(store: BlobStore, run: Reshoot) -> None:
    """Write the shipped measurements into ``valid_instances.json`` and ``instances.json``."""
    run_id, scene_id, valid_key = run.run_id, run.scene_id, run.valid_instances
    valid = load_json(ValidInstancesFile, store.get(valid_key), "valid instances")
    shipped: Mapping[str, dict[str, RgbView]] = {
        vi.instance_id: {
            v.view_id: v
            for v in load_json(type(vi), store.get(part_key(run_id, scene_id, vi.instance_id))).rgb_views
        }
        for vi in valid.valid_instances
        if vi.instance_id in run.landmarks
    }
    for vi in valid.valid_instances:
        if vi.instance_id in shipped:
            vi.rgb_views = [shipped[vi.instance_id].get(v.view_id, v) for v in vi.rgb_views]
    store.put(valid_key, dump_json(valid), "application/json")
    raw_key = keys.stored(run_id, valid.source_instances_json)
    raw = load_json(InstancesFile, store.get(raw_key), "instances")
    for inst in raw.instances:
        if inst.instance_id in shipped:
            inst.rgb_views = [shipped[inst.instance_id].get(v.view_id, v) for v in inst.rgb_views]
    store.put(raw_key, dump_json(raw), "application/json")
