"""What the dashboard shows: throughput and ETA per stage, and the dead-letter index."""

from __future__ import annotations

from skyqa.contracts import RunState, StageState

from services.gateway.deadletters import DeadLetter, DeadLetterLog
from services.gateway.views import run_view, stage_view


def test_rate_and_eta_while_running() -> None:
    st = StageState(done=10, total=40, status="running", started_at=100.0, updated_at=105.0)
    v = stage_view("capture", st, now=110.0)
    assert v["items_per_s"] == 1.0  # 10 items over the 10 s since the first event
    assert v["eta_s"] == 30.0 and v["fraction"] == 0.25


def test_no_eta_before_two_items_or_without_a_total_and_none_once_done() -> None:
    assert (
        stage_view("x", StageState(done=1, total=9, status="running", started_at=1.0), 5.0)["eta_s"] is None
    )
    assert (
        stage_view("x", StageState(done=5, total=0, status="running", started_at=1.0), 5.0)["eta_s"] is None
    )
    done = StageState(done=4, total=4, status="completed", started_at=1.0, updated_at=3.0, finished_at=3.0)
    v = stage_view("x", done, now=100.0)
    assert v["eta_s"] is None and v["items_per_s"] == 2.0 and v["elapsed_s"] == 2.0
    pending = stage_view("x", StageState(), now=100.0)
    assert pending["items_per_s"] == 0.0 and pending["fraction"] == 0.0


def test_run_view_orders_stages_and_stops_the_clock_when_finished() -> None:
    state = RunState(
        run_id="r",
        status="completed",
        created_at=10.0,
        stages={
            "eval": StageState(status="completed", started_at=40.0, finished_at=50.0, updated_at=50.0),
            "capture": StageState(status="completed", started_at=11.0, finished_at=20.0, updated_at=20.0),
            "extra": StageState(status="running", started_at=12.0),
        },
    )
    v = run_view(state, now=1000.0)
    names = [s["stage"] for s in v["stages"]]
    assert names[0] == "capture" and names[-2] == "eval" and names[-1] == "extra"
    assert v["wall_s"] == 40.0


def letter(seq: int, run: str = "r") -> DeadLetter:
    return DeadLetter(
        seq, float(seq), run, "skyqa.v1.scan.requested", "capture", "invalid_input", "bad", 1, 3
    )


def test_dead_letters_are_deduplicated_bounded_and_newest_first() -> None:
    log = DeadLetterLog(capacity=3)
    for seq in (1, 2, 2, 3, 4):  # 2 replayed by a re-created ordered consumer
        log.add(letter(seq, "a" if seq % 2 else "b"))
    assert log.total == 4
    assert [d.sequence for d in log.recent()] == [4, 3, 2]
    assert [d.sequence for d in log.recent("a")] == [3]
    log.add(letter(1))  # evicted earlier, so it counts as new again
    assert [d.sequence for d in log.recent()] == [1, 4, 3]
