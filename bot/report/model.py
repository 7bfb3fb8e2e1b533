"""The report's data: one row per candidate and per run, the incumbent's steps, the outcome."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from gate.models import NoiseModel
from gate.postlaunch_reference import PostLaunchReference
from gate.sequential import Interval

NO_CHANGE = "no change merged"


class Hypothesis(BaseModel):
    """Why the agent expected a lever to help, from ``candidate_proposed``."""

    bottleneck: str = ""
    mechanism: str = ""
    expected_gain_pct: float | None = None
    sources: list[str] = Field(default_factory=list)
    lessons: list[str] = Field(default_factory=list)
    """Ids of the experience bank's lessons it relied on (``lessons_used``)."""


class CandidateRow(BaseModel):
    """One candidate trial, from proposal to decision."""

    trial: str
    pr: int | None = None
    lever: str = ""
    """Lever keys joined with `` + ``."""
    changes: dict[str, list[Any]] = Field(default_factory=dict)
    """key -> [from, to]."""
    hypothesis: Hypothesis = Field(default_factory=Hypothesis)
    recipe_text: str | None = None
    verdict: str | None = None
    findings: list[dict[str, Any]] = Field(default_factory=list)
    refusal_reason: str | None = None
    refusal: str | None = None
    """The ``launch_refused`` message."""
    status: str | None = None
    score: float | None = None
    gain: float | None = None
    """Relative gain over the incumbent at judgement (0.1 = +10%)."""
    decision: str | None = None
    reason: str | None = None
    merged: bool = False
    closed: bool = False
    device_seconds: float = 0.0
    """0 when the trial never launched."""

    @property
    def outcome(self) -> str:
        """merged, rejected, refused, failed, closed, merge_pending or pending."""
        if self.merged:
            return "merged"
        if self.verdict == "reject":
            return "rejected"
        if self.refusal is not None:
            return "refused"
        if self.status not in (None, "ok"):
            return "failed"
        if self.closed or self.decision == "close":
            return "closed"
        return "merge_pending" if self.decision == "merge" else "pending"


class RunRow(BaseModel):
    """A calibration or profile run of the baseline or incumbent (or a run of unknown role)."""

    trial: str
    role: str
    status: str | None = None
    score: float | None = None
    device_seconds: float = 0.0
    profile: dict[str, Any] | None = None


class IncumbentStep(BaseModel):
    """The incumbent from this trial on; ``baseline`` is the calibrated mean."""

    trial: str
    score: float


class CampaignReport(BaseModel):
    """Everything the report shows, folded from the ledger; missing events leave gaps."""

    campaign: str = ""
    baseline: str | None = None
    recipe_path: str | None = None
    noise: NoiseModel | None = None
    checks: PostLaunchReference | None = None
    """The post-launch checks' reference (``checks_calibrated``); None before it."""
    candidates: list[CandidateRow] = Field(default_factory=list)
    runs: list[RunRow] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)
    """Every trial id, in the order the ledger first names it."""
    incumbent: list[IncumbentStep] = Field(default_factory=list)
    speedup: float | None = None
    """Final incumbent score / baseline noise mean; None before calibration."""
    device_seconds: float = 0.0
    """All finished trials, every status."""
    device_hours: float = 0.0
    budget_device_hours: float | None = None
    simulation: dict[str, Any] | None = None
    """``--backend sim``: the simulated cluster's parameters; the report says SIMULATED."""
    stopped: bool = False
    stop_reason: str | None = None
    evidence: list[str] = Field(default_factory=list)
    final_trial: str | None = None
    """The last merged candidate, whose recipe is the tuned one."""
    harness: list[str] = Field(default_factory=list)
    """The benchmark harness's arguments (GPU frameworks), the same for every trial."""
    overridden: list[str] = Field(default_factory=list)
    """The recipe's own arguments the harness replaced."""
    recipe_diff: str = ""
    """Unified diff baseline -> tuned recipe; empty when no change was merged."""
    lessons_read: bool = True
    """False: opened with ``--no-lessons``."""
    lessons_proposed: dict[str, Any] | None = None
    """The ``lessons_proposed`` event: the lessons pull request at the end."""
    llm: dict[str, float] = Field(default_factory=dict)
    """The LLM agent's calls, tokens and dollars (``CampaignState.llm``); empty without one."""
    assumptions: list[str] = Field(default_factory=list)
    """Questions the LLM agent asked and was told to answer with the default."""
    confirmation: Interval | None = None
    """The winner's speedup over the baseline from interleaved pairs, with its interval."""
    judgement: list[str] = Field(default_factory=list)
    """The judgement section's Markdown lines (``bot/report/judgement.py``)."""
    predictions: list[str] = Field(default_factory=list)
    """The predicted-vs-measured section's Markdown lines (``bot/report/predictions.py``)."""
