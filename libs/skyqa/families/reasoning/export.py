"""The trajectory index as Parquet, the table ``datasets`` loads with its parquet builder: one
record per trajectory with the fields the card's wrapper yields (video, actions, trajectory
type, paired trajectory, root state) plus the split and the meta file."""

from __future__ import annotations

import io

from skyqa.contracts.rsv import TrajectoryRow
from skyqa.families.reasoning.meta import root_position, root_rotation


def index_parquet(rows: list[TrajectoryRow]) -> bytes:
    # imported here: pyarrow is large and only the QA stage writes this file
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "trajectory_id": pa.array([r.number for r in rows], pa.int64()),
            "split": pa.array([r.split for r in rows], pa.string()),
            "trajectory_type": pa.array([r.trajectory_type for r in rows], pa.string()),
            "construction": pa.array([r.construction for r in rows], pa.string()),
            "video": pa.array([r.video for r in rows], pa.string()),
            "meta": pa.array([r.meta for r in rows], pa.string()),
            "actions": pa.array([r.actions for r in rows], pa.list_(pa.string())),
            "paired_trajectory_id": pa.array(
                [r.partner_number if r.role else None for r in rows], pa.int64()
            ),
            "role": pa.array([r.role or None for r in rows], pa.string()),
            # the card's units, as in the meta: centimetres and [pitch, yaw, roll]
            "root_position": pa.array([root_position(r.root) for r in rows], pa.list_(pa.float64())),
            "root_rotation": pa.array([root_rotation(r.root) for r in rows], pa.list_(pa.float64())),
            "anchor_frames": pa.array([r.anchors for r in rows], pa.list_(pa.int64())),
            "frames": pa.array([r.frames for r in rows], pa.int64()),
            "fps": pa.array([r.fps for r in rows], pa.float64()),
            "failure": pa.array([r.failure for r in rows], pa.string()),
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()
