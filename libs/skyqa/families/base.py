"""The task-family interface: what a benchmark family plans, checks, releases and exports.

The qa-generator knows no family by name. It asks every registered family for its rows and the
renders they need (:meth:`TaskFamily.plan`), lets each re-check its rows against what was
rendered (:meth:`TaskFamily.check`), releases a family's rows of a unit (a landmark, for
UAV-DualCog) only when that family has its whole share of clean rows for it, runs one blind gate
over every family's rows seen as :class:`Item`, and writes each family's manifest and exports.
The evaluator asks every row through its family (prompts, media, parse, score, baselines).
A family's row model is a pydantic contract with a ``sample_id`` unique in the release.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from skyqa import keys
from skyqa.answers import Parsed
from skyqa.contracts import ValidInstance
from skyqa.contracts.missions import MissionIndex
from skyqa.contracts.qa import ClipRequest, DegradeRequest, EnvRequest, Funnel, OverlayRequest, ReasoningStep
from skyqa.media_policy import MediaPolicy

if TYPE_CHECKING:
    import numpy as np

    from skyqa.blob import BlobStore
    from skyqa.v1 import scan_pb2

R = TypeVar("R", bound=BaseModel)


@dataclass(frozen=True)
class Item:
    """One row as the release sees it: what a model could read without looking (prompt,
    options, their ids) plus the row's gold and its release unit. The blind gate's solvers
    read only this."""

    sample_id: str
    task: str
    unit: str  # the release unit: a landmark for UAV-DualCog
    difficulty: str
    kind: str  # "choice" | "multi" | "count" | "trajectory" (no question: the gate skips it)
    prompt: str
    options: tuple[tuple[str, str], ...]  # (option id, label); empty for counts
    gold: frozenset[str]  # option ids, or the count as text
    box: tuple[float, ...] = ()
    # how the prompt names the unit where nothing in its media marks it: the gate withholds
    # units named alike (a question in words alone would not say which one it asks about)
    description: str = ""
    category: str = ""
    texts: tuple[str, ...] = ()  # option labels that are words (not "Image 2"), for similarity
    family: str = ""  # the family's name; its option ids form one letter alphabet
    # the fact the row asks, as a key two rows share exactly when their answers follow from the
    # same scene geometry whatever unit shows it (the distance between two landmarks, not what a
    # UAV of this group sees): a release asks each fact once, since a model that read another
    # unit's answer would know it. "" when the answer belongs to the unit's own media.
    fact: str = ""
    # rows sharing this key are released or left out together (a lattice family's share of a
    # unit: UAV-DualCog's 4 video rows of a landmark); "" when the row is released on its own
    together: str = ""

    def problem(self) -> str | None:
        """What makes the gold unusable for its kind, or None: a single answer is exactly one
        option, a multi-select answer one or more options, a count one value."""
        ids = [oid for oid, _ in self.options]
        if self.kind == "choice" and (len(self.gold) != 1 or not self.gold <= set(ids)):
            return "answer not among the options"
        if self.kind == "multi" and (not self.gold or not self.gold <= set(ids)):
            return "answer not among the options"
        if self.kind == "count" and (len(self.gold) != 1 or not next(iter(self.gold)).isdigit()):
            return "answer is not one count"
        if self.kind not in ("choice", "multi", "count", "trajectory"):
            return f"unknown answer kind {self.kind!r}"
        return None

    @property
    def asks(self) -> bool:
        """A question (what the blind gate's solvers answer), not a released trajectory."""
        return self.kind != "trajectory"


# why a row left with another row of its ``Item.together`` group
TOGETHER = "left out with the rest of its unit's rows of its family (they are released together)"


@dataclass(frozen=True)
class MediaRef:
    """One input a row shows a model, in prompt order."""

    label: str  # how the prompt names it ("Image 2", "reference image")
    path: str  # relative to the release folder
    # a video: the evaluator sends frames sampled from it (its family's ``media_policy``)
    fps: float | None = None


@dataclass(frozen=True)
class Mark:
    """A box a row's answer or reasoning places on one of its media, for people checking the row
    (the workbench draws it); never part of what a model is shown."""

    path: str  # one of the row's media paths
    box: tuple[float, float, float, float]  # normalized xyxy
    role: str  # "answer", "reference", or the reasoning step that names it ("S1 GND")


def box4(values: Sequence[float]) -> tuple[float, float, float, float]:
    """A normalized xyxy box as a 4-tuple (a stored list of another length is an error)."""
    if len(values) != 4:
        raise ValueError(f"a box has 4 numbers, got {len(values)}")
    x1, y1, x2, y2 = (float(v) for v in values)
    return x1, y1, x2, y2


@dataclass(frozen=True)
class CardPart:
    """A family's share of the dataset card."""

    funnel: list[str]  # release-funnel table lines counting its rows
    drops: list[str]  # funnel table lines of the rows it drops on its own
    files: list[tuple[str, str]]  # (file name, markdown list item describing it)
    notes: str = ""  # its answer rules, appended to the media-contract paragraph


@dataclass(frozen=True)
class PlanInputs:
    """What every family may plan from: the reviewed landmarks and the completed missions."""

    run_id: str
    scene_id: str
    engine: str
    seed: int
    scan: scan_pb2.ScanRequest
    store: BlobStore
    landmarks: list[ValidInstance]  # reviewed, ordered by instance id
    excluded: Mapping[str, str]  # units no family may release, with the reason
    missions: MissionIndex
    # which draw of the questions to plan: 0 first; a task the blind gate withheld is planned
    # again with the next, which must change only what is asked of the media (which candidate,
    # which distractors, which letters), never the media or their renders
    draw: int = 0

    @property
    def root(self) -> str:
        return keys.run_prefix(self.run_id)

    def rel(self, key: str) -> str:
        """A stored key as a path relative to the release folder."""
        return key.removeprefix(self.root + "/")


@dataclass
class Planned(Generic[R]):
    rows: list[R]
    env_requests: list[EnvRequest] = field(default_factory=list)
    overlays: list[OverlayRequest] = field(default_factory=list)
    clips: list[ClipRequest] = field(default_factory=list)  # videos cut where a question is asked
    degraded: list[DegradeRequest] = field(default_factory=list)  # views degraded by a recorded transform
    skipped: dict[str, str] = field(default_factory=dict)  # unit -> why it has no rows here
    missions: dict[str, str] = field(default_factory=dict)  # mission the rows use -> unit
    # files the plan records beside its rows (path under the run -> bytes), written with the
    # first draw's plan; a fresh draw of withheld tasks leaves them as they were
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Rendered:
    """What a family's check reads besides its rows: the environment observations as rendered
    (instance masks by request id) and the reviewed landmarks. ``requests`` are the observations
    as they were rendered, which may be first looks at a working size, in files of their own,
    rather than the planned requests a row was built from: take sizes and paths from them."""

    store: BlobStore
    run_id: str
    requests: Mapping[str, EnvRequest]
    masks: Mapping[str, np.ndarray]
    landmarks: Mapping[str, ValidInstance]
    degraded: Mapping[str, DegradeRequest] = field(default_factory=dict)  # by output image


@dataclass
class Checked(Generic[R]):
    rows: list[R]  # with what rendering decided filled in (e.g. boxes)
    failed: dict[str, str] = field(default_factory=dict)  # sample id -> reason; costs its unit
    uncertain: dict[str, str] = field(default_factory=dict)  # sample id -> reason; costs the row


@dataclass(frozen=True)
class Stored:
    """An export that is a file already in the store (a rendered video), by its path relative to
    the release folder; the release copies it instead of holding its bytes."""

    path: str
    content_type: str = "application/octet-stream"


Export = bytes | Stored


class ReleaseFamily(Protocol[R]):
    """What the QA stage needs of a family: what it plans, checks and releases."""

    name: str
    noun: str  # as in "8 image rows"
    manifest: str  # the name of its manifest among ``files``
    files: Mapping[str, str]  # release file name -> path under the run, with ``{scene}``
    row_model: type[R]
    unit_kind: str  # what a row is about (a landmark); each family releases a unit on its own rows
    # rows a released unit has from this family; None: its rows release one by one (a failed
    # row costs only itself)
    unit_rows: int | None
    rows_field: str | None  # the QC funnel field counting its released rows; None: family_rows
    funnel: Mapping[str, str]  # row drop reason -> the QC funnel field that counts it

    def hold(self, landmarks: Sequence[ValidInstance]) -> Mapping[str, str]:
        """Reviewed landmarks this family can never plan its rows for, with the reason, decided
        from what the review records alone (never the views' measured boxes); none for a family
        whose units are not landmarks. The stages after the review skip them."""
        ...

    def plan(self, inputs: PlanInputs) -> Planned[R]: ...

    def check(self, rows: list[R], rendered: Rendered) -> Checked[R]:
        """Structure, and every answer re-derived by a code path the planner does not use."""
        ...

    def balance(self, rows: list[R]) -> dict[str, str]:
        """Rows of released units to leave out so no answer is over-represented (id -> reason)."""
        ...

    def item(self, row: R) -> Item: ...

    def exports(self, rows: list[R]) -> Mapping[str, Export]:
        """Its files besides the manifest, by name in ``files``, or ``<name>/<path>`` for a file
        inside a folder named in ``files``."""
        ...

    def card(self, rel: Mapping[str, str], funnel: Funnel) -> CardPart:
        """``rel``: every release file by name, relative to the release folder."""
        ...

    def media(self, row: R) -> list[MediaRef]: ...

    def marks(self, row: R) -> list[Mark]:
        """The boxes its answer and reasoning place on its media; none when it has none."""
        ...

    metrics: Mapping[str, tuple[str, ...]]  # task -> its metrics, in report order


class TaskFamily(ReleaseFamily[R], Protocol[R]):
    """A family of questions: its rows are asked of vision-language models."""

    # -- evaluation: how a model is asked a row and how its reply is scored --

    groups: Mapping[str, tuple[str, ...]]  # task groups reported together (none: empty)
    # how its media reach a model, as its source benchmark sends them (endpoints may clip it)
    media_policy: MediaPolicy

    def difficulty(self, row: R) -> str:
        """The difficulty results are reported by."""
        ...

    def prompts(self, row: R) -> tuple[str, str]:
        """The system and the user prompt the row is asked with."""
        ...

    def steps(self, row: R) -> list[ReasoningStep]:
        """Its ground-truth reasoning steps (process-level protocols); none when it has none."""
        ...

    def parse(self, row: R, text: str) -> Parsed: ...

    def score(self, row: R, parsed: Parsed, steps: bool) -> dict[str, Any]:
        """Metric values of one reply; ``steps``: score the reasoning steps too."""
        ...

    def rotations(self, row: R) -> list[R]:
        """CircularEval's copies of the row, one per rotation of its options; none when its
        answers do not rotate."""
        ...

    def with_steps(self, row: R) -> R | None:
        """The row asking for its reasoning steps before the answer, or None without steps."""
        ...

    def guess(self, row: R, rng: np.random.Generator) -> dict[str, Any]:
        """A reply body drawn uniformly from the answer space: the chance level."""
        ...

    def prior(self, row: R, rows: Sequence[R]) -> dict[str, Any]:
        """A reply body from ``rows``' golds of other units alone: the text-only prior."""
        ...
