"""Budget arithmetic over ledger events: charges, forecast, and launch refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.state.fold import fold
from gate.budget import (
    check_launch,
    failed_fingerprints,
    forecast_device_seconds,
    spent_device_seconds,
    trial_charge,
    trial_finished_payload,
)
from gate.ledger import Ledger
from gate.models import TrialResult
from tests.events_factory import T0, EventLog, payload


def test_every_finished_trial_is_charged_whatever_its_status() -> None:
    log = EventLog().add("campaign_opened", budget_device_hours=1.0)
    for status in ["ok", "failed", "oom", "timeout", "nan"]:
        log.run(100, status=status, devices=2, fingerprint=status)
    assert spent_device_seconds(log.events) == 1000.0


def test_only_trial_finished_events_are_charged() -> None:
    charge = {"allocated_at": T0, "released_at": T0 + 50, "devices": 4}
    log = EventLog().add("trial_started", **charge).add("gate_checked", **charge).run(10)
    assert spent_device_seconds(log.events) == 10.0
    assert spent_device_seconds([]) == 0.0


def test_charge_is_release_minus_allocation_times_devices() -> None:
    (event,) = EventLog().run(90, devices=8).events
    assert trial_charge(event) == 720.0


def test_forecast_is_the_median_of_ok_trials() -> None:
    log = EventLog().run(10).run(30).run(20).run(1000, status="failed", fingerprint="x")
    assert forecast_device_seconds(log.events, default=5.0) == 20.0
    assert forecast_device_seconds(log.run(40).events, default=5.0) == 25.0


def test_forecast_falls_back_to_all_trials_then_the_default() -> None:
    failed = EventLog().run(8, status="oom").run(2, status="failed").run(4, status="nan")
    assert forecast_device_seconds(failed.events, default=100.0) == 4.0
    opened = EventLog().add("campaign_opened", budget_device_hours=1.0)
    assert forecast_device_seconds(opened.events, default=100.0) == 100.0


def test_failed_fingerprints_are_the_non_ok_runs() -> None:
    log = (
        EventLog()
        .run(1, fingerprint="good")
        .run(1, status="oom", fingerprint="big-batch")
        .run(1, status="nan", fingerprint="high-lr")
        .add("trial_started", fingerprint="running")
    )
    assert failed_fingerprints(log.events) == {"big-batch", "high-lr"}


def test_exact_rerun_of_a_failed_config_is_refused_even_with_budget_left() -> None:
    log = EventLog().run(10, fingerprint="good").run(10, status="oom", fingerprint="big")
    refusal = check_launch(
        log.events, budget_device_seconds=1e9, fingerprint="big", forecast_device_seconds=10
    )
    assert refusal is not None and refusal.reason == "failed_rerun"
    assert refusal.message == (
        "effective config big already ended with status oom (ledger seq 2); "
        "change something before running it again"
    )
    rerun_of_ok = check_launch(
        log.events, budget_device_seconds=1e9, fingerprint="good", forecast_device_seconds=10
    )
    assert rerun_of_ok is None


def test_an_interrupted_run_is_charged_but_says_nothing_about_its_config() -> None:
    """A run stopped on request, or whose node was lost, failed through no fault of its
    config: it is charged, and the same config may run again."""
    log = EventLog().run(10, status="failed", fingerprint="base", interrupted=True)
    assert spent_device_seconds(log.events) == 10 and failed_fingerprints(log.events) == set()
    assert (
        check_launch(
            log.events, budget_device_seconds=1e9, fingerprint="base", forecast_device_seconds=10
        )
        is None
    )


def test_failed_rerun_is_reported_before_budget() -> None:
    log = EventLog().run(100, status="timeout", fingerprint="slow")
    refusal = check_launch(
        log.events, budget_device_seconds=100, fingerprint="slow", forecast_device_seconds=100
    )
    assert refusal is not None and refusal.reason == "failed_rerun"


def test_launch_over_budget_is_refused_with_the_numbers() -> None:
    # budget 0.050 h = 180 s; spent 169.2 s (0.047 h); forecast 0.012 h = 43.2 s.
    log = EventLog().run(84.6, devices=2, status="failed", fingerprint="old")
    refusal = check_launch(
        log.events, budget_device_seconds=180, fingerprint="new", forecast_device_seconds=43.2
    )
    assert refusal is not None and refusal.reason == "budget"
    assert refusal.message == "forecast 0.012 device-hours exceeds the 0.003 left of 0.050"


def test_launch_that_exactly_fits_the_budget_is_allowed() -> None:
    log = EventLog().run(100)
    assert (
        check_launch(
            log.events, budget_device_seconds=150, fingerprint="n", forecast_device_seconds=50
        )
        is None
    )


def test_overspent_campaign_reports_nothing_left() -> None:
    log = EventLog().run(400)
    refusal = check_launch(
        log.events, budget_device_seconds=360, fingerprint="n", forecast_device_seconds=36
    )
    assert refusal is not None
    assert refusal.message == "forecast 0.010 device-hours exceeds the 0.000 left of 0.100"


@pytest.mark.parametrize("status", ["ok", "oom"])
def test_trial_result_charged_through_a_real_ledger(tmp_path: Path, status: str) -> None:
    result = TrialResult(
        recipe="candidate-1",
        fingerprint="abc123",
        status=status,
        warmup=2,
        allocated_at=T0,
        released_at=T0 + 30.5,
        devices=2,
    )
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c1", "campaign_opened", payload("campaign_opened"))
        finished = {"trial": "baseline-1", **trial_finished_payload(result)}
        ledger.append("c1", "trial_finished", finished)
        ledger.append("other", "trial_finished", finished)
        events = ledger.events("c1")
    assert spent_device_seconds(events) == result.device_seconds == 61.0
    state = fold("c1", events)
    assert state.runs_by_status == {status: 1} and state.spent_device_seconds == 61.0
    assert failed_fingerprints(events) == (set() if status == "ok" else {"abc123"})
