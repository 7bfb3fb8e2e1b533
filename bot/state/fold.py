"""Fold a campaign's ledger events back into its state: the only memory a campaign has."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from bot.interfaces import AgentView, HistoryItem
from bot.state.judgement import KINDS as JUDGEMENT_KINDS
from bot.state.judgement import JudgementState
from gate import budget
from gate.events import CampaignOpened
from gate.ledger import LedgerEvent
from gate.models import EffectiveConfig, NoiseModel, ProfileBreakdown
from gate.postlaunch_reference import PostLaunchReference
from gate.registry import Registry

CampaignParams = CampaignOpened
"""What the campaign was asked to do: its ``campaign_opened`` event."""


class TrialRecord(BaseModel):
    """Everything the ledger says about one trial id."""

    trial: str
    role: str | None = None
    proposal: dict[str, Any] | None = None
    pr: int | None = None
    head_sha: str | None = None
    """The candidate commit the pull request was opened with: what is benchmarked and merged."""
    branch: str | None = None
    """The candidate's branch."""
    base_sha: str | None = None
    """The tuned head the candidate was cut from (the campaign's pinned head then)."""
    predicted_peak_bytes: int | None = None
    """The memory model's prediction when it was started (GPU frameworks)."""
    gate_verdict: str | None = None
    gate_findings: list[dict[str, Any]] = Field(default_factory=list)
    """The gate's findings, as ``gate_checked`` recorded them."""
    refused: dict[str, Any] | None = None
    started: bool = False
    launch: dict[str, Any] | None = None
    finished: dict[str, Any] | None = None
    judged: dict[str, Any] | None = None
    merged_sha: str | None = None
    closed: bool = False
    device_seconds: float = 0.0
    """What its runs were charged (``budget.trial_charge``); 0 while none finished."""

    @property
    def pending_launch(self) -> bool:
        """Started and not finished: a restart must reconcile it."""
        return self.started and self.finished is None

    @property
    def done(self) -> bool:
        """Nothing left to do for this trial."""
        if self.role != "candidate":
            return self.finished is not None
        return self.merged_sha is not None or self.closed


class CampaignState(BaseModel):
    campaign: str
    params: CampaignParams | None = None
    tuned_pr: int | None = None
    tuned_branch: str | None = None
    pinned_sha: str | None = None
    """Head of the tuned branch the campaign expects; moves only with its own merges."""
    trials: dict[str, TrialRecord] = Field(default_factory=dict)
    """In ledger order."""
    noise: NoiseModel | None = None
    checks_reference: PostLaunchReference | None = None
    """What the post-launch checks compare candidates with (``checks_calibrated``); None
    before it is calibrated, or in a ledger written before it existed."""
    profiles: dict[str, ProfileBreakdown] = Field(default_factory=dict)
    """Incumbent id -> its latest profile."""
    profile_scores: dict[str, list[float]] = Field(default_factory=dict)
    """Incumbent id -> scores of its profile runs (their scored steps precede profiling)."""
    incumbent: str = "baseline"
    """``baseline`` or the id of the last merged candidate."""
    stopped: dict[str, Any] | None = None
    spent_device_seconds: float = 0.0
    profile_requests: dict[str, str] = Field(default_factory=dict)
    """Profile trial id -> incumbent it profiles."""
    tried: set[str] = Field(default_factory=set)
    """Fingerprints of every effective config gated or started: the agent never repeats one."""
    acting_for: str | None = None
    """Who the campaign acts for: the user who started it, or who last resumed it."""
    lessons_proposed: dict[str, Any] | None = None  # the end-of-campaign lessons pull request
    judgement: JudgementState = Field(default_factory=JudgementState)
    """A/B re-measurements, recalibrations, the final confirmation (``docs/judgement.md``)."""
    llm: dict[str, float] = Field(default_factory=dict)
    """The LLM agent's model calls: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``."""
    assumptions: list[str] = Field(default_factory=list)
    """The questions the LLM agent was told to answer with the default (``agent_assumption``)."""
    refused_proposals: list[dict[str, Any]] = Field(default_factory=list)
    """Moves refused before they became candidates (``proposal_refused``): no candidate id."""

    def trial(self, trial: str) -> TrialRecord:
        return self.trials.setdefault(trial, TrialRecord(trial=trial))

    def role_trials(self, role: str) -> list[TrialRecord]:
        return [t for t in self.trials.values() if t.role == role]

    @property
    def calibration_scores(self) -> list[float]:
        return [
            float(t.finished["score"])
            for t in self.role_trials("calibration")
            if t.finished and t.finished["status"] == "ok" and t.finished["score"] is not None
        ]

    @property
    def baseline_step1_loss(self) -> float | None:
        for t in self.role_trials("calibration"):
            if t.finished and t.finished.get("step1_loss") is not None:
                return float(t.finished["step1_loss"])
        return None

    @property
    def incumbent_score(self) -> float | None:
        """The baseline's calibrated mean, or the mean of every run of the last winner (its
        candidate run and the profile runs of it): one lucky run must not set the bar."""
        if self.incumbent == "baseline":
            return self.noise.mean if self.noise else None
        return self.winner_score(self.incumbent)

    def winner_score(self, trial: str) -> float | None:
        """The mean of every run of a merged candidate: its own and the profile runs of it."""
        record = self.trials.get(trial)
        if record is None or not record.finished or record.finished["score"] is None:
            return None
        scores = [float(record.finished["score"]), *self.profile_scores.get(trial, [])]
        scores += self.judgement.extra_scores(trial, self.trials)  # its A/B and recalibration runs
        return sum(scores) / len(scores)

    @property
    def speedup(self) -> float | None:
        """The incumbent's score over the baseline's mean: the one speedup every surface (the
        console, report.md and its plot, the campaign comment, ``/attune status``) prints."""
        score = self.incumbent_score
        if score is None or self.noise is None or self.noise.mean <= 0:
            return None
        return score / self.noise.mean

    @property
    def incumbent_recipe_text(self) -> str:
        if self.incumbent == "baseline":
            return self.params.recipe_text if self.params else ""
        proposal = self.trials[self.incumbent].proposal
        assert proposal is not None
        return str(proposal["recipe_text"])

    @property
    def harness(self) -> tuple[list[str], list[str]]:
        """The benchmark harness's arguments and the recipe's own ones they replaced, as the
        first launch recorded them (the same for every trial); empty without a harness."""
        for t in self.trials.values():
            if t.launch and t.launch.get("harness"):
                return list(t.launch["harness"]), list(t.launch.get("overridden") or [])
        return [], []

    @property
    def runs_by_status(self) -> dict[str, int]:
        """Finished trials by their status (ok, failed, oom, nan, timeout, ...)."""
        return dict(Counter(str(t.finished["status"]) for t in self.trials.values() if t.finished))

    @property
    def candidates(self) -> list[TrialRecord]:
        return self.role_trials("candidate")


def fold(campaign: str, events: list[LedgerEvent]) -> CampaignState:
    """Replay ``events`` (one campaign's, in order) into its state."""
    state = CampaignState(campaign=campaign)
    for event in events:
        p = event.payload
        kind = event.kind
        if kind == "campaign_opened":
            state.params = CampaignParams.model_validate(p)
            state.acting_for = state.params.by
        elif kind == "forge_ready":
            state.tuned_pr, state.tuned_branch = p["tuned_pr"], p["tuned_branch"]
            state.pinned_sha = p["base_sha"]
        elif kind == "noise_calibrated":
            state.noise = NoiseModel.model_validate(p)
        elif kind == "checks_calibrated":
            state.checks_reference = PostLaunchReference.model_validate(
                {k: v for k, v in p.items() if k != "v"}
            )
        elif kind == "campaign_stopped":
            state.stopped = p
        elif kind == "lessons_proposed":
            state.lessons_proposed = p
        elif kind == "campaign_resumed":
            state.stopped = None
            state.acting_for = p["by"] or state.acting_for
        elif kind == "model_called":
            for key in ("input_tokens", "output_tokens", "cost_usd"):
                state.llm[key] = state.llm.get(key, 0) + p[key]
            state.llm["calls"] = state.llm.get("calls", 0) + 1
        elif kind == "proposal_refused":
            state.refused_proposals.append(p)
            state.tried.add(p["fingerprint"])
        elif kind == "agent_assumption":
            state.assumptions.append(p["question"])
        elif kind in JUDGEMENT_KINDS:
            state.judgement.apply(kind, p)
        elif "trial" in p:
            _fold_trial(state, kind, p)
    state.spent_device_seconds = sum((t.device_seconds for t in state.trials.values()), 0.0)
    return state


def _fold_trial(state: CampaignState, kind: str, p: dict[str, Any]) -> None:
    record = state.trial(p["trial"])
    if kind == "profile_requested":
        record.role = "profile"
        state.profile_requests[record.trial] = p["incumbent"]
    elif kind == "candidate_proposed":
        record.role, record.proposal = "candidate", p
    elif kind == "pr_opened":
        record.pr = p["pr"]
        record.head_sha = p["head_sha"]
        record.branch = p["branch"]
        record.base_sha = state.pinned_sha
    elif kind == "gate_checked":
        record.gate_verdict, record.gate_findings = p["verdict"], p["findings"]
        state.tried.add(p["fingerprint"])
    elif kind == "launch_refused":
        record.refused = p
    elif kind == "trial_started":
        if p["role"] != "layout_check":  # a calibration variant is no move the agent made
            state.tried.add(p["fingerprint"])
        record.predicted_peak_bytes = p.get("predicted_peak_bytes")
        record.role = record.role or p["role"]
        record.started, record.launch, record.finished = True, None, None
    elif kind == "trial_launched":
        record.launch = p
    elif kind == "trial_abandoned":
        record.started, record.launch = False, None
    elif kind == "trial_finished":
        record.finished = p
        record.device_seconds += budget.charge(p)
        profile = p.get("profile")
        if record.role == "profile" and profile:
            incumbent = state.profile_requests.get(record.trial, state.incumbent)
            state.profiles[incumbent] = ProfileBreakdown.model_validate(profile)
            if p.get("score") is not None:
                state.profile_scores.setdefault(incumbent, []).append(float(p["score"]))
    elif kind == "trial_judged":
        record.judged = p
    elif kind == "pr_merged":
        record.merged_sha = p["sha"]
        state.pinned_sha = p["sha"]
        state.incumbent = record.trial
    elif kind == "pr_closed":
        record.closed = True


def history(state: CampaignState) -> list[HistoryItem]:
    """What became of each proposal, for the agent (gain: the A/B mean where it ran)."""
    items = []
    for t in state.candidates:
        p, j = t.proposal or {}, t.judged or {}
        items.append(
            HistoryItem(
                trial=t.trial,
                changes={k: tuple(v) for k, v in p.get("changes", {}).items()},
                status=(t.finished or {}).get("status"),
                decision=j.get("decision"),
                gain=j["paired_mean"] if j.get("paired_mean") is not None else j.get("gain"),
                reason=j.get("reason", ""),
            )
        )
    return items


def agent_view(
    state: CampaignState,
    incumbent: EffectiveConfig,
    registry: Registry,
    *,
    forecast_s: float,
    cores: int,
) -> AgentView:
    """What the agent may see: never the ledger, the forge or the registry file itself."""
    assert state.params is not None
    return AgentView(
        framework=incumbent.framework,
        incumbent=state.incumbent,
        incumbent_values=incumbent.values,
        profile=state.profiles.get(state.incumbent),
        history=history(state),
        layout_sources={
            k: e.source for k, e in registry.data.keys.items() if e.key_class == "layout"
        },
        threshold=(state.judgement.noise or state.noise).threshold if state.noise else 0.03,
        budget_left_s=state.params.budget_device_hours * 3600 - state.spent_device_seconds,
        forecast_s=forecast_s,
        cores=cores,
    )
