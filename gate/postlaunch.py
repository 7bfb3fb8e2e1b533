"""Post-launch gate: the run finished, stayed finite and trained the same thing as the baseline.

What each check can see (``docs/postlaunch-checks.md`` has the measured table):

- **step-1 loss** (within 5%): computed before any update, so it sees what the forward pass
  computes from the data and the loaded weights (wrong weights, shifted labels) and nothing of
  the update path.
- **step-1 gradient norm** (calibrated tolerance): from the same forward and backward, after
  the gradient reduction, so it also sees a gradient reduced wrongly (a rank's contribution
  dropped, a wrong scale) -- still nothing the optimizer does.
- **loss trajectory** (steps 1..K inside a calibrated band): from step 2 on, each loss follows
  an update, so it sees the optimizer (parameters skipped, a wrong step) and small changes to
  the data that the 5% rule lets through.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from gate.models import StepRecord, TrialResult
from gate.postlaunch_reference import PostLaunchReference

LOSS_TOLERANCE = 0.05
"""Largest relative step-1 loss difference from the baseline (5%)."""

Check = Literal["finished", "finite", "step1_loss", "step1_grad_norm", "loss_trajectory"]
"""The post-launch checks, in the order they run."""


class PostLaunchReport(BaseModel):
    """Outcome of the post-launch gate."""

    passed: bool
    reasons: list[str]
    """Why it failed; empty when it passed."""
    failed: list[Check] = Field(default_factory=list)
    """The checks that failed, one per reason."""
    notes: list[str] = Field(default_factory=list)
    """Checks that could not run, and why (no gradient norm logged, no calibrated band)."""
    step1_loss: float | None
    baseline_step1_loss: float
    relative_loss_delta: float | None
    grad_norm_delta: float | None = None
    """Relative step-1 gradient-norm difference from the baseline's; None when not checked."""
    trajectory_worst: float | None = None
    """The largest (relative loss difference / band) over the checked steps; > 1 fails."""


def first_loss(steps: Sequence[StepRecord]) -> float | None:
    """The run's "step-1 loss": step 1's, or, when the framework skipped its first steps
    (fp16 loss-scale overflow logs no loss), the first step's that logged one."""
    return next((s.loss for s in steps if s.loss is not None), None)


def check(
    result: TrialResult, reference: PostLaunchReference, *, tolerance: float = LOSS_TOLERANCE
) -> PostLaunchReport:
    """Fail a run that did not finish, has any NaN/Inf step, whose step-1 loss moved by more
    than ``tolerance``, whose step-1 gradient norm or first K losses left the calibrated
    tolerances of ``reference``."""
    failed: list[tuple[Check, str]] = []
    notes = list(reference.notes)
    if result.status not in ("ok", "nan"):
        failed.append(("finished", f"run did not finish: {result.status}"))
    bad = [s.step for s in result.steps if not s.finite()]
    if bad or result.has_nonfinite:
        failed.append(("finite", f"NaN/Inf in steps {bad[:5]}" if bad else "NaN/Inf in the run"))
    delta = None
    loss = result.step1_loss
    base_loss = reference.step1_loss
    if loss is None:
        if result.status == "ok":
            failed.append(("step1_loss", "no step-1 loss was logged"))
    elif not math.isfinite(loss):
        failed.append(("step1_loss", f"step-1 loss is {loss}"))
    else:
        delta = abs(loss - base_loss) / abs(base_loss)
        if delta > tolerance:
            failed.append(
                (
                    "step1_loss",
                    f"step-1 loss {loss:.6g} differs from the baseline's {base_loss:.6g} "
                    f"by {delta:.1%} (> {tolerance:.0%}): the candidate trains something else",
                )
            )
    grad_delta = _grad_norm(result, reference, failed, notes)
    worst = _trajectory(result, reference, failed, notes)
    return PostLaunchReport(
        passed=not failed,
        reasons=[reason for _, reason in failed],
        failed=[name for name, _ in failed],
        notes=notes,
        step1_loss=loss,
        baseline_step1_loss=base_loss,
        relative_loss_delta=delta,
        grad_norm_delta=grad_delta,
        trajectory_worst=worst,
    )


def _grad_norm(
    result: TrialResult,
    reference: PostLaunchReference,
    failed: list[tuple[Check, str]],
    notes: list[str],
) -> float | None:
    base = reference.step1_grad_norm
    if base is None:
        return None
    first = next((s for s in result.steps if s.step == 1), None)
    norm = first.grad_norm if first is not None else None
    if norm is None:
        notes.append("step-1 gradient norm not checked: the run logged none")
        return None
    if not math.isfinite(norm):
        return None  # the NaN/Inf check has said it
    delta = abs(norm - base) / base
    if delta > reference.grad_norm_tolerance:
        failed.append(
            (
                "step1_grad_norm",
                f"step-1 gradient norm {norm:.6g} differs from the baseline's {base:.6g} by "
                f"{delta:.2%} (> {reference.grad_norm_tolerance:.2%}, calibrated): the "
                "gradients are not the baseline's",
            )
        )
    return delta


def _trajectory(
    result: TrialResult,
    reference: PostLaunchReference,
    failed: list[tuple[Check, str]],
    notes: list[str],
) -> float | None:
    if not reference.losses:
        return None
    logged = {s.step: s.loss for s in result.steps if s.loss is not None and not s.skipped}
    window = range(1, min(reference.k, len(result.steps)) + 1)
    skipped = [s for s in window if s not in logged]
    if skipped:
        notes.append(f"loss trajectory not checked at steps {skipped}: they logged no loss")
    checked = [s for s in window if s in logged and math.isfinite(logged[s])]
    if any(name == "step1_loss" for name, _ in failed):
        checked = [s for s in checked if s > 1]  # the 5% rule has said it
    worst, first_out = 0.0, None
    for s in checked:
        base, band = reference.losses[s - 1], reference.loss_band[s - 1]
        if base == 0:  # no relative scale to judge by
            continue
        delta = abs(logged[s] - base) / abs(base)
        worst = max(worst, delta / band)
        if delta > band and first_out is None:
            first_out = (s, logged[s], base, delta, band)
    if first_out is not None:
        s, loss, base, delta, band = first_out
        failed.append(
            (
                "loss_trajectory",
                f"step-{s} loss {loss:.6g} differs from the baseline's {base:.6g} by "
                f"{delta:.2%} (> {band:.2%}, calibrated band of the first {reference.k} steps): "
                "the run does not train like the baseline",
            )
        )
    return worst if checked else None
