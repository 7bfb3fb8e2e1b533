"""The ledger's events: one closed, versioned pydantic model per kind.

The ledger refuses a payload that does not validate against its kind's model, so what a
campaign folds back is always a known shape. Each payload carries its version (``v``); a
payload without one was written by attune 0.1, whose shapes are version 1. When a shape
changes, its model's ``VERSION`` goes up and ``UPCASTERS`` gains a function from the old shape,
so every ledger ever written still reads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.event_base import Event as Event  # re-exported: every kind derives from it
from gate.events_agent import (
    AgentAssumption,
    ConversationTrimmed,
    ModelCalled,
    ToolFinished,
    ToolStarted,
)
from gate.events_campaign import CampaignOpened as CampaignOpened
from gate.events_campaign import ProposalRefused
from gate.events_judgement import JUDGEMENT_MODELS, Phase, TrialJudged
from gate.events_lessons import LessonsProposed
from gate.events_prediction import PredictionMade
from gate.models import KeyClass, ProfileBreakdown, TrialStatus, Verdict

Role = Literal["calibration", "profile", "candidate", "layout_check"] | Phase
"""Why a trial runs; layout_check: a layout-only variant calibrating the post-launch checks
(``bot/campaign/check_calibration.py``); ``Phase``: the judgement's extra runs
(``docs/judgement.md``)."""
StopReason = Literal[
    "budget",
    "exhausted",
    "max_trials",
    "baseline_failed",
    "requested",
    "head_moved",
    "permission",
    "error",
    "agent_error",
    "agent_spend_cap",
]
"""Why a campaign ended; ``requested``, ``head_moved``, ``permission``, ``error``: GitHub mode;
``agent_error`` (the model's API failing past its retries, or no valid decision in the turns
allowed) and ``agent_spend_cap`` (the LLM spend cap reached): the LLM agent, resumable."""
RESUMABLE: frozenset[StopReason] = frozenset(
    {"requested", "error", "permission", "agent_error", "agent_spend_cap"}
)
"""Stop reasons a resume may undo (``attune tune --resume``, ``/attune resume``); the others
mean the campaign is finished."""
Decision = Literal["merge", "close"]
RefusalReason = Literal["budget", "failed_rerun", "gate_check", "predicted_oom", "resources"]


class ForgeReady(Event):
    KIND = "forge_ready"
    tuned_pr: int
    tuned_branch: str
    base_sha: str


class NoiseCalibrated(Event):
    KIND = "noise_calibrated"
    runs: int
    mean: float
    std: float
    cv: float
    threshold: float
    scores: list[float]


class ChecksCalibrated(Event):
    """The post-launch checks' reference (``gate.postlaunch_reference.PostLaunchReference``),
    calibrated from the baseline's runs and its layout-only variants."""

    KIND = "checks_calibrated"
    step1_loss: float
    step1_grad_norm: float | None
    grad_norm_tolerance: float
    losses: list[float]
    loss_band: list[float]
    runs: list[str]
    variants: list[str]
    notes: list[str]


class ProfileRequested(Event):
    KIND = "profile_requested"
    trial: str
    reason: str
    incumbent: str


class CandidateProposed(Event):
    KIND = "candidate_proposed"
    trial: str
    n: int
    title: str
    lever: list[str]
    changes: dict[str, tuple[Any, Any]]
    coupled: bool
    bottleneck: str
    mechanism: str
    expected_gain_pct: float
    sources: list[str]
    recipe_text: str
    lessons_used: list[str] = Field(default_factory=list)
    """Ids of the experience bank's lessons the hypothesis relies on (none before 0.2)."""


class PrOpened(Event):
    KIND = "pr_opened"
    trial: str
    pr: int
    branch: str
    head_sha: str


class FindingRecord(BaseModel):
    """One changed key as the gate classified it (``attune gate check --json``'s shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    key: str
    baseline: Any = None
    candidate: Any = None
    key_class: KeyClass = Field(alias="class")
    reason: str
    source: str | None = None
    derived: bool = False


class GateChecked(Event):
    KIND = "gate_checked"
    trial: str
    recipe: str
    fingerprint: str
    verdict: Verdict
    findings: list[FindingRecord]


class LaunchRefused(Event):
    KIND = "launch_refused"
    trial: str
    fingerprint: str
    reason: RefusalReason
    message: str


class TrialStarted(Event):
    KIND = "trial_started"
    trial: str
    role: Role
    recipe: str
    fingerprint: str
    devices: int
    forecast_device_seconds: float
    profile: bool
    predicted_peak_bytes: int | None = None


class HandleRecord(BaseModel):
    """What a restarted bot needs to find a launch again: the backend's handle
    (``runners.local.RunHandle`` is this class)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    backend: str
    pid: int
    """The local supervisor's pid (0 elsewhere)."""
    workdir: str
    allocated_at: float
    """Unix time the devices were taken (just before the supervisor started); for a cluster
    job, the submission (its real allocation comes from the cluster when it is over)."""
    job_id: int | None = None
    """A cluster job's id (Slurm): how a restarted bot finds the run again."""
    timeout_s: float | None = None
    """The wall-clock limit a cluster backend enforces itself, after a restart too."""
    hang_timeout_s: float | None = None
    """No new output for this long and a cluster backend cancels the job as hung."""


class LaunchRecord(BaseModel):
    """A started benchmark: everything needed to turn its outcome into a result, even in
    another bot process (``runners.bench.Launch`` is this class; ``trial_launched`` is it
    with the trial id)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    recipe: str
    framework: str
    fingerprint: str
    steps: int
    warmup: int
    devices: int
    profile_trace: str | None
    handle: HandleRecord
    metrics_context: dict[str, int] = Field(default_factory=dict)
    """The adapter's context for parsing the launch's metrics."""
    harness: list[str] = Field(default_factory=list)
    """The benchmark harness's own arguments (GPU frameworks)."""
    overridden: list[str] = Field(default_factory=list)
    """The recipe's own arguments the harness replaced."""


class TrialLaunched(Event, LaunchRecord):
    KIND = "trial_launched"
    trial: str


class TrialFinished(Event):
    KIND = "trial_finished"
    trial: str
    recipe: str
    fingerprint: str
    status: TrialStatus
    score: float | None
    step1_loss: float | None
    error: str | None
    allocated_at: float
    released_at: float
    devices: int
    device_seconds: float
    profile: ProfileBreakdown | None = None
    reconciled: bool = False
    run_id: int | None = None
    """GitHub mode: the workflow run that benchmarked it."""
    peak_memory_bytes: int | None = None
    """The largest peak memory its step records report (GPU frameworks: per device)."""
    nodes: list[str] | None = None
    """The machines that ran it, when the backend knows (Slurm's node names)."""
    interrupted: bool = False
    """Ended by something other than the recipe: charged, but no verdict on the recipe."""


class TrialAbandoned(Event):
    KIND = "trial_abandoned"
    trial: str
    reason: str


class PrMerged(Event):
    KIND = "pr_merged"
    trial: str
    pr: int
    sha: str


class PrClosed(Event):
    KIND = "pr_closed"
    trial: str
    pr: int


class CampaignStopped(Event):
    KIND = "campaign_stopped"
    reason: StopReason
    evidence: list[str]


class CampaignResumed(Event):
    KIND = "campaign_resumed"
    by: str


MODELS: dict[str, type[Event]] = {
    model.KIND: model
    for model in (
        CampaignOpened,
        ForgeReady,
        NoiseCalibrated,
        ChecksCalibrated,
        ProfileRequested,
        CandidateProposed,
        PrOpened,
        GateChecked,
        LaunchRefused,
        TrialStarted,
        TrialLaunched,
        TrialFinished,
        TrialAbandoned,
        TrialJudged,
        PrMerged,
        PrClosed,
        CampaignStopped,
        CampaignResumed,
        LessonsProposed,
        ModelCalled,
        AgentAssumption,
    )
}
MODELS.update((model.KIND, model) for model in JUDGEMENT_MODELS)
"""Kind -> its model; the closed list of event kinds."""
MODELS.update((m.KIND, m) for m in (ToolStarted, ToolFinished, ConversationTrimmed))
MODELS[ProposalRefused.KIND] = ProposalRefused
MODELS[PredictionMade.KIND] = PredictionMade
"""``prediction_made``: the step-time model's prediction of a run, before it launches."""
