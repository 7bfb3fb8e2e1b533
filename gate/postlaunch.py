"""Post-launch gate: the run trained the same thing (step-1 loss) and stayed finite."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel

from gate.models import StepRecord, TrialResult

LOSS_TOLERANCE = 0.05
"""Largest relative step-1 loss difference from the baseline (5%)."""


class PostLaunchReport(BaseModel):
    """Outcome of the post-launch gate."""

    passed: bool
    reasons: list[str]
    """Why it failed; empty when it passed."""
    step1_loss: float | None
    baseline_step1_loss: float
    relative_loss_delta: float | None


def first_loss(steps: Sequence[StepRecord]) -> float | None:
    """The run's "step-1 loss": step 1's, or, when the framework skipped its first steps
    (fp16 loss-scale overflow logs no loss), the first step's that logged one."""
    return next((s.loss for s in steps if s.loss is not None), None)


def check(
    result: TrialResult, *, baseline_step1_loss: float, tolerance: float = LOSS_TOLERANCE
) -> PostLaunchReport:
    """Fail a run that did not finish, has any NaN/Inf step, or whose step-1 loss moved."""
    reasons: list[str] = []
    if result.status not in ("ok", "nan"):
        reasons.append(f"run did not finish: {result.status}")
    bad = [s.step for s in result.steps if not s.finite()]
    if bad or result.has_nonfinite:
        reasons.append(f"NaN/Inf in steps {bad[:5]}" if bad else "NaN/Inf in the run")
    delta = None
    loss = result.step1_loss
    if loss is None:
        if result.status == "ok":
            reasons.append("no step-1 loss was logged")
    elif not math.isfinite(loss):
        reasons.append(f"step-1 loss is {loss}")
    else:
        delta = abs(loss - baseline_step1_loss) / abs(baseline_step1_loss)
        if delta > tolerance:
            reasons.append(
                f"step-1 loss {loss:.6g} differs from the baseline's {baseline_step1_loss:.6g} "
                f"by {delta:.1%} (> {tolerance:.0%}): the candidate trains something else"
            )
    return PostLaunchReport(
        passed=not reasons,
        reasons=reasons,
        step1_loss=loss,
        baseline_step1_loss=baseline_step1_loss,
        relative_loss_delta=delta,
    )
