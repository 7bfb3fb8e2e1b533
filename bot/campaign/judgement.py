"""The decisions on a candidate, pure, from its runs and the campaign's state
(``docs/judgement.md``).

First run: the post-launch gate (``gate.postlaunch.check`` against the calibrated reference),
then the gain over the incumbent's score against the one-run bar (``gate.sequential``): beyond
it the candidate merges on that run, at or below 0 it closes, in between it is re-measured A/B
and the paired rule decides (``paired_outcome``). The campaign does the runs
(``bot/campaign/extra_runs.py``); nothing here reads or writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.state.judgement import ok_score
from bot.state.model import CampaignState
from gate import noise, postlaunch, sequential
from gate.events import TrialFinished
from gate.events_judgement import RunRequested, TrialJudged
from gate.models import NoiseModel, TrialResult
from gate.postlaunch_reference import PostLaunchReference


@dataclass(frozen=True)
class PairedOutcome:
    """How a candidate's A/B re-measurement ended: the ``trial_judged`` fields it decides."""

    decision: Literal["merge", "close"]
    reason: str
    pairs: int | None = None
    """Complete pairs measured; None when it ended before any could be (a refused run)."""
    paired_mean: float | None = None
    paired_se: float | None = None
    bar: float | None = None
    """What the paired mean had to exceed; None: the first run's bar stands."""


@dataclass(frozen=True)
class FirstRunVerdict:
    """What a candidate's first run says: the post-launch outcome, then its gain over the
    incumbent against the one-run bar. ``remeasure`` is not a decision yet: A/B pairs decide
    (``PairedOutcome``), and ``judged`` makes the ``trial_judged`` event of both."""

    decision: sequential.FirstRun
    reason: str
    post_passed: bool
    post_reasons: tuple[str, ...]
    threshold: float
    """The promotion threshold of the noise the candidate is judged with."""
    score: float | None = None
    gain: float | None = None
    bar: float | None = None
    """The one-run bar (None: the post-launch checks closed it before any score counted)."""
    confirm_bar: float | None = None
    """``remeasure`` after beating the one-run bar: one interleaved pair beating it too merges."""

    def judged(
        self, trial: str, incumbent_score: float | None, paired: PairedOutcome | None = None
    ) -> TrialJudged:
        """The ``trial_judged`` event: this run's verdict, or ``paired``'s once it decided."""
        if paired is not None:
            decision, reason = paired.decision, paired.reason
        else:
            assert self.decision != "remeasure", "a re-measured candidate is judged by its pairs"
            decision, reason = self.decision, self.reason
        return TrialJudged(
            trial=trial,
            decision=decision,
            reason=reason,
            score=self.score,
            incumbent_score=incumbent_score,
            gain=self.gain,
            threshold=self.threshold,
            post_passed=self.post_passed,
            post_reasons=list(self.post_reasons),
            pairs=paired.pairs if paired else None,
            paired_mean=paired.paired_mean if paired else None,
            paired_se=paired.paired_se if paired else None,
            bar=paired.bar if paired and paired.bar is not None else self.bar,
        )


def judging_noise(state: CampaignState) -> NoiseModel:
    """The noise the incumbent is judged with: its layout's recalibration when a merge changed
    the variance, else the baseline's calibration."""
    model = state.judgement.noise or state.noise
    assert model is not None, "judging before the noise was calibrated"
    return model


def incumbent_runs(state: CampaignState) -> list[tuple[str, float]]:
    """(trial, score) of every run a merged incumbent's score is the mean of
    (``CampaignState.winner_runs``)."""
    assert state.incumbent != "baseline", "the baseline's score is its calibration's mean"
    return state.winner_runs(state.incumbent)


def judge_finished(state: CampaignState, result: TrialResult) -> FirstRunVerdict:
    """The verdict of a candidate's first run (decision, reason, score, gain, bar, post-launch
    outcome); ``decision`` is ``remeasure`` when it lands in (0, bar]."""
    baseline_loss = state.baseline_step1_loss
    incumbent = state.incumbent_score
    assert baseline_loss is not None and state.noise is not None and incumbent
    reference = state.checks_reference or PostLaunchReference.step1_only(baseline_loss)
    post = postlaunch.check(result, reference)
    if not post.passed:
        return FirstRunVerdict(
            decision="close",
            reason="; ".join(post.reasons),
            post_passed=False,
            post_reasons=tuple(post.reasons),
            threshold=state.noise.threshold,
        )
    model = judging_noise(state)
    score = float(result.score or 0.0)
    gain = noise.relative_gain(score, incumbent)
    runs = model.runs if state.incumbent == "baseline" else len(incumbent_runs(state))
    bar = sequential.one_run_bar(model, max(1, runs))
    decision = sequential.first_run(gain, bar)
    remeasure = state.params is None or state.params.max_pairs >= sequential.MIN_PAIRS
    confirm_bar = None
    if decision == "merge" and remeasure:  # one interleaved pair confirms it (docs/judgement.md)
        decision, confirm_bar = "remeasure", bar
        reason = f"{gain:+.1%} beats the one-run bar {bar:.1%}: one interleaved pair confirms"
    elif decision == "merge":
        reason = f"{gain:+.1%} beats the one-run bar {bar:.1%}"
    elif decision == "remeasure" and not remeasure:
        decision = "close"
        reason = f"{gain:+.1%} is within the one-run bar {bar:.1%} (A/B re-measurement off)"
    elif decision == "remeasure":
        reason = f"{gain:+.1%} is within the one-run bar {bar:.1%}: re-measured A/B"
    else:
        reason = f"{gain:+.1%}: no faster than the incumbent"
    return FirstRunVerdict(
        decision=decision,
        reason=reason,
        post_passed=True,
        post_reasons=tuple(post.reasons),
        threshold=model.threshold,
        score=score,
        gain=gain,
        bar=bar,
        confirm_bar=confirm_bar,
    )


def run_problem(request: RunRequested, finished: TrialFinished | None) -> str | None:
    """Why an extra run gives no score (interrupted, failed), or None when it counts."""
    if finished is None:
        return f"its run {request.trial} was not measured"
    if finished.interrupted:
        return f"not measured: its run {request.trial} was interrupted"
    if ok_score(finished) is None:
        return f"its run {request.trial} ({request.arm}) ended {finished.status}"
    return None


def pairs_of(
    state: CampaignState, runs: list[RunRequested]
) -> tuple[list[tuple[float, float]], str | None]:
    """The complete (A, B) pairs of ``runs`` (alternating A, B, ...) up to the first problem,
    and that problem."""
    scores: list[float] = []
    problem = None
    for request in runs:
        record = state.trials.get(request.trial)
        problem = run_problem(request, record.finished if record else None)
        if problem is not None:
            break
        scores.append(float(ok_score(record.finished if record else None) or 0.0))
    return list(zip(scores[0::2], scores[1::2], strict=False)), problem


def paired_outcome(
    state: CampaignState, runs: list[RunRequested], confirm_bar: float | None = None
) -> PairedOutcome | None:
    """How the A/B runs of a candidate decide it; None while more runs are needed (the next
    one is A when ``runs`` is even, else B). ``confirm_bar``: the first run beat this one-run
    bar, so one pair whose difference beats it too merges."""
    pairs, problem = pairs_of(state, runs)
    if problem is not None:
        return PairedOutcome("close", f"re-measured A/B: {problem}", pairs=len(pairs))
    if len(runs) % 2 == 1:
        return None
    if confirm_bar is not None and len(pairs) == 1:
        (d,) = sequential.differences(pairs)
        if d <= confirm_bar:
            return None  # not confirmed: the paired rule decides from more pairs
        why = f"{d:+.1%} in one interleaved pair beats the one-run bar {confirm_bar:.1%} again"
        return PairedOutcome(
            "merge", f"re-measured A/B: {why}", pairs=1, paired_mean=d, bar=confirm_bar
        )
    max_pairs = state.params.max_pairs if state.params else sequential.MAX_PAIRS
    verdict = sequential.decide(pairs, max_pairs=max_pairs, noise=judging_noise(state))
    if verdict.decision == "more":
        return None
    return PairedOutcome(
        verdict.decision,
        f"re-measured A/B: {verdict.reason}",
        pairs=verdict.pairs,
        paired_mean=verdict.mean,
        paired_se=verdict.se,
        bar=verdict.bar,
    )
