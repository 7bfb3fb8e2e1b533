"""Ledger events of the sharper judgement (``docs/judgement.md``): the extra runs it asks for
(A/B re-measurement of a candidate, recalibration of a new incumbent's noise, the final
confirmation of the winner against the baseline) and what they concluded.

Each extra run is requested (``run_requested``) before it starts; it then runs and is charged
like any trial (``trial_started`` with the phase as its role, ``trial_launched``,
``trial_finished``), so a bot killed anywhere in between resumes it.
"""

from __future__ import annotations

from typing import Literal

from gate.event_base import Event

Phase = Literal["remeasure", "recalibration", "confirmation"]
"""Why an extra run is made; also its ``trial_started`` role."""
Arm = Literal["incumbent", "candidate", "baseline", "winner"]
"""Which side of a comparison the run measures (A: incumbent or baseline; B: the other)."""


class RunRequested(Event):
    """An extra run the judgement needs, written before it starts."""

    KIND = "run_requested"
    trial: str
    """The run's own trial id (``c3-a1``, ``recal-c3-1``, ``confirm-b2``)."""
    phase: Phase
    of: str
    """The candidate re-measured, the incumbent recalibrated, or the winner confirmed."""
    arm: Arm
    recipe_of: str
    """Whose recipe runs: ``baseline`` or a candidate's trial id."""
    pair: int | None = None
    """1-based pair number (re-measurement and confirmation)."""


class NoiseRecalibrated(Event):
    """The noise model of a new incumbent whose layout changes the variance (threads, ranks),
    from its own runs: the ones it already had and as many extra as the minimum needed."""

    KIND = "noise_recalibrated"
    incumbent: str
    keys: list[str]
    """The variance-changing keys its merge moved."""
    runs: int
    mean: float
    std: float
    cv: float
    threshold: float
    scores: list[float]
    trials: list[str]
    """The runs the scores come from."""


class ConfirmationRequested(Event):
    """The campaign ends: the winner is first confirmed against the baseline, interleaved."""

    KIND = "confirmation_requested"
    winner: str
    pairs: int
    """Pairs (baseline, winner) asked for."""
    reason: str
    """The stop reason the campaign records once the confirmation is done."""
    evidence: list[str]


class ConfirmationFinished(Event):
    """The winner's speedup over the baseline from the interleaved pairs, with its interval."""

    KIND = "confirmation_finished"
    winner: str
    pairs: int
    """Pairs measured (fewer than asked when the budget refused a run or one failed)."""
    speedup: float | None
    """Mean of the paired ratios winner / baseline; None without a pair."""
    low: float | None
    high: float | None
    """Two-sided confidence interval at ``level`` (None with fewer than two pairs)."""
    level: float
    trials: list[str]
    note: str = ""
    """Why fewer pairs than asked, when so."""


class TrialJudged(Event):
    """The decision on a candidate, after one run or after its A/B pairs."""

    KIND = "trial_judged"
    trial: str
    decision: Literal["merge", "close"]
    reason: str
    score: float | None = None
    incumbent_score: float | None = None
    gain: float | None = None
    threshold: float | None = None
    post_passed: bool | None = None
    post_reasons: list[str] | None = None
    pairs: int | None = None
    """A/B pairs re-measured before deciding; None: its one run decided."""
    paired_mean: float | None = None
    """Mean paired relative difference (candidate / incumbent - 1)."""
    paired_se: float | None = None
    bar: float | None = None
    """What the gain (one run) or the paired mean had to exceed."""


JUDGEMENT_MODELS: tuple[type[Event], ...] = (
    RunRequested,
    NoiseRecalibrated,
    ConfirmationRequested,
    ConfirmationFinished,
)
"""The kinds this module adds, in ledger order (``gate.events.MODELS`` lists them last)."""
