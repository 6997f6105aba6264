"""Chunks -> fused semantic/instance cloud, instance table, coverage, previews, meta.json."""

from __future__ import annotations

import numpy as np
from skyqa import keys, media, scan
from skyqa.blob import BlobStore
from skyqa.contracts import (
    ClassEntry,
    FrameRow,
    FusionMeta,
    InstanceEntry,
    InstanceTable,
    SemanticClassTable,
    load_json,
)
from skyqa.contracts.base import dump_json, load_jsonl
from skyqa.geometry import (
    CLOUD_DTYPE,
    connected_instances,
    coverage_ratio,
    instance_stats,
    render_oblique,
    render_topdown,
    voxel_fuse,
    write_pcd,
)
from skyqa.v1 import capture_pb2, fusion_pb2


def fuse(done: capture_pb2.CaptureCompleted, store: BlobStore) -> fusion_pb2.FusionCompleted:
    run_id, scene_id = done.run_id, done.scene_id
    req = scan.stored(store, run_id)
    rows = load_jsonl(FrameRow, store.get(done.frames_manifest.key), "frames manifest")
    table = load_json(
        SemanticClassTable,
        store.get(keys.classes(run_id, scene_id)),
        "class table",
    )
    classes = {c.id: c for c in table.classes}
    chunks = [
        media.decode_lidar(store.get(keys.stored(run_id, r.lidar_segmentation_path)))
        for r in rows
        if r.point_count > 0
    ]
    raw = np.concatenate(chunks) if chunks else np.zeros(0, dtype=media.LIDAR_DTYPE)
    xyz = np.stack([raw["x"], raw["y"], raw["z"]], axis=-1)
    cfg = req.fusion
    fused = voxel_fuse(xyz, raw["semantic"], raw["instance"], cfg.voxel_size_m)

    stuff = {c.id for c in table.classes if c.stuff}
    if np.any(fused.instance > 0):
        source = "sensor"
        instance = fused.instance.copy()
        ids, counts = np.unique(instance, return_counts=True)
        small = ids[(counts < cfg.instance_min_points) & (ids > 0)]
        instance[np.isin(instance, small)] = 0
    else:
        source = "connected_components"
        instance = connected_instances(
            fused.points, fused.semantic, cfg.instance_voxel_size_m, cfg.instance_min_points, stuff
        )

    # compact class ids 1..K in order of the simulator's ids; 0 stays unlabelled
    present = [int(c) for c in np.unique(fused.semantic) if c != 0]
    compact_of = {raw_id: i + 1 for i, raw_id in enumerate(present)}
    lut = np.zeros(int(max(present, default=0)) + 1, dtype=np.uint32)
    for raw_id, cid in compact_of.items():
        lut[raw_id] = cid
    class_id = lut[fused.semantic]

    cloud = np.zeros(len(fused.points), dtype=CLOUD_DTYPE)
    cloud["x"], cloud["y"], cloud["z"] = fused.points[:, 0], fused.points[:, 1], fused.points[:, 2]
    cloud["class_id"], cloud["instance_id"] = class_id, instance
    cloud["semantic_raw"], cloud["observed"] = fused.semantic, fused.observed

    stats = instance_stats(fused.points, instance)
    inst_class = {}
    for iid in stats:
        sel = instance == iid
        inst_class[iid] = int(np.bincount(fused.semantic[sel]).argmax())
    entries = []
    for iid in sorted(stats):
        sem = classes.get(inst_class[iid])
        s = stats[iid]
        entries.append(
            InstanceEntry(
                instance_id=iid,
                class_id=compact_of[inst_class[iid]],
                class_name=sem.name if sem else f"class_{inst_class[iid]}",
                category=sem.category if sem else "other",
                center=s["center"],
                aabb_min=s["aabb_min"],
                aabb_max=s["aabb_max"],
                size=s["size"],
                yaw_deg=s["yaw_deg"],
                point_count=s["point_count"],
            )
        )
    counts = np.bincount(fused.semantic, minlength=lut.size) if len(fused.semantic) else np.zeros(1, np.int64)
    class_entries = [
        ClassEntry(
            class_id=compact_of[r],
            semantic_raw=r,
            name=classes[r].name if r in classes else f"class_{r}",
            category=classes[r].category if r in classes else "other",
            points=int(counts[r]),
        )
        for r in present
    ]
    inst_table = InstanceTable(
        scene_id=scene_id, instance_source=source, classes=class_entries, instances=entries
    )

    out = keys.fusion_outputs(run_id, scene_id)
    infos = {
        "cloud_pcd": store.put(out["cloud_pcd"], write_pcd(cloud)),
        "cloud_npy": store.put(out["cloud_npy"], _npy(cloud)),
        "instances": store.put(out["instances"], dump_json(inst_table), "application/json"),
        "preview_topdown": store.put(
            out["preview_topdown"], render_topdown(fused.points, class_id), "image/png"
        ),
        "preview_oblique": store.put(
            out["preview_oblique"], render_oblique(fused.points, class_id), "image/png"
        ),
    }
    coverage = coverage_ratio(fused.points, cfg.coverage_grid_m)
    lo = fused.points.min(axis=0) if len(fused.points) else np.zeros(3)
    hi = fused.points.max(axis=0) if len(fused.points) else np.zeros(3)
    meta = FusionMeta(
        scene_id=scene_id,
        engine=req.backend,
        run_id=run_id,
        frames=len(rows),
        raw_points=len(raw),
        dedup_points=len(fused.points),
        dedup_ratio=round(len(fused.points) / max(1, len(raw)), 6),
        voxel_size=cfg.voxel_size_m,
        dedup_enabled=True,
        fuse_strategy="voxel_centroid_majority_label",
        coverage_ratio=round(coverage, 6),
        hole_ratio=round(1.0 - coverage, 6),
        coverage_grid_m=cfg.coverage_grid_m,
        instance_count=len(entries),
        semantic_points=int(np.count_nonzero(class_id)),
        bounds_min=[round(float(v), 4) for v in lo],
        bounds_max=[round(float(v), 4) for v in hi],
        outputs={k: v for k, v in out.items() if k != "meta"},
    )
    infos["meta"] = store.put(out["meta"], dump_json(meta), "application/json")
    return fusion_pb2.FusionCompleted(
        run_id=run_id,
        scene_id=scene_id,
        points=len(fused.points),
        instance_count=len(entries),
        coverage_ratio=coverage,
        **{k: v.to_ref() for k, v in infos.items()},
    )


def _npy(arr: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()
