"""Turn step records into the score: tokens per second per device, warm-up excluded."""

from __future__ import annotations

from collections.abc import Sequence

from gate.models import StepRecord


def tokens_per_second_per_device(
    steps: Sequence[StepRecord], *, warmup: int, devices: int
) -> float:
    """Tokens over wall seconds of the steps after ``warmup``, divided by ``devices``; a step
    the framework skipped (fp16 loss-scale overflow) is not scored.

    This is the mean rate over the scored window (total tokens / total time), so a slow step
    weighs by its duration, as it does in a real run. Raises ValueError when no step is scored.
    """
    scored = [s for s in steps if s.step > warmup and not s.skipped]
    if not scored:
        raise ValueError(f"no steps after the {warmup} warm-up steps to score")
    if devices < 1:
        raise ValueError(f"devices must be >= 1, got {devices}")
    seconds = sum(s.step_seconds for s in scored)
    if seconds <= 0:
        raise ValueError("scored steps took no time")
    return sum(s.tokens for s in scored) / seconds / devices
