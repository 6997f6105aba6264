"""What the API and dashboard show of a run: stages in pipeline order with throughput and ETA."""

from __future__ import annotations

from typing import Any

from skyqa.contracts import RunState, StageState
from skyqa.runtime.progress import PIPELINE_STAGES


def stage_view(name: str, st: StageState, now: float) -> dict[str, Any]:
    """Counts plus items/s since the stage's first event and the ETA at that rate.

    The rate is measured over the stage's own wall time (first event to its latest update, or
    to now while it runs), so a stage waiting on an upstream stage reads slower than its
    workers are; no ETA is given before two items are done or while the total is unknown.
    """
    end = st.finished_at or (now if st.status == "running" else st.updated_at)
    elapsed = max(0.0, end - st.started_at) if st.started_at else 0.0
    rate = st.done / elapsed if elapsed > 0 and st.done else 0.0
    eta = None
    if st.status == "running" and st.total > st.done and rate > 0 and st.done >= 2:
        eta = (st.total - st.done) / rate
    return {
        "stage": name,
        "status": st.status,
        "done": st.done,
        "total": st.total,
        "fraction": min(1.0, st.done / st.total) if st.total else (1.0 if st.status == "completed" else 0.0),
        "message": st.message,
        "elapsed_s": round(elapsed, 3),
        "items_per_s": round(rate, 4),
        "eta_s": None if eta is None else round(eta, 1),
    }


def run_view(state: RunState, now: float) -> dict[str, Any]:
    order = list(PIPELINE_STAGES) + sorted(set(state.stages) - set(PIPELINE_STAGES))
    stages = [stage_view(n, state.stages.get(n, StageState()), now) for n in order]
    ends = [st.finished_at or st.updated_at for st in state.stages.values()]
    end = max(ends, default=0.0) if state.status in ("completed", "failed") else now
    return {
        "run_id": state.run_id,
        "scene_id": state.scene_id,
        "status": state.status,
        "created_at": state.created_at,
        "updated_at": state.updated_at,
        "wall_s": round(max(0.0, end - state.created_at), 3) if state.created_at else 0.0,
        "stages": stages,
        "errors": state.errors,
        "outputs": state.outputs,
    }
