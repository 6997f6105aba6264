"""World-model evaluation of a release's action trajectories (Reasoning-Structured Videos'
protocol).

Every model rolls out every released relation trajectory from its first frame (the lossless
keyframe) and the trajectory's actions, returning the frames the relations name. Two tiers:

- **GT-anchored**: PSNR and SSIM of the model's frame against the released lossless frame at
  each anchor (the turnaround of an inverse, the far point and the polygon corners of a loop,
  the meeting point of an equivalence, and the last frame). The oracle is exact here.
- **Self-consistency**: PSNR and SSIM between the model's own two frames of each identity pair
  (start and end of ``A ‖ A⁻¹`` or of a loop; the last frames of the paths ``A`` and ``B``).
  It is invariant to the model's action scale, and a constant model satisfies it trivially,
  which is why the GT tier is read beside it.

A row's PSNR is that of its frames' mean squared error, capped at 100 dB (every frame exact);
LPIPS and FVD need network weights this machine does
not have and are reported as absent, not approximated.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from skyqa import integrity, keys
from skyqa.blob import BlobStore
from skyqa.contracts.base import load_json, load_jsonl
from skyqa.contracts.rsv import RANDOM_WALK, SPLITS, TrajectoryPlan, TrajectoryRow
from skyqa.errors import BlobNotFound, InvalidInput
from skyqa.families import REASONING_VIDEOS, release_files
from skyqa.families.reasoning.layout import keyframe_path
from skyqa.families.reasoning.validate import decode_rgb, mse
from skyqa.settings import ModelEndpoint
from skyqa.v1 import common_pb2, world_model_pb2

if TYPE_CHECKING:
    from skyqa.models.world import WorldModel

PSNR_CAP = 100.0
# Reasoning-Structured Videos' rollout(context, actions) protocol: nothing is resized or re-encoded
WORLD_MEDIA = {
    "reasoning_videos": {
        "context": "the trajectory's first frame, lossless PNG at the release's frame size",
        "returned": "the frames the relations name, at the same size, scored against lossless frames",
        "source": "Reasoning-Structured Videos: rollout(context, actions) -> frames",
    }
}
ABSENT = {
    "lpips": "absent: needs LPIPS network weights, which are not available on this machine",
    "fvd": "absent: needs I3D network weights, which are not available on this machine",
}


def psnr_of(error: float) -> float:
    return PSNR_CAP if error == 0.0 else min(PSNR_CAP, 10.0 * math.log10(255.0**2 / error))


def ssim(a: NDArray[np.uint8], b: NDArray[np.uint8]) -> float:
    """Mean SSIM on luma (Wang et al. 2004: Gaussian window sigma 1.5, K1 0.01, K2 0.03)."""
    from scipy.ndimage import gaussian_filter  # loaded when a release has trajectories

    weights = np.array([0.299, 0.587, 0.114])
    x, y = a.astype(np.float64) @ weights, b.astype(np.float64) @ weights
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(v: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = gaussian_filter(v, 1.5, truncate=3.5)
        return out

    mx, my = blur(x), blur(y)
    sxx, syy, sxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(s.mean())


async def _score(
    store: BlobStore,
    run_id: str,
    scene_id: str,
    model: WorldModel,
    r: TrajectoryRow,
    partner: dict[int, NDArray[np.uint8]] | None,
) -> tuple[dict[str, Any], dict[int, NDArray[np.uint8]]]:
    """One row's scores and the model's frames. A row's PSNR is that of its frames' mean squared
    error (an exact frame does not make the average infinite, or capped). An equivalence pair's
    self-consistency is scored once, by its second half."""
    from skyqa.models.world import RolloutFailed

    root = keys.run_prefix(run_id)
    plan = load_json(TrajectoryPlan, store.get(keys.mission_file(run_id, r.traj_id, keys.TRAJECTORY_PLAN)))

    def truth(frame: int) -> NDArray[np.uint8]:
        return decode_rgb(store.get(f"{root}/{keyframe_path(r.split, r.stem, frame)}"))

    context = store.get(f"{root}/{keyframe_path(r.split, r.stem, 0)}")
    try:
        mine = await model.rollout(request_for(r, context, scene_id, model.privileged, plan))
    except RolloutFailed as exc:
        raise WorldModelFailed(str(exc)) from None
    except ValueError as exc:  # a model refusing a request it cannot take (pydantic's included)
        raise WorldModelFailed(f"{model.name} refused the request: {str(exc).splitlines()[0]}") from None
    gt = [(mse(mine[a], t), ssim(mine[a], t)) for a in r.anchors for t in (truth(a),)]
    sc = []
    for p in r.identities:
        other = partner if p.partner else mine
        if other is not None:
            sc.append((mse(mine[p.first], other[p.second]), ssim(mine[p.first], other[p.second])))
    scores: dict[str, Any] = {
        "gt_psnr": round(psnr_of(float(np.mean([e for e, _ in gt]))), 4),
        "gt_ssim": round(float(np.mean([s for _, s in gt])), 6),
        "gt_exact": all(e == 0.0 for e, _ in gt),
        "anchor_psnr": [round(psnr_of(e), 4) for e, _ in gt],
    }
    if sc:
        scores |= {
            "sc_psnr": round(psnr_of(float(np.mean([e for e, _ in sc]))), 4),
            "sc_ssim": round(float(np.mean([s for _, s in sc])), 6),
        }
    return scores, mine


class WorldModelFailed(Exception):
    """A rollout that failed or was refused: the row is recorded with the reason."""


def released_rows(store: BlobStore, run_id: str, scene_id: str) -> list[TrajectoryRow]:
    """The release's relation trajectories (``random_walk/`` asserts nothing to evaluate)."""
    key = release_files(run_id, scene_id)[REASONING_VIDEOS.manifest]
    if not store.exists(key):
        return []
    rows = load_jsonl(TrajectoryRow, store.get(key), "reasoning trajectories")
    return sorted((r for r in rows if r.split != RANDOM_WALK), key=lambda r: r.number)


def request_for(
    row: TrajectoryRow, context: bytes, scene_id: str, privileged: bool, plan: TrajectoryPlan
) -> world_model_pb2.RolloutRequest:
    frames = {0, *row.anchors}
    for p in row.identities:
        frames |= {p.first} | ({p.second} if not p.partner else set())
    req = world_model_pb2.RolloutRequest(
        context_frames=[context],
        actions=row.actions,
        frames_per_action=row.frames_per_action,
        width=row.width,
        height=row.height,
        return_frames=sorted(frames),
        grid=world_model_pb2.ActionGrid(
            translation_m=plan.space.translation_m,
            yaw_deg=plan.space.yaw_deg,
            pitch_deg=plan.space.pitch_deg,
        ),
        request_id=row.sample_id,
    )
    if privileged:
        x, y, z, yaw, pitch = row.root
        req.privileged.CopyFrom(
            world_model_pb2.PrivilegedState(
                scene_id=scene_id,
                root=common_pb2.Pose(x=x, y=y, z=z, yaw_deg=yaw, pitch_deg=pitch),
                camera_offset_m=plan.capsule.camera_offset_m,
                capsule_radius_m=plan.capsule.radius_m,
                capsule_half_height_m=plan.capsule.half_height_m,
                max_pitch_deg=plan.space.max_pitch_deg,
                fov_deg=plan.fov_deg,
            )
        )
    return req


@dataclass
class WorldResult:
    outputs: dict[str, str]
    leaderboard: dict[str, Any]


async def evaluate_world(
    store: BlobStore, run_id: str, scene_id: str, models: list[WorldModel]
) -> WorldResult | None:
    """Every model on every relation trajectory; None when the release has none. A row whose
    rollout or files fail is recorded with the error; memory holds one row's frames at a time
    (and a pair's first half until its second is scored)."""
    rows = released_rows(store, run_id, scene_id)
    if not rows:
        return None
    items: list[dict[str, Any]] = []
    for model in models:
        waiting: dict[int, dict[int, NDArray[np.uint8]]] = {}  # path A's frames its pair needs
        for r in rows:
            item: dict[str, Any] = {
                "model": model.name,
                "sample_id": r.sample_id,
                "split": r.split,
                "construction": r.construction,
            }
            try:
                scores, mine = await _score(
                    store, run_id, scene_id, model, r, waiting.pop(r.partner_number, None)
                )
            except (WorldModelFailed, InvalidInput, BlobNotFound) as exc:
                items.append(item | {"error": str(exc)})
                continue
            if r.role == "path_A":
                waiting[r.number] = {p.first: mine[p.first] for p in r.identities if p.partner}
            items.append(item | scores)
    board = leaderboard(items)
    board["media_policy"] = WORLD_MEDIA
    out = keys.world_outputs(run_id)
    store.put(
        out["world_items"],
        b"".join(json.dumps(i, sort_keys=True).encode() + b"\n" for i in items),
        "application/x-ndjson",
    )
    store.put(
        out["world_leaderboard"], json.dumps(board, indent=1, sort_keys=True).encode(), "application/json"
    )
    integrity.seal_eval(store, run_id)
    return WorldResult(out, board)


def leaderboard(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Per model and split: mean GT-anchored and self-consistency PSNR/SSIM; models ranked by GT
    PSNR averaged over the splits (each split counts once)."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for i in items:
        grouped[i["model"]][i["split"]].append(i)
    models: list[dict[str, Any]] = []
    for name, splits in grouped.items():
        per: dict[str, Any] = {}
        for split in [s for s in SPLITS if s in splits]:
            got = splits[split]
            ok = [i for i in got if "gt_psnr" in i]
            entry: dict[str, Any] = {"rows": len(got), "failed": len(got) - len(ok)}
            for metric in ("gt_psnr", "gt_ssim", "sc_psnr", "sc_ssim"):
                values = [i[metric] for i in ok if metric in i]
                entry[metric] = round(float(np.mean(values)), 4) if values else None
            entry["gt_exact"] = round(sum(bool(i.get("gt_exact")) for i in ok) / max(1, len(got)), 4)
            per[split] = entry
        gts = [e["gt_psnr"] for e in per.values() if e["gt_psnr"] is not None]
        models.append(
            {
                "model": name,
                "splits": per,
                "gt_psnr": round(float(np.mean(gts)), 4) if gts else 0.0,
                "hard_gt_psnr": _mean([per[s]["gt_psnr"] for s in per if s.endswith("_hard")]),
                "easy_gt_psnr": _mean([per[s]["gt_psnr"] for s in per if s.endswith("_easy")]),
            }
        )
    models.sort(key=lambda m: (-float(m["gt_psnr"]), str(m["model"])))
    return {"models": models, "psnr_cap_db": PSNR_CAP, "absent_metrics": ABSENT}


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(float(np.mean(kept)), 4) if kept else None


def split_endpoints(endpoints: list[ModelEndpoint]) -> tuple[list[ModelEndpoint], list[ModelEndpoint]]:
    """Vision-language endpoints and world-model endpoints."""
    return [e for e in endpoints if e.kind != "world_grpc"], [e for e in endpoints if e.kind == "world_grpc"]


async def run_world(
    store: BlobStore, run_id: str, scene_id: str, endpoints: list[ModelEndpoint], scenes_dir: Path | None
) -> WorldResult | None:
    """The built-in world baselines and the world-model endpoints on a release."""
    from skyqa.models.world import GrpcWorldModel

    from services.evaluator.world_baselines import builtin_world_models

    remote = [GrpcWorldModel(e.url, e.model or e.url, e.timeout_s, e.privileged) for e in endpoints]
    try:
        return await evaluate_world(store, run_id, scene_id, [*builtin_world_models(scenes_dir), *remote])
    finally:
        for m in remote:
            await m.aclose()
