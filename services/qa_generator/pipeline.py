"""The qa-generator's plan: every family's rows decided up front (views, options, letters, env
cameras) and stored in ``image_tasks/qa_plan.json``, with the env observations they ask the
renderer for.

:mod:`services.qa_generator.release` then checks the rows against what was rendered and writes
the release.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from pydantic import Field, ValidationError, model_validator
from skyqa import keys, scan as scan_rules
from skyqa.blob import BlobStore
from skyqa.contracts import Contract, InstancesFile, ValidInstancesFile, load_json
from skyqa.contracts.base import first_error
from skyqa.contracts.missions import MissionIndex
from skyqa.contracts.qa import (
    ClipRequest,
    DegradeRequest,
    EnvRequest,
    OverlayRequest,
    RenderRequests,
    ViewRequest,
)
from skyqa.errors import InvalidInput
from skyqa.families import RELEASED, PlanInputs, ReleaseFamily
from skyqa.families.held import held_landmarks
from skyqa.protojson import pose_message, to_dict
from skyqa.v1 import mission_pb2, render_pb2, scan_pb2

from services.qa_generator.assets import JPEG_QUALITY

mimetypes.add_type("application/x-ndjson", ".jsonl")  # the release's JSON Lines files
REQUESTER = "qa"
SHIPPED_JOB = "shipped-"  # the prefix of a job rendering observations again at the shipped size


class QAPlan(Contract):
    run_id: str
    scene_id: str
    engine: str
    landmarks: list[str]  # reviewed landmarks, in order
    skipped: dict[str, str]  # release unit -> why no family releases it (held: see families.held)
    # family name -> release unit -> why that family does not release it (planned nothing for
    # it); a plan written before families skipped on their own has every skip in ``skipped``
    family_skipped: dict[str, dict[str, str]] = Field(default_factory=dict)
    rows: dict[str, list[dict[str, Any]]]  # family name -> its rows, as JSON
    requests: RenderRequests
    missions: dict[str, str]  # traj_id -> landmark, for the missions the rows use
    candidates: int
    collected: int
    valid_instances: str
    scan: dict[str, Any]  # the scan request, as protobuf JSON

    @model_validator(mode="before")
    @classmethod
    def _rows_by_family(cls, data: Any) -> Any:
        """Plans written before the task families kept image and video rows in two fields."""
        if isinstance(data, dict) and "image_rows" in data and "rows" not in data:
            data = dict(data)
            data["rows"] = {
                "dualcog_image": data.pop("image_rows"),
                "dualcog_video": data.pop("video_rows", []),
            }
            data.pop("mission_instance_ids", None)
        return data

    @model_validator(mode="after")
    def _first_looks_match(self) -> QAPlan:
        """Each planned observation has one first look or none has, in its landmark's first-look
        folder: a first look written where a row's file is would be released at its size."""
        looks, planned = self.requests.first_looks, self.requests.env_requests
        if not looks:
            return self
        by_id = {r.request_id: r for r in planned}
        if len(looks) != len(planned) or {r.request_id for r in looks} != set(by_id):
            raise ValueError("the plan's first looks are not one for each planned environment observation")
        for r in looks:
            folder = keys.env_first_looks(by_id[r.request_id].landmark_id) + "/"
            if r.landmark_id != by_id[r.request_id].landmark_id or not (
                r.output_image.startswith(folder) and r.output_segmentation.startswith(folder)
            ):
                raise ValueError(f"first look {r.request_id!r} is not in its landmark's first-look folder")
        return self

    def rows_of(self, family: ReleaseFamily[Any]) -> list[Any]:
        out = []
        for i, r in enumerate(self.rows.get(family.name, [])):
            try:
                out.append(family.row_model.model_validate(r))
            except ValidationError as exc:
                where, msg = first_error(exc)
                why = f"qa plan row {i} of {family.name} is invalid at {where}: {msg}"
                raise InvalidInput(why) from None
        return out

    def skipped_by(self, family: ReleaseFamily[Any]) -> dict[str, str]:
        """The units ``family`` does not release whatever its rows: those held from every
        family, and those it planned nothing for."""
        return self.skipped | self.family_skipped.get(family.name, {})

    def families(self, registered: Sequence[ReleaseFamily[Any]]) -> list[ReleaseFamily[Any]]:
        """The families that planned this plan. One that was registered later has no rows here
        and takes no part (an older run refreshes as it was built); rows of a family that is
        not registered cannot be checked, which is an error."""
        names = {f.name for f in registered}
        unknown = sorted(set(self.rows) - names)
        if unknown:
            raise InvalidInput(f"qa plan has rows of unregistered task families: {', '.join(unknown)}")
        return [f for f in registered if f.name in self.rows]


def plan(
    event: mission_pb2.MissionsCompleted,
    store: BlobStore,
    families: Sequence[ReleaseFamily[Any]] = RELEASED,
    views: Sequence[ViewRequest] = (),
) -> QAPlan:
    """Every family's rows and what they need rendered; ``views``: the landmark views already
    rendered again at the shipped size (recorded so ``skyqa refresh`` renders them too)."""
    run_id, scene_id = event.run_id, event.scene_id
    valid = load_json(ValidInstancesFile, store.get(event.valid_instances.key), "valid instances")
    collected = load_json(InstancesFile, store.get(keys.stored(run_id, valid.source_instances_json)))
    landmarks = sorted(valid.valid_instances, key=lambda v: v.instance_id)
    skipped = held_landmarks(landmarks, families)
    inputs = plan_inputs(store, run_id, scene_id, valid, skipped, event.index.key)
    rows: dict[str, list[dict[str, Any]]] = {}
    env_requests: list[EnvRequest] = []
    overlays: dict[str, OverlayRequest] = {}
    clips: dict[str, ClipRequest] = {}
    degraded: dict[str, DegradeRequest] = {}
    missions: dict[str, str] = {}
    family_skipped: dict[str, dict[str, str]] = {}
    for family in families:
        planned = family.plan(inputs)
        for path, data in sorted(planned.files.items()):
            key = keys.validate_key(f"{inputs.root}/{path}")
            store.put(key, data, mimetypes.guess_type(path)[0] or "application/octet-stream")
        rows[family.name] = [r.model_dump(mode="json") for r in planned.rows]
        env_requests += planned.env_requests
        for o in planned.overlays:
            overlays.setdefault(o.output_image, o)
        for c in planned.clips:
            clips.setdefault(c.output_video, c)
        for g in planned.degraded:
            degraded.setdefault(g.output_image, g)
        family_skipped[family.name] = dict(planned.skipped)
        missions.update(planned.missions)
    size = scan_rules.stills(inputs.scan)
    # a first look at the working size: only the observations of landmarks whose rows pass their
    # checks there are rendered at the size they ship (``observations.shipping``)
    first_looks = [first_look(r, size) for r in env_requests] if size.reshot else []
    return QAPlan(
        run_id=run_id,
        scene_id=scene_id,
        engine=inputs.engine,
        landmarks=[v.instance_id for v in landmarks],
        skipped=skipped,
        family_skipped=family_skipped,
        rows=rows,
        requests=RenderRequests(
            scene_id=scene_id,
            run_id=run_id,
            backend=inputs.engine,
            env_requests=env_requests,
            first_looks=first_looks,
            overlays=sorted(overlays.values(), key=lambda o: o.output_image),
            clips=sorted(clips.values(), key=lambda c: c.output_video),
            degraded=sorted(degraded.values(), key=lambda g: g.output_image),
            views=list(views),
        ),
        missions=missions,
        candidates=collected.summary.candidate_pairs,
        collected=len(collected.instances),
        valid_instances=event.valid_instances.key,
        scan=to_dict(inputs.scan),
    )


def plan_inputs(
    store: BlobStore,
    run_id: str,
    scene_id: str,
    valid: ValidInstancesFile,
    excluded: dict[str, str],
    index: str,
    draw: int = 0,
) -> PlanInputs:
    """What every family plans from; ``index``: the missions index's key."""
    scan = scan_rules.stored(store, run_id)
    return PlanInputs(
        run_id=run_id,
        scene_id=scene_id,
        engine=scan.backend or "builtin",
        seed=int(scan.seed),
        scan=scan,
        store=store,
        landmarks=sorted(valid.valid_instances, key=lambda v: v.instance_id),
        excluded=dict(excluded),
        missions=load_json(MissionIndex, store.get(index), "missions index"),
        draw=draw,
    )


def replanned(p: QAPlan, store: BlobStore, draw: int) -> PlanInputs:
    """The inputs ``p`` was planned from, for another draw of its questions."""
    valid = load_json(ValidInstancesFile, store.get(p.valid_instances), "valid instances")
    return plan_inputs(store, p.run_id, p.scene_id, valid, p.skipped, keys.missions_index(p.run_id), draw)


def first_look(r: EnvRequest, size: scan_rules.Stills) -> EnvRequest:
    """The observation at the working size, in the landmark's first-look folder."""
    folder = keys.env_first_looks(r.landmark_id)
    return r.model_copy(
        update={
            "width": size.working_width,
            "height": size.working_height,
            "output_image": keys.still_view(folder, r.request_id, "rgb"),
            "output_segmentation": keys.still_view(folder, r.request_id, "segmentation"),
        }
    )


def render_jobs(p: QAPlan, requests: Sequence[EnvRequest], tag: str = "") -> list[render_pb2.RenderJob]:
    """One still-view job per landmark for its environment observations among ``requests``, each
    at its request's size into its request's folder; ``tag`` prefixes the job ids of a round."""
    root = keys.run_prefix(p.run_id)
    jobs: dict[str, render_pb2.RenderJob] = {}
    for req in requests:
        job = jobs.get(req.landmark_id)
        if job is None:
            job = render_pb2.RenderJob(
                run_id=p.run_id,
                job_id=f"{tag}env-{req.landmark_id}",
                scene_id=p.scene_id,
                backend=p.engine,
                width=req.width,
                height=req.height,
                fov_deg=req.fov_deg,
                jpeg_quality=JPEG_QUALITY,  # as the refresh path encodes them
                modalities=["rgb", "segmentation"],
                output_prefix=f"{root}/{req.output_image.rpartition('/')[0]}",
                requester=REQUESTER,
                correlation=req.landmark_id,
            )
            jobs[req.landmark_id] = job
        job.views.add(view_id=req.request_id, pose=pose_message(req.pose))
    return [jobs[k] for k in sorted(jobs)]


def scan_of(p: QAPlan) -> scan_pb2.ScanRequest:
    return json_format.ParseDict(p.scan, scan_pb2.ScanRequest())
