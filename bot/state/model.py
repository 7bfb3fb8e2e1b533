"""A campaign's state as the fold leaves it: its trials, each as the typed events the ledger
holds about it, and what the campaign as a whole has measured and decided."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from bot.state.judgement import JudgementState, ok_score
from gate.events import (
    CampaignOpened,
    CampaignStopped,
    CandidateProposed,
    FindingRecord,
    LaunchRefused,
    TrialFinished,
    TrialLaunched,
)
from gate.events_campaign import ProposalRefused
from gate.events_judgement import TrialJudged
from gate.events_lessons import LessonsProposed
from gate.events_prediction import PredictionMade
from gate.models import NoiseModel, ProfileBreakdown
from gate.postlaunch_reference import PostLaunchReference

CampaignParams = CampaignOpened
"""What the campaign was asked to do: its ``campaign_opened`` event."""


class TrialRecord(BaseModel):
    """Everything the ledger says about one trial id, as its typed events."""

    trial: str
    role: str | None = None
    proposal: CandidateProposed | None = None
    pr: int | None = None
    head_sha: str | None = None
    """The candidate commit the pull request was opened with: what is benchmarked and merged."""
    branch: str | None = None
    """The candidate's branch."""
    base_sha: str | None = None
    """The tuned head the candidate was cut from (the campaign's pinned head then)."""
    predicted_peak_bytes: int | None = None
    """The memory model's prediction when it was started (GPU frameworks)."""
    prediction: PredictionMade | None = None
    """The step-time model's prediction before its (latest) launch (``prediction_made``)."""
    gate_verdict: str | None = None
    gate_findings: list[FindingRecord] = Field(default_factory=list)
    """The gate's findings, as ``gate_checked`` recorded them."""
    refused: LaunchRefused | None = None
    started: bool = False
    launch: TrialLaunched | None = None
    finished: TrialFinished | None = None
    judged: TrialJudged | None = None
    merged_sha: str | None = None
    closed: bool = False
    device_seconds: float = 0.0
    """What its runs were charged (``budget.charge``); 0 while none finished."""

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
    incumbent: str = "baseline"
    """``baseline`` or the id of the last merged candidate."""
    stopped: CampaignStopped | None = None
    spent_device_seconds: float = 0.0
    profile_requests: dict[str, str] = Field(default_factory=dict)
    """Profile trial id -> incumbent it profiles."""
    tried: set[str] = Field(default_factory=set)
    """Fingerprints of every effective config gated or started: the agent never repeats one."""
    acting_for: str | None = None
    """Who the campaign acts for: the user who started it, or who last resumed it."""
    lessons_proposed: LessonsProposed | None = None
    """The end-of-campaign lessons pull request."""
    judgement: JudgementState = Field(default_factory=JudgementState)
    """A/B re-measurements, recalibrations, the final confirmation (``docs/judgement.md``)."""
    llm: dict[str, float] = Field(default_factory=dict)
    """The LLM agent's model calls: ``calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``."""
    assumptions: list[str] = Field(default_factory=list)
    """The questions the LLM agent was told to answer with the default (``agent_assumption``)."""
    refused_proposals: list[ProposalRefused] = Field(default_factory=list)
    """Moves refused before they became candidates (``proposal_refused``): no candidate id."""

    def trial(self, trial: str) -> TrialRecord:
        return self.trials.setdefault(trial, TrialRecord(trial=trial))

    def role_trials(self, role: str) -> list[TrialRecord]:
        return [t for t in self.trials.values() if t.role == role]

    @property
    def calibration_scores(self) -> list[float]:
        scores = (ok_score(t.finished) for t in self.role_trials("calibration"))
        return [s for s in scores if s is not None]

    @property
    def baseline_step1_loss(self) -> float | None:
        for t in self.role_trials("calibration"):
            if t.finished and t.finished.step1_loss is not None:
                return t.finished.step1_loss
        return None

    @property
    def incumbent_score(self) -> float | None:
        """The baseline's calibrated mean, or the mean of every run of the last winner (its
        candidate run and the profile runs of it): one lucky run must not set the bar."""
        if self.incumbent == "baseline":
            return self.noise.mean if self.noise else None
        return self.winner_score(self.incumbent)

    def winner_score(self, trial: str) -> float | None:
        """The mean of every run of a merged candidate (``winner_runs``); None while its own
        run has no score that counts."""
        runs = self.winner_runs(trial)
        if not runs or runs[0][0] != trial:
            return None
        return sum(s for _, s in runs) / len(runs)

    def winner_runs(self, trial: str) -> list[tuple[str, float]]:
        """(trial, score) of every run a merged candidate's score is the mean of, each counted
        by the one rule (``ok_score``): its own run, the profile runs of it (their scored steps
        precede profiling) and the extra runs of its recipe (A/B arms, recalibration)."""
        runs = [trial]
        runs += [p for p, of in self.profile_requests.items() if of == trial]
        runs += self.judgement.runs_of_recipe(trial)
        scored = [(r, ok_score(self.trials[r].finished)) for r in runs if r in self.trials]
        return [(r, s) for r, s in scored if s is not None]

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
        return proposal.recipe_text

    @property
    def harness(self) -> tuple[list[str], list[str]]:
        """The benchmark harness's arguments and the recipe's own ones they replaced, as the
        first launch recorded them (the same for every trial); empty without a harness."""
        for t in self.trials.values():
            if t.launch and t.launch.harness:
                return list(t.launch.harness), list(t.launch.overridden)
        return [], []

    @property
    def runs_by_status(self) -> dict[str, int]:
        """Finished trials by their status (ok, failed, oom, nan, timeout, ...)."""
        return dict(Counter(t.finished.status for t in self.trials.values() if t.finished))

    @property
    def candidates(self) -> list[TrialRecord]:
        return self.role_trials("candidate")
