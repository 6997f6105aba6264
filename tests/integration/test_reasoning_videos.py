"""Reasoning-Structured Videos end to end on a hand-built square: the renderer moves the capsule
and renders, the identities hold to the pixel, a walk into the wall is blocked and lands in
random_walk/, the release is in the card's layout and loads with ``datasets``, and the
world-model evaluation ranks the oracle above the shortcuts, the hard tiers separating the
symmetric one."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from reasoning_scenes import RUN, SCENE, STREET_Z, WALL_X, plan_of, render, square
from skyqa import keys
from skyqa.actions import Root
from skyqa.blob import LocalBlobStore
from skyqa.contracts import load_json
from skyqa.contracts.missions import MissionIndex
from skyqa.contracts.rsv import Execution, TrajectoryPlan, TrajectoryRow
from skyqa.errors import InvalidInput
from skyqa.families import REASONING_VIDEOS, PlanInputs, Rendered, Stored
from skyqa.families.reasoning.layout import layout
from skyqa.families.reasoning.validate import decode_rgb
from skyqa.models.world import Frames, GrpcWorldModel, RolloutFailed, WorldModel, serve_world_model
from skyqa.scan import default_request
from skyqa.sim import BuiltinSimulator
from skyqa.v1 import render_pb2, world_model_pb2

from services.evaluator.world import evaluate_world, request_for
from services.evaluator.world_baselines import CopyLast, Rendered as RendererModel
from services.mission_planner.trajectories import index_row, video_job
from services.qa_generator.release import export_key
from services.renderer.trajectory import render_trajectory

pytestmark = pytest.mark.integration
OPEN = Root(-20.0, 0.0, STREET_Z, 0.0)  # 26 m from the wall, nothing within 10 m


@dataclass
class Released:
    store: LocalBlobStore
    sim: BuiltinSimulator
    plans: list[TrajectoryPlan]
    rows: list[TrajectoryRow]


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Released:
    """One trajectory of every split rendered, plus a rectangle driven into the wall."""
    sim = square()
    store = LocalBlobStore(tmp_path_factory.mktemp("store"))
    plans = [
        *plan_of("inverse_easy", 0, 1, OPEN),
        *plan_of("inverse_hard", 1, 2, OPEN),
        *plan_of("loop_easy", 2, 3, OPEN),
        *plan_of("loop_hard", 3, 4, OPEN),
        *plan_of("equivalence_easy", 4, 5, OPEN),
        *plan_of("equivalence_easy", 6, 6, OPEN, index=1),
        *plan_of("equivalence_hard", 9, 8, OPEN),
        # a rectangle from 1.5 m before the wall: its first side walks into it
        *plan_of("loop_hard", 8, 7, Root(WALL_X - 1.5, 0.0, STREET_Z, 0.0)),
    ]
    for p in plans:
        render(sim, store, p)
    index = MissionIndex(
        scene_id=SCENE,
        missions=[],
        rejected=[],
        trajectories=[index_row(store, RUN, p.traj_id) for p in plans],
    )
    inputs = PlanInputs(
        run_id=RUN,
        scene_id=SCENE,
        engine="builtin",
        seed=0,
        scan=default_request("demo_city"),
        store=store,
        landmarks=[],
        excluded={},
        missions=index,
    )
    planned = REASONING_VIDEOS.plan(inputs)
    return Released(store, sim, plans, planned.rows)


def test_identities_hold_to_the_pixel_and_poses_to_the_centimetre(released: Released) -> None:
    rows = {r.traj_id: r for r in released.rows}
    exact = [r for r in rows.values() if r.split not in ("random_walk", "loop_easy")]
    assert {r.split for r in exact} == {
        "inverse_easy",
        "inverse_hard",
        "loop_hard",
        "equivalence_easy",
        "equivalence_hard",
    }
    for r in exact:
        assert r.collisions == 0 and r.pose_error_max_m == 0.0 and r.identity_error_max_m == 0.0
        assert r.pixel_mse == [0.0] * len(r.identities)  # Layer 2: exact on the deterministic renderer
    loop = next(r for r in rows.values() if r.split == "loop_easy")
    assert loop.identity_error_max_m == pytest.approx(loop.closure_residual_m, abs=1e-6)
    assert loop.closure_residual_m < 0.45
    store = released.store
    inverse = rows[f"{SCENE}_rsv_inverse_hard_001"]
    final = keys.final_task(RUN, inverse.traj_id)
    first = decode_rgb(store.get(f"{final}/{keys.key_frame(0)}"))
    last = decode_rgb(store.get(f"{final}/{keys.key_frame(359)}"))
    turn = decode_rgb(store.get(f"{final}/{keys.key_frame(inverse.anchors[0])}"))
    assert np.array_equal(first, last) and not np.array_equal(first, turn)


def test_a_walk_into_the_wall_is_recorded_and_lands_in_random_walk(released: Released) -> None:
    rows = {r.traj_id: r for r in released.rows}
    bad = rows[f"{SCENE}_rsv_loop_hard_008"]
    assert bad.split == "random_walk" and bad.built_as == "loop_hard"
    assert bad.collisions > 0 and "blocked step" in bad.failure
    record = load_json(Execution, released.store.get(f"{keys.final_task(RUN, bad.traj_id)}/{keys.EXECUTION}"))
    hit = next(s for s in record.steps if s.collision)
    assert hit.actual_end[0] < WALL_X - 0.34 <= hit.expected_end[0] + 0.34  # stopped short of the wall
    assert bad.stem.startswith(f"run_{RUN}__traj_8") and bad.video.startswith("reasoning_videos/random_walk/")
    # never released as a relation, and its own check agrees
    checked = REASONING_VIDEOS.check(released.rows, Rendered(released.store, RUN, {}, {}, {}))
    assert checked.failed == {}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stem": f"run_{RUN}__traj_99"}, "file name does not follow"),
        ({"video": "reasoning_videos/trajectories.jsonl"}, "release paths do not follow"),
        ({"actions": ["no_op"] * 40}, "actions or root are not its plan's"),
        ({"split": "inverse_hard"}, "release paths do not follow"),
        ({"keyframes": [0, 1]}, "did not keep"),
    ],
)
def test_a_stored_row_that_disagrees_with_its_plan_is_not_released(
    released: Released, change: dict[str, object], message: str
) -> None:
    good = next(r for r in released.rows if r.split == "inverse_easy")
    forged = good.model_copy(update=change)
    checked = REASONING_VIDEOS.check([forged], Rendered(released.store, RUN, {}, {}, {}))
    assert re.search(message, checked.failed[forged.sample_id])


def test_an_export_cannot_overwrite_a_release_file() -> None:
    out = {
        "reasoning_layout": "runs/r/reasoning_videos",
        "reasoning_index": "runs/r/reasoning_videos/index.parquet",
    }
    assert export_key(out, "reasoning_layout/loop_hard/x.mp4") == "runs/r/reasoning_videos/loop_hard/x.mp4"
    with pytest.raises(InvalidInput, match="would overwrite"):
        export_key(out, "reasoning_layout/index.parquet")
    with pytest.raises(InvalidInput):
        export_key(out, "reasoning_layout/../../other/x")


def test_the_release_is_in_the_cards_layout(released: Released) -> None:
    rows = released.rows
    pair = [r for r in rows if r.role and r.split == "equivalence_easy"]
    assert len(pair) == 4
    a = next(r for r in pair if r.role == "path_A" and r.number == 4)
    assert a.stem == f"run_{RUN}__pair_4_A_traj_4"
    exports = REASONING_VIDEOS.exports(rows)
    out = {n: f"runs/{RUN}/{p}" for n, p in REASONING_VIDEOS.files.items()}
    names = {export_key(out, n).removeprefix(f"runs/{RUN}/") for n in exports}
    assert f"reasoning_videos/equivalence_easy/run_{RUN}__pair_4_B_traj_5.mp4" in names
    assert f"reasoning_videos/equivalence_easy/run_{RUN}__pair_4_B_traj_5_meta.json" in names
    assert f"reasoning_videos/inverse_easy/keyframes/run_{RUN}__traj_0/frame_000359.png" in names
    store = released.store
    meta_key = exports[f"reasoning_layout/equivalence_easy/run_{RUN}__pair_4_B_traj_5_meta.json"]
    assert isinstance(meta_key, Stored)
    meta = json.loads(store.get(f"runs/{RUN}/{meta_key.path}"))
    assert meta["trajectory_type"] == "equivalence" and meta["total_frames"] == 360
    assert meta["paired_trajectory"] == {
        "is_paired": True,
        "role": "path_B",
        "primary_trajectory_id": 4,
        "partner_trajectory_id": 5 - 1,
        "relation": meta["paired_trajectory"]["relation"],
    }
    assert len(meta["steps"]) == 40 and meta["collision_mask"] == [0] * 40
    assert meta["video_encoding"] == {"fps": 16.0, "crf": 28, "resolution": "96x64", "codec": "libx264"}
    # the card's convention: centimetres, y south, yaw clockwise
    step = next(s for s in meta["steps"] if s["action"] == "move_left")
    dx = step["expected_end_pos"][0] - step["start_pos"][0]
    dy = step["expected_end_pos"][1] - step["start_pos"][1]
    yaw = np.radians(step["start_rot"][1])
    assert (dx, dy) == pytest.approx((100 * np.sin(yaw), -100 * np.cos(yaw)), abs=1e-3)


def test_the_index_loads_with_datasets(released: Released, tmp_path: Path) -> None:
    import datasets  # type: ignore[import-untyped]

    path = tmp_path / "index.parquet"
    path.write_bytes(REASONING_VIDEOS.exports(released.rows)["reasoning_index"])  # type: ignore[arg-type]
    ds = datasets.load_dataset("parquet", data_files=str(path), split="train")
    assert len(ds) == len(released.rows)
    first = ds[0]
    assert (
        len(first["actions"]) == 40 and first["video"].endswith(".mp4") and len(first["root_position"]) == 3
    )
    assert {r["split"] for r in ds} >= {"inverse_easy", "random_walk", "equivalence_easy"}


def test_the_world_model_evaluator_ranks_the_oracle_first(released: Released, tmp_path: Path) -> None:
    store = released.store
    key = f"runs/{RUN}/reasoning_videos/trajectories.jsonl"
    store.put(key, b"".join(r.model_dump_json().encode() + b"\n" for r in released.rows))
    for r in released.rows:
        for path, source in layout(r).items():
            store.put(f"runs/{RUN}/{path}", store.get(f"runs/{RUN}/{source}"))
    # the hand-built scene, not a named one
    models: list[WorldModel] = [
        RendererModel("oracle", False, simulator=released.sim),
        RendererModel("symmetric_shortcut", True, simulator=released.sim),
        CopyLast(),
    ]
    result = asyncio.run(evaluate_world(store, RUN, SCENE, models))
    assert result is not None
    written = json.loads(store.get(result.outputs["world_leaderboard"]))
    assert "lossless PNG" in written["media_policy"]["reasoning_videos"]["context"]  # issue 43.3
    board = {m["model"]: m for m in result.leaderboard["models"]}
    assert result.leaderboard["models"][0]["model"] == "oracle"
    oracle, shortcut, copy = board["oracle"], board["symmetric_shortcut"], board["copy_last"]
    assert all(s["gt_exact"] == 1.0 and s["gt_psnr"] == 100.0 for s in oracle["splits"].values())
    # the easy inverse tier cannot tell the commuting shortcut from the oracle; the hard tiers can
    assert shortcut["splits"]["inverse_easy"]["gt_psnr"] == 100.0
    assert shortcut["splits"]["inverse_hard"]["gt_psnr"] < 60.0
    assert (
        shortcut["splits"]["loop_hard"]["gt_psnr"] < 60.0
        and shortcut["splits"]["loop_hard"]["sc_psnr"] < 60.0
    )
    assert oracle["splits"]["loop_hard"]["sc_psnr"] == 100.0
    # copying the first frame is self-consistent everywhere and wrong wherever the body moved
    assert all(s["sc_psnr"] == 100.0 for s in copy["splits"].values())
    assert copy["gt_psnr"] < shortcut["gt_psnr"] < oracle["gt_psnr"]


def test_a_world_model_over_grpc_and_a_broken_one(released: Released) -> None:
    row = next(r for r in released.rows if r.split == "inverse_hard")
    store = released.store
    context = store.get(f"{keys.final_task(RUN, row.traj_id)}/{keys.key_frame(0)}")
    plan = next(p for p in released.plans if p.traj_id == row.traj_id)
    req = request_for(row, context, SCENE, False, plan)
    assert not req.HasField("privileged")  # a model under test never sees the scene or the root

    class Wrong:
        name, privileged = "wrong", False

        async def rollout(self, request: world_model_pb2.RolloutRequest) -> Frames:
            return {i: np.zeros((8, 8, 3), np.uint8) for i in request.return_frames}

    async def go() -> None:
        server, port = await serve_world_model(CopyLast())
        bad, bad_port = await serve_world_model(Wrong())
        try:
            client = GrpcWorldModel(f"127.0.0.1:{port}", "copy")
            frames = await client.rollout(req)
            assert sorted(frames) == sorted(req.return_frames)
            assert np.array_equal(frames[359], decode_rgb(context))
            broken = GrpcWorldModel(f"127.0.0.1:{bad_port}", "wrong")
            with pytest.raises(RolloutFailed, match="not a 96x64 PNG"):
                await broken.rollout(req)
            refused = world_model_pb2.RolloutRequest()
            refused.CopyFrom(req)
            refused.actions.append("jump")
            with pytest.raises(RolloutFailed, match="INVALID_ARGUMENT: unknown actions"):
                await client.rollout(refused)
            sneaky = world_model_pb2.RolloutRequest()
            sneaky.CopyFrom(req)
            sneaky.privileged.scene_id = "../../etc"
            with pytest.raises(RolloutFailed, match=r"INVALID_ARGUMENT: .*scene id"):
                await client.rollout(sneaky)
            greedy = world_model_pb2.RolloutRequest()
            greedy.CopyFrom(req)
            greedy.width, greedy.height = 4096, 3072
            del greedy.return_frames[:]  # every frame, at 4096x3072
            with pytest.raises(RolloutFailed, match="INVALID_ARGUMENT: a rollout returns at most"):
                await client.rollout(greedy)
            await client.aclose()
            await broken.aclose()
        finally:
            await server.stop(None)
            await bad.stop(None)

    asyncio.run(go())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda j: j.program.actions.append("jump"), "unknown actions"),
        (lambda j: j.poses.add(), "takes no poses"),
        (lambda j: j.program.keep_frames.append(999), "keeps at most"),
        (lambda j: setattr(j.program, "yaw_deg", 7.0), "yaw step must divide 90"),
        (lambda j: setattr(j.program.root, "yaw_deg", 10.0), "not a multiple of the yaw step"),
        (lambda j: setattr(j.program, "crf", 70), "crf must be 0..51"),
    ],
)
def test_a_bad_action_program_is_refused_before_anything_is_stored(
    released: Released, change: Callable[[render_pb2.VideoJob], object], message: str, tmp_path: Path
) -> None:
    job = video_job(RUN, SCENE, "builtin", released.plans[0])
    change(job)
    store = LocalBlobStore(tmp_path)
    with pytest.raises(InvalidInput, match=message):
        render_trajectory(job, released.sim, store)
    assert store.list("") == []
