"""The decision on a candidate that ran: pure, from its result and the campaign's state.

The post-launch gate first (step-1 loss against the baseline's, no NaN/Inf), then the score
against the incumbent's by the calibrated noise threshold: only a gain beyond it merges.
"""

from __future__ import annotations

from typing import Any

from bot.campaign_state import CampaignState
from gate import noise, postlaunch
from gate.models import TrialResult
from gate.postlaunch_reference import PostLaunchReference


def judge_finished(state: CampaignState, result: TrialResult) -> dict[str, Any]:
    """The ``trial_judged`` fields (decision, reason, score, gain, post-launch outcome) for a
    finished candidate."""
    baseline_loss = state.baseline_step1_loss
    incumbent = state.incumbent_score
    assert baseline_loss is not None and state.noise is not None and incumbent
    reference = state.checks_reference or PostLaunchReference.step1_only(baseline_loss)
    post = postlaunch.check(result, reference)
    verdict: dict[str, Any] = {"post_passed": post.passed, "post_reasons": post.reasons}
    if not post.passed:
        return {**verdict, "decision": "close", "reason": "; ".join(post.reasons)}
    score = float(result.score or 0.0)
    gain = noise.relative_gain(score, incumbent)
    threshold = state.noise.threshold
    verdict.update(score=score, gain=gain)
    if noise.beats(score, incumbent, state.noise):
        return {
            **verdict,
            "decision": "merge",
            "reason": f"{gain:+.1%} beats the {threshold:.1%} threshold",
        }
    if gain < 0:
        reason = f"{gain:+.1%}: slower than the incumbent"
        return {**verdict, "decision": "close", "reason": reason}
    reason = f"{gain:+.1%} does not beat the {threshold:.1%} threshold"
    return {**verdict, "decision": "close", "reason": reason}
