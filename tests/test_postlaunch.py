"""The post-launch checks beyond the step-1 loss, as pure decisions: the reference calibrated
from baseline repeats and layout variants, the step-1 gradient norm, the K-step loss band."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from bot.report.build import render_markdown, report_of
from bot.state.fold import fold
from gate import postlaunch
from gate.ledger import Ledger
from gate.models import StepRecord, TrialResult
from gate.postlaunch_reference import (
    GRAD_NORM_FLOOR,
    LOSS_BAND_FLOOR,
    MARGIN,
    UNMEASURED_GRAD_NORM_FLOOR,
    UNMEASURED_LOSS_FLOOR,
    PostLaunchReference,
    calibrate,
    summary,
)
from tests.events_factory import payload

BASE = [5.5, 5.0, 4.6, 4.3]


def run(losses: Sequence[float | None], norm1: float | None = 1.0) -> list[StepRecord]:
    return [
        StepRecord(
            step=i,
            loss=loss,
            grad_norm=norm1 if i == 1 else 1.0,
            tokens=100,
            step_seconds=0.1,
            peak_memory_bytes=1,
            skipped=loss is None,
        )
        for i, loss in enumerate(losses, start=1)
    ]


def result(steps: list[StepRecord], status: str = "ok") -> TrialResult:
    return TrialResult(
        recipe="r",
        fingerprint="f",
        status=status,
        steps=steps,
        warmup=1,
        score=1.0,
        step1_loss=postlaunch.first_loss(steps),
        allocated_at=0.0,
        released_at=1.0,
        devices=1,
    )


def scaled(losses: list[float], factor: float) -> list[float | None]:
    return [x * factor for x in losses]


def _ref(k: int = 4) -> PostLaunchReference:
    """Calibrated from a baseline run and a layout variant that agreed with it exactly."""
    return calibrate([("b1", run(list(BASE)))], [("v1", run(list(BASE)))], variants=["v"], k=k)


def test_identical_runs_calibrate_to_the_floors() -> None:
    ref = calibrate([("b1", run(list(BASE))), ("b2", run(list(BASE)))], [("v1", run(BASE))], k=3)
    assert ref.losses == BASE[:3]
    assert ref.loss_band == [LOSS_BAND_FLOOR] * 3
    assert ref.step1_grad_norm == 1.0
    assert ref.grad_norm_tolerance == GRAD_NORM_FLOOR
    assert ref.runs == ["b1", "b2", "v1"]
    assert ref.notes == []


def test_without_a_layout_variant_the_floors_are_wide() -> None:
    """Repeats show nondeterminism, not what another layout does: 2% and 10%, said so."""
    ref = calibrate([("b1", run(list(BASE))), ("b2", run(list(BASE)))], k=3)
    assert ref.loss_band == [UNMEASURED_LOSS_FLOOR] * 3
    assert ref.grad_norm_tolerance == UNMEASURED_GRAD_NORM_FLOOR
    assert ref.notes == ["no layout variant ran: wide floors (2% loss, 10% gradient norm)"]
    assert postlaunch.check(result(run([5.5, 5.0, 4.6 * 1.01, 4.3], norm1=1.05)), ref).passed
    assert not postlaunch.check(result(run([5.5, 5.0, 4.6 * 1.03, 4.3])), ref).passed


def test_the_band_is_margin_times_the_widest_variant_and_never_narrows() -> None:
    variant = run([5.5, 5.0 * 1.01, 4.6, 4.3], norm1=1.05)  # 1% off at step 2, 5% on the norm
    ref = calibrate([("b1", run(list(BASE)))], [("v1", variant)], variants=["mbs 1 -> 2"], k=4)
    assert ref.loss_band[0] == LOSS_BAND_FLOOR
    assert ref.loss_band[1] == pytest.approx(MARGIN * 0.01)
    assert ref.loss_band[2:] == [ref.loss_band[1]] * 2  # non-decreasing
    assert ref.grad_norm_tolerance == pytest.approx(MARGIN * 0.05)
    assert ref.variants == ["mbs 1 -> 2"]
    # a run like the variant passes; one twice as far off at step 2 still passes (margin 3)
    assert postlaunch.check(result(variant), ref).passed
    assert postlaunch.check(result(run([5.5, 5.1, 4.6, 4.3])), ref).passed


def test_a_changed_step1_gradient_norm_fails_alone() -> None:
    ref = _ref()
    report = postlaunch.check(result(run(list(BASE), norm1=0.7)), ref)
    assert not report.passed
    assert report.failed == ["step1_grad_norm"]
    assert report.grad_norm_delta == pytest.approx(0.3)
    assert "gradient norm 0.7 differs" in report.reasons[0]
    assert report.relative_loss_delta == 0.0  # the step-1 loss cannot see it


def test_a_trajectory_leaving_the_band_after_step_1_fails() -> None:
    ref = _ref()
    drifted = run([5.5, 5.0, 4.6 * 1.01, 4.3])  # 1% at step 3: inside 5%, outside 0.2%
    report = postlaunch.check(result(drifted), ref)
    assert report.failed == ["loss_trajectory"]
    assert "step-3 loss" in report.reasons[0]
    assert report.trajectory_worst == pytest.approx(0.01 / LOSS_BAND_FLOOR)


def test_step1_loss_off_by_more_than_5_percent_is_reported_once() -> None:
    ref = _ref()
    report = postlaunch.check(result(run([6.0, 5.0, 4.6, 4.3])), ref)
    assert report.failed == ["step1_loss"]
    assert "trains something else" in report.reasons[0]


def test_steps_after_k_are_not_checked() -> None:
    ref = _ref(k=2)
    assert postlaunch.check(result(run([5.5, 5.0, 9.9, 9.9])), ref).passed


def test_no_gradient_norm_in_the_logs_skips_that_check_with_a_note() -> None:
    ref = calibrate([("b1", run(list(BASE), norm1=None))], k=4)
    assert ref.step1_grad_norm is None
    assert any("no step-1 gradient norm" in n for n in ref.notes)
    report = postlaunch.check(result(run(list(BASE), norm1=3.0)), ref)
    assert report.passed and report.grad_norm_delta is None
    assert any("no step-1 gradient norm" in n for n in report.notes)
    # a reference with a norm, a run without one: skipped, said so
    with_norm = _ref()
    report = postlaunch.check(result(run(list(BASE), norm1=None)), with_norm)
    assert report.passed
    assert any("logged none" in n for n in report.notes)


def test_a_skipped_step_is_left_out_of_the_band_and_noted() -> None:
    ref = _ref()
    report = postlaunch.check(result(run([5.5, None, 4.6, 4.3])), ref)
    assert report.passed
    assert any("not checked at steps [2]" in n for n in report.notes)


def test_calibration_needs_a_step1_loss() -> None:
    with pytest.raises(ValueError, match="no baseline run"):
        calibrate([], k=4)
    with pytest.raises(ValueError, match="step-1 loss"):
        calibrate([("b1", run([None, 5.0]))], k=4)


def test_step1_only_reference_keeps_the_5_percent_rule() -> None:
    ref = PostLaunchReference.step1_only(5.5)
    assert postlaunch.check(result(run([5.6, 1.0], norm1=9.0)), ref).passed
    assert not postlaunch.check(result(run([5.9, 5.0])), ref).passed


def test_the_reference_survives_the_ledger(tmp_path: Path) -> None:
    """A restarted bot folds ``checks_calibrated`` back into the same reference."""
    ref = calibrate([("b1", run(list(BASE)))], [("v1", run(scaled(BASE, 1.001)))], k=4)
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened"))
        ledger.append("c", "checks_calibrated", ref.model_dump())
    with Ledger(path) as ledger:
        state = fold("c", ledger.events("c"))
    assert state.checks_reference == ref


def test_the_report_shows_how_the_checks_were_calibrated(tmp_path: Path) -> None:
    ref = calibrate([("b1", run(list(BASE)))], [("v1", run(list(BASE)))], variants=["v"], k=4)
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened"))
        before = render_markdown(report_of(fold("c", ledger.events("c"))))
        ledger.append("c", "checks_calibrated", ref.model_dump())
        after = render_markdown(report_of(fold("c", ledger.events("c"))))
    assert "Post-launch checks" not in before
    section = after[after.index("## Post-launch checks") :]
    assert "- calibrated from: b1, v1\n- layout variant: v\n" in section
    assert "- step-1 gradient norm: 1 (within 2.00%)" in section
    assert "- losses of steps 1..4: each within 0.20%\n" in section  # one band, said once
    widening = summary(ref.model_copy(update={"loss_band": [0.002, 0.002, 0.003, 0.005]}))
    assert "- losses of steps 1..4: within 0.20% at step 1, widening to 0.50% at step 4" in widening
