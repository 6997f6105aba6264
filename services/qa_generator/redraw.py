"""Fresh draws of the tasks the blind gate withheld.

A task withheld by the gate is planned again by its family with the next draw
(``PlanInputs.draw``): another choice of candidate, distractors and letters over the same media.
Its new rows are checked like the first ones and gated with the rest of the release; a task
still withheld after ``MAX_DRAWS`` draws stays withheld. A task drawn again is also tested on
the rows of all its draws together (the gate's ``earlier``), so a leak of its generator cannot
be washed out by drawing until one draw passes.

Only families whose rows release one by one are drawn again: a family that releases a unit's
rows together (UAV-DualCog's lattice) would change which units are complete. A draw that needs a
render the plan did not make (an environment observation at another pose) is not taken: the
media of a release are rendered before its rows are checked, and a fresh draw must not wait for
the renderer. Local assets (clips cut from frames, overlays, degraded views) are made here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skyqa import keys
from skyqa.blob import BlobStore
from skyqa.contracts.qa import ClipRequest, DegradeRequest, OverlayRequest
from skyqa.errors import InvalidInput
from skyqa.families import Checked, Item, ReleaseFamily, Rendered

from services.qa_generator.assets import cut_clips, degrade_view, draw_overlay
from services.qa_generator.pipeline import QAPlan, replanned

MAX_DRAWS = 3  # the first draw and two fresh ones


@dataclass
class Draw:
    checked: Checked[Any]  # the family's rows of the redrawn tasks, ids marked with the draw
    clips: list[ClipRequest] = field(default_factory=list)  # made for them (the sidecar lists them)
    overlays: list[OverlayRequest] = field(default_factory=list)
    degraded: list[DegradeRequest] = field(default_factory=list)


def drawn_id(sample_id: str, draw: int) -> str:
    return f"{sample_id}_draw{draw}"


@dataclass
class Rounds:
    """The draws of a release's tasks: which draw of each task is current, which draw each row
    belongs to, and why the earlier draws were withheld."""

    drawn: dict[str, int] = field(default_factory=dict)  # task -> its current draw (absent: 0)
    of_row: dict[str, int] = field(default_factory=dict)  # sample id -> its draw (absent: 0)
    leaked: dict[tuple[str, int], str] = field(default_factory=dict)  # (task, draw) -> why withheld
    exhausted: set[str] = field(default_factory=set)  # tasks no further draw can be made for
    made: Draw = field(default_factory=lambda: Draw(Checked([])))  # local assets the draws made

    def superseded(self, items: dict[str, Item]) -> dict[str, str]:
        """Rows of a task's earlier draws, with why that draw was withheld."""
        out = {}
        for sample_id, it in items.items():
            draw = self.of_row.get(sample_id, 0)
            if draw != self.drawn.get(it.task, 0):
                out[sample_id] = f"draw {draw} of task {it.task} leaked ({self.leaked[(it.task, draw)]})"
        return out

    def again(
        self,
        p: QAPlan,
        store: BlobStore,
        seen: Rendered,
        families: Sequence[ReleaseFamily[Any]],
        checked: dict[str, Checked[Any]],
        items: dict[str, Item],
        failed: dict[str, str],
        withheld: dict[str, list[str]],
    ) -> bool:
        """Draw the withheld tasks that can be drawn again; their rows join ``checked``,
        ``items`` and ``failed``. False when no task was drawn again."""
        owner = {it.task: it.family for it in items.values()}
        by_family = {f.name: f for f in families}
        # one plan per family and next draw: each task moves to its own next draw
        wanted: dict[tuple[str, int], list[str]] = {}
        for task in sorted(withheld):
            f = by_family.get(owner.get(task, ""))
            if f is None or f.unit_rows is not None or task in self.exhausted:
                continue
            draw = self.drawn.get(task, 0) + 1
            if draw < MAX_DRAWS:
                wanted.setdefault((f.name, draw), []).append(task)
        drew = False
        for (name, draw), tasks in sorted(wanted.items()):
            f = by_family[name]
            made = redraw(p, store, seen, f, tasks, draw)
            if made is None:
                self.exhausted.update(tasks)
                continue
            for t in tasks:
                self.leaked[(t, self.drawn.get(t, 0))] = withheld[t][0] if withheld[t] else "withheld"
                self.drawn[t] = draw
            c = checked[name]
            c.rows += made.checked.rows
            c.failed.update(made.checked.failed)
            c.uncertain.update(made.checked.uncertain)
            for r in made.checked.rows:
                it = f.item(r)
                if it.sample_id in items:
                    raise InvalidInput(f"a fresh draw's sample id {it.sample_id!r} is already in the release")
                items[it.sample_id] = it
                self.of_row[it.sample_id] = draw
                if (problem := made.checked.failed.get(it.sample_id) or it.problem()) is not None:
                    failed[it.sample_id] = problem
            self.made.clips += made.clips
            self.made.overlays += made.overlays
            self.made.degraded += made.degraded
            drew = True
        return drew


def redraw(
    p: QAPlan,
    store: BlobStore,
    seen: Rendered,
    family: ReleaseFamily[Any],
    tasks: Sequence[str],
    draw: int,
) -> Draw | None:
    """``family``'s rows of ``tasks`` planned at ``draw`` and checked against what was
    rendered; None when they need what this release cannot make now (a render the plan did not
    make, or a local asset at a path another request holds)."""
    planned = family.plan(replanned(p, store, draw))
    wanted = set(tasks)
    rows = [
        r.model_copy(update={"sample_id": drawn_id(r.sample_id, draw)})
        for r in planned.rows
        if family.item(r).task in wanted
    ]
    used = {m.path for r in rows for m in family.media(r)}
    known = {r.request_id: r for r in p.requests.env_requests}
    needed = [r for r in planned.env_requests if r.output_image in used]
    if any(known.get(r.request_id) != r for r in needed):
        return None
    root = keys.run_prefix(p.run_id)
    made = Draw(Checked([]))
    for new, old, out in (
        (planned.clips, p.requests.clips, made.clips),
        (planned.overlays, p.requests.overlays, made.overlays),
        (planned.degraded, p.requests.degraded, made.degraded),
    ):
        held = {_output(r): r for r in old}
        for r in new:
            if _output(r) not in used:
                continue  # an asset of a row this draw does not take
            if _output(r) in held and held[_output(r)] != r:
                return None
            if _output(r) not in held:
                out.append(r)  # type: ignore[arg-type]
    cut_clips(store, root, [c for c in made.clips if not store.exists(f"{root}/{c.output_video}")])
    for o in made.overlays:
        if not store.exists(f"{root}/{o.output_image}"):
            draw_overlay(store, root, o)
    for g in made.degraded:
        if not store.exists(f"{root}/{g.output_image}"):
            degrade_view(store, root, g)
    made.checked = family.check(rows, seen)
    return made


def _output(r: ClipRequest | OverlayRequest | DegradeRequest) -> str:
    return r.output_video if isinstance(r, ClipRequest) else r.output_image
