"""Stage-4 handoff: QA manifests (image and video rows), the render_requests sidecar, QC report.

Row fields keep UAV-DualCog's names (``label_options``, ``answer_option_id``,
``answer_bbox_xyxy_norm``, ``choice_options``, ``answer_items``, ``gold_environment_answer``);
additions are ``reasoning_steps`` (UltraVR-style process supervision) and ``checks`` (what
the independent geometry re-check computed).
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from skyqa.contracts.base import Contract
from skyqa.contracts.degradation import Degradation
from skyqa.contracts.missions import ElementInstance, FrameBehavior, FrameBoxNorm, SetInstance

Operation = Literal["GND", "PER", "QUA", "INT", "INF"]
ImageTask = Literal["self_where", "self_what", "env_where", "env_how"]
IMAGE_TASKS: tuple[ImageTask, ...] = get_args(ImageTask)


class Option(Contract):
    option_id: str
    label: str


class Candidate(Contract):
    option_id: str
    image: str
    view_under_definition: str
    bbox_xyxy_norm: list[float]


class ReasoningStep(Contract):
    question: str
    answer: str
    operation: Operation


class ImageRow(Contract):
    sample_id: str
    scene_id: str
    engine: str
    landmark_id: str
    landmark_category: str
    landmark_description: str
    task_family: str = "qa"
    task_group: Literal["self-aware", "environment-aware"]
    view_definition: Literal["Self-Aware", "Environment-Aware"]
    task_type: ImageTask
    task_display_name: str
    difficulty: Literal["4way", "8way"]
    reference_image: str
    reference_image_with_bbox: str
    reference_bbox_xyxy_norm: list[float]
    reference_object_view: str
    target_image: str
    images: list[str]  # in prompt order
    label_options: list[Option]
    answer_option_id: str
    answer_label: str
    answer_bbox_xyxy_norm: list[float]
    candidates: list[Candidate] = Field(default_factory=list)
    behavior_instance: str = ""
    metadata: dict[str, str | float | int | bool]
    reasoning_steps: list[ReasoningStep]
    prompt_text: str
    user_prompt: str
    system_prompt: str


class AnswerItem(Contract):
    option_id: str
    label: str
    intervals_sec: list[list[float]]


class VideoRow(Contract):
    sample_id: str
    scene_id: str
    engine: str
    form: Literal["self_instance_recognition_joint", "env_visibility_reasoning"]
    task_group: Literal["self-state", "environmental"]
    task_name: str
    task_display_name: str
    response_kind: Literal["choice_with_optional_intervals", "count_and_intervals"]
    mission_id: str
    mission_kind: Literal["atomic", "composite"]
    set_id: str
    set_name: str
    landmark_id: str
    landmark_category: str
    landmark_description: str
    reference_image_with_bbox: str
    reference_bbox_xyxy_norm: list[float]
    video_path: str
    fps: float
    frame_count: int
    duration_sec: float
    video_width: int
    video_height: int
    difficulty_score: float
    difficulty_band: str
    choice_options: list[Option] = Field(default_factory=list)
    multi_select: bool = False
    answer_option_ids: list[str] = Field(default_factory=list)
    answer_items: list[AnswerItem] = Field(default_factory=list)
    gold_environment_answer: dict[str, int | list[list[float]]] = Field(default_factory=dict)
    behavior_intervals_sec: list[dict[str, str | float]] = Field(default_factory=list)
    # the mission as UAV-DualCog's rows describe it (its label rebuilding and web read these)
    set_class: str = ""
    set_instance: SetInstance | None = None
    element_instances: list[ElementInstance] = Field(default_factory=list)
    element_sequence: list[str] = Field(default_factory=list)  # element classes in flight order
    mode_sequence: list[str] = Field(default_factory=list)
    event_sequence: list[str] = Field(default_factory=list)
    low_level_sequence: list[str] = Field(default_factory=list)  # behavior ids in flight order
    flight_description: str = ""
    keyframe_gt_dense: list[FrameBoxNorm] = Field(default_factory=list)  # landmark box per frame
    self_state_keyframe_gt_dense: list[FrameBehavior] = Field(default_factory=list)  # per second
    prompt_text: str
    user_prompt: str
    system_prompt: str


class ViewRequest(Contract):
    """A reviewed landmark's view rendered again at the shipped size from the pose the landmark
    stage recorded, into the file that stage wrote (``output_image``, with its segmentation and
    depth beside it)."""

    landmark_id: str
    view_id: str
    pose: list[float]  # x, y, z, yaw, pitch, roll
    width: int
    height: int
    fov_deg: float
    jpeg_quality: int
    output_image: str  # relative to the release folder, as the other two
    output_segmentation: str
    output_depth: str
    rendered_instance_id: int


class EnvRequest(Contract):
    """How an environment observation was (and is re-)rendered."""

    request_id: str
    landmark_id: str
    rendered_instance_id: int
    output_image: str
    output_segmentation: str
    width: int
    height: int
    fov_deg: float
    pose: list[float]  # x, y, z, yaw, pitch, roll
    source_view_id: str
    yaw_delta_deg: float
    pitch_delta_deg: float
    target_center_3d: list[float]
    target_aabb: list[list[float]]  # [min, max]


class OverlayRequest(Contract):
    output_image: str
    source_image: str
    bbox_xyxy_norm: list[float]


class ClipRequest(Contract):
    """A mission video cut after ``end_frame`` (a question asked at that moment), encoded from
    the mission's stored frames with its video settings; paths relative to the release."""

    output_video: str
    frames_prefix: str  # the mission's final_task folder
    end_frame: int  # inclusive
    fps: float
    width: int
    height: int
    bitrate: int


class DegradeRequest(Contract):
    """A view degraded by a recorded transform (:mod:`skyqa.degrade`) from a stored clean frame;
    paths relative to the release."""

    output_image: str
    source_image: str
    degradation: Degradation
    # a red box drawn on the degraded view (normalized xyxy): the region its question names
    # ("inside the red box drawn on UAV3's view"); empty: none
    marked: list[float] = Field(default_factory=list)


class RenderRequests(Contract):
    scene_id: str
    run_id: str
    backend: str
    env_requests: list[EnvRequest]
    overlays: list[OverlayRequest]
    clips: list[ClipRequest] = Field(default_factory=list)
    degraded: list[DegradeRequest] = Field(default_factory=list)
    # landmark views rendered again at the shipped size (none when views are checked there)
    views: list[ViewRequest] = Field(default_factory=list)
    # when a scan checks stills at a working size, every environment observation is first
    # rendered there, into files of its own; the release's sidecar then lists under
    # ``env_requests`` only the observations rendered again at the shipped size
    first_looks: list[EnvRequest] = Field(default_factory=list)


class ShippedObservations(Contract):
    """The landmarks whose environment observations were rendered again at the shipped size,
    chosen once, from their first looks, by the checks of the families that show them."""

    run_id: str
    landmarks: list[str]


class Funnel(Contract):
    candidates: int  # candidate (class, instance) pairs in the fused cloud
    collected: int  # landmarks with enough valid views (instances.json)
    reviewed: int  # kept and labelled (valid_instances.json)
    released_landmarks: int
    image_rows: int
    video_rows: int
    blind_withheld: int = 0  # rows of tasks (or units) the blind gate withheld
    count_balance_dropped: int = 0  # visibility rows of a count the kind already has enough of
    count_margin_dropped: int = 0  # visibility rows whose count changes within the rule's margin
    # landmarks one of whose rendered missions never shows them (the mission failed after its
    # render, where no re-plan follows): none of their rows is asked
    failed_mission_landmarks: int = 0
    video_share_dropped: int = 0  # video rows left out with another video row of their landmark
    # released rows of the task families that have no field above, by family
    family_rows: dict[str, int] = Field(default_factory=dict)


class SolverScore(Contract):
    score: float  # accuracy, or mean set-F1 for multi-select tasks, over the rows it answered
    ci: list[float]  # 95 %
    chance: float
    # one-sided against chance, Bonferroni over the tests of its task (or family); a trained
    # solver is tested on its prequential answers (each block of units answered by a fit on
    # the blocks before it: exact), its score is out of fold (one unit per fold up to ten)
    p_value: float
    raw_p: float = 1.0  # the same, unadjusted
    answered: int = 0  # rows it answered (a rule abstains where it does not apply)
    below_p: float | None = None  # rules: unadjusted p of scoring below chance (avoiding it wins)


class GateTest(Contract):
    """One test of a task or family: its unadjusted p and the line that says what leaks."""

    name: str
    p: float
    line: str


class TaskGate(Contract):
    kind: Literal["choice", "multi", "count"]
    family: str = ""
    rows: int
    units: int = 0
    chance: float = 0.0  # mean over its rows
    # withheld: a test rejected after the release-wide adjustment; unverified: its test could
    # not see a leak of the gate's minimum size; passed: neither
    status: Literal["passed", "withheld", "unverified"] = "passed"
    p_value: float = 1.0  # Bonferroni over its tests, then Benjamini-Hochberg over the release
    raw_p: float = 1.0  # Bonferroni over its tests
    detectable: float = 1.0  # the smallest leak over chance its test sees with 80 % power
    best_solver: str
    solvers: dict[str, SolverScore]
    tests: list[GateTest] = Field(default_factory=list)
    box_prior_acc50: float | None = None  # constant (mean) box, leave-one-unit-out
    box_prior_p: float | None = None
    label_counts: dict[str, dict[str, int]] = Field(default_factory=dict)  # difficulty -> label -> golds
    label_chi2_p: dict[str, float] = Field(default_factory=dict)  # difficulty -> p against the options
    failures: list[str] = Field(default_factory=list)
    draw: int = 0  # the family's draw of these rows (a withheld draw is planned again)


class FamilyGate(Contract):
    """Each solver's hits pooled over a family's tasks: a habit shared by tasks too small to
    show it alone."""

    tasks: list[str]
    solvers: dict[str, SolverScore]
    p_value: float = 1.0
    raw_p: float = 1.0
    failures: list[str] = Field(default_factory=list)


class BlindGate(Contract):
    """What solvers that never see a pixel score on the release, what it withheld and why."""

    mode: Literal["enforce", "report"]
    passed: bool  # nothing withheld
    alpha: float
    box_prior_max: float
    correction: str = (
        "Bonferroni within a task or family; Benjamini-Hochberg across tasks, then across "
        "families pooled over the tasks left with Benjamini-Bogomolov within them, each at half "
        "the level"
    )
    tests: int = 0  # tasks and families adjusted together
    min_leak: float = 0.10  # below this detectable leak a task is unverified
    failures: list[str]
    withheld: dict[str, list[str]] = Field(default_factory=dict)  # task -> reasons
    withheld_units: dict[str, str] = Field(default_factory=dict)  # unit -> reason
    withheld_rows: int = 0
    withheld_by_family: dict[str, int] = Field(default_factory=dict)
    unverified: list[str] = Field(default_factory=list)
    redrawn: dict[str, int] = Field(default_factory=dict)  # task -> the draw released
    replaced_rows: int = 0  # rows of redrawn tasks' earlier draws (withheld in the ledger)
    tasks: dict[str, TaskGate]
    families: dict[str, FamilyGate] = Field(default_factory=dict)


class QCRow(Contract):
    """One line of ``qc_rows.jsonl``: a row the release checked, what became of it and which of
    the blind gate's solvers answered it without pixels. The workbench lists and filters these;
    the rows themselves are in the family manifests (released) or the QA plan (dropped)."""

    sample_id: str
    family: str
    task: str
    unit: str
    category: str
    difficulty: str
    kind: str
    # withheld: clean, but the blind gate withheld its task (or unit), or released nothing
    status: Literal["released", "dropped", "withheld"]
    reason: str = ""  # why it was dropped or withheld
    # how many of the blind solvers answered it: none, some, or all of those that answered its
    # row; "not scored": the gate never asked it (dropped before the gate, not a question, or
    # its task has rows of one unit, so no fold can learn from another)
    blind: Literal["not scored", "none", "some", "all"]
    blind_right: list[str] = Field(default_factory=list)  # the solvers that answered it right
    prompt: str  # its opening (the first 400 characters), for listing
    options: list[tuple[str, str]] = Field(default_factory=list)  # (option id, label)
    gold: list[str] = Field(default_factory=list)  # option ids, or the count
    box: list[float] = Field(default_factory=list)  # the answer box, normalized xyxy
    media: list[str] = Field(default_factory=list)  # what it shows, relative to the release


class AuditAnswer(Contract):
    """One person's reply to one row of the human answerability audit, as stored under the
    release (``qc_audit/answers/<user>/<sample id>.json``): who, when, what."""

    sample_id: str
    user: str  # the name the auditor signed in to the workbench with
    answered_at: float  # unix seconds
    reply: list[str]  # option ids (one for a single choice), or the count as text


class AuditSample(Contract):
    """The rows the audit asks (``qc_audit/sample.json``): the first ``per_stratum`` released
    questions of every (family, task) in an order seeded by ``seed``, the release's run id."""

    seed: str
    per_stratum: int
    rows: list[str]


class AuditDisagreement(Contract):
    sample_id: str
    family: str
    task: str
    user: str
    reply: list[str]
    gold: list[str]


class AuditTask(Contract):
    """Agreement of people with the gold on one task: a row two people answered counts twice."""

    family: str
    sampled: int  # rows of the task in the sample
    answered: int
    agreed: int
    agreement: float
    ci: list[float]  # Wilson 95 % interval of the agreement


class AuditReport(Contract):
    """The human answerability audit: a stratified sample of the released questions answered
    in the workbench from the prompt and media a model gets, against the gold."""

    per_stratum: int  # rows sampled per (family, task); 0: no sample record
    seed: str  # the release (run) id the sample is drawn with
    sampled: int  # rows in the sample
    answers: int
    users: list[str]
    tasks: dict[str, AuditTask]  # task -> agreement
    disagreements: list[AuditDisagreement]  # every answer that differs from the gold


class QCReport(Contract):
    scene_id: str
    run_id: str
    funnel: Funnel
    blind_gate: BlindGate
    category_mix: dict[str, int]  # released landmarks per category
    checked_rows: int
    dropped_rows: int
    drop_reasons: dict[str, int]
    dropped_landmarks: dict[str, str]  # units no family released, with the first one's reason
    # units some family released and another left out: "<noun> rows: <why>" per family
    partly_released: dict[str, str] = Field(default_factory=dict)
    answer_letter_balance: dict[str, dict[str, float]]
    max_option_similarity: float
    duplicate_questions: int
    task_quota: int = 0  # the rows each question task type should have (the scan's task_quota)
    task_rows: dict[str, int] = Field(default_factory=dict)  # released rows per task planned
    shortfall: dict[str, str] = Field(default_factory=dict)  # task -> why it has fewer than the quota
    audit: AuditReport | None = None  # the human answerability audit, once anyone answered
