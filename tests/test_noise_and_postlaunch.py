"""Pure decision code: noise model, promotion rule, throughput and the post-launch gate."""

from __future__ import annotations

import math
import statistics

import pytest

from gate import noise, postlaunch
from gate.models import StepRecord, TrialResult
from gate.postlaunch_reference import PostLaunchReference
from gate.throughput import tokens_per_second_per_device

step1_only = PostLaunchReference.step1_only


def steps(losses: list[float], seconds: float = 0.5, tokens: int = 1000) -> list[StepRecord]:
    return [
        StepRecord(
            step=i,
            loss=loss,
            grad_norm=1.0,
            tokens=tokens,
            step_seconds=seconds,
            peak_memory_bytes=1,
        )
        for i, loss in enumerate(losses, start=1)
    ]


def result(losses: list[float], status: str = "ok") -> TrialResult:
    records = steps(losses)
    return TrialResult(
        recipe="r",
        fingerprint="f",
        status=status,
        steps=records,
        warmup=1,
        score=1.0,
        step1_loss=records[0].loss if records else None,
        has_nonfinite=any(not r.finite() for r in records),
        allocated_at=0.0,
        released_at=2.0,
        devices=2,
    )


def test_calibration_needs_five_runs() -> None:
    with pytest.raises(ValueError, match="at least 5"):
        noise.calibrate([100.0, 101.0, 99.0, 100.0])


def test_threshold_is_floor_when_quiet_and_three_cv_when_noisy() -> None:
    quiet = noise.calibrate([100.0, 100.5, 99.5, 100.2, 99.8])
    assert quiet.threshold == pytest.approx(0.03)
    scores = [100.0, 110.0, 90.0, 105.0, 95.0]
    noisy = noise.calibrate(scores)
    cv = statistics.stdev(scores) / statistics.fmean(scores)
    assert noisy.cv == pytest.approx(cv)
    assert noisy.threshold == pytest.approx(3 * cv)


def test_identical_candidate_is_never_promoted() -> None:
    model = noise.calibrate([100.0, 102.0, 98.0, 101.0, 99.0])
    assert not noise.beats(100.0, 100.0, model)
    assert not noise.beats(100.0 * (1 + model.threshold), 100.0, model)  # equal is not more
    assert noise.beats(100.0 * (1 + model.threshold) + 0.01, 100.0, model)


def test_score_excludes_warmup_and_divides_by_devices() -> None:
    records = steps([5.0] * 4, seconds=0.5, tokens=1000)
    records[0] = records[0].model_copy(update={"step_seconds": 30.0})  # compile step
    assert tokens_per_second_per_device(records, warmup=1, devices=2) == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="no steps after"):
        tokens_per_second_per_device(records, warmup=4, devices=1)


def test_device_seconds_charges_every_device() -> None:
    assert result([5.0, 4.9]).device_seconds == pytest.approx(4.0)


def test_postlaunch_passes_same_step1_loss() -> None:
    report = postlaunch.check(result([5.50, 5.0, 4.5]), step1_only(5.52))
    assert report.passed, report.reasons


def test_postlaunch_fails_step1_loss_off_by_more_than_5_percent() -> None:
    report = postlaunch.check(result([5.9, 5.0]), step1_only(5.5))
    assert not report.passed
    assert "step-1 loss" in report.reasons[0]
    assert report.relative_loss_delta == pytest.approx(0.4 / 5.5)


def test_postlaunch_fails_nan_in_a_later_step() -> None:
    report = postlaunch.check(result([5.5, 5.0, math.nan, 4.0], "nan"), step1_only(5.5))
    assert not report.passed
    assert any("NaN/Inf in steps [3]" in r for r in report.reasons)


def test_postlaunch_fails_unfinished_run() -> None:
    report = postlaunch.check(result([5.5], "timeout"), step1_only(5.5))
    assert not report.passed
    assert "timeout" in report.reasons[0]
