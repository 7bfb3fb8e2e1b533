"""Device-seconds spent and forecast per campaign, and whether the next trial may launch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from gate.errors import AttuneError
from gate.events import RefusalReason, TrialFinished
from gate.ledger import LedgerEvent
from gate.models import TrialResult, device_seconds

# Every function here takes the events of ONE campaign (``Ledger.events(campaign)``).

MAX_BUDGET_DEVICE_HOURS = 1_000_000.0
"""The largest budget a campaign may be given: 1,000 devices for 1,000 hours. Anything above is
a typo or an attempt to turn the budget check off (``1e308``), and is refused."""


def check_budget_hours(hours: float, *, what: str = "--budget") -> float:
    """``hours`` when it is a finite, positive budget no larger than the maximum; else an
    AttuneError (NaN would otherwise reach the ledger and compare false with everything)."""
    if not math.isfinite(hours) or hours <= 0 or hours > MAX_BUDGET_DEVICE_HOURS:
        raise AttuneError(
            f"{what} must be positive device-hours, got {hours} (a finite number, at most "
            f"{MAX_BUDGET_DEVICE_HOURS:,.0f})"
        )
    return hours


class LaunchRefusal(BaseModel):
    """Why the next trial may not launch."""

    reason: RefusalReason
    message: str
    """One user-facing sentence with the numbers behind the refusal."""


def trial_finished_payload(result: TrialResult) -> dict[str, Any]:
    """The ``trial_finished`` payload for one benchmark run: what it was and what it cost."""
    return {
        "recipe": result.recipe,
        "fingerprint": result.fingerprint,
        "status": result.status,
        "score": result.score,
        "step1_loss": result.step1_loss,
        "error": (result.error or "")[-2000:] or None,
        "allocated_at": result.allocated_at,
        "released_at": result.released_at,
        "devices": result.devices,
        "device_seconds": result.device_seconds,
        "peak_memory_bytes": max((s.peak_memory_bytes for s in result.steps), default=0) or None,
        "nodes": result.nodes,
        "interrupted": result.interrupted,
    }


def trial_charge(event: LedgerEvent) -> float:
    """Device-seconds one ``trial_finished`` ledger event charges (``charge``)."""
    return charge(_typed(event))


def charge(finished: TrialFinished) -> float:
    """Device-seconds a finished run charges: (release - allocation) x devices, the one formula
    of spend, recomputed from the times rather than trusting ``device_seconds``."""
    return device_seconds(finished.allocated_at, finished.released_at, finished.devices)


def _typed(event: LedgerEvent) -> TrialFinished:
    finished = event.event
    assert isinstance(finished, TrialFinished), event.kind
    return finished


def _finished(events: Iterable[LedgerEvent]) -> list[tuple[LedgerEvent, TrialFinished]]:
    return [(e, _typed(e)) for e in events if e.kind == "trial_finished"]


def spent_device_seconds(events: Iterable[LedgerEvent]) -> float:
    """Sum of every finished trial's charge: failed, OOM, timed-out and NaN runs included."""
    return sum((charge(f) for _, f in _finished(events)), 0.0)


def forecast_device_seconds(
    events: Iterable[LedgerEvent],
    default: float,
    devices: int | None = None,
    *,
    step_s: Mapping[str, float] | None = None,
    next_step_s: float | None = None,
) -> float:
    """Expected cost of the next trial.

    The median of the finished trials with status ok; failed runs often die early and would
    make the forecast optimistic, so they count only while no run has succeeded yet.
    ``default`` covers a campaign with no finished trial. With ``devices`` (the next trial's),
    the median is of each run's charge per device, times ``devices``: a candidate of 8 ranks
    costs 8 times a 1-rank run of the same length, and a forecast that ignored it let one
    such run spend twice the campaign's budget.

    With the step-time model's predictions (``step_s``: trial -> predicted seconds a step of
    that finished run; ``next_step_s``: the next trial's), each measured run's charge is also
    divided by its own predicted step time and the median multiplied by the next trial's: a
    candidate predicted 3 times slower than the runs measured is forecast 3 times their cost.
    Without a prediction for the next trial, or for any of the runs, the forecast scales by
    devices only. The numbers come in as arguments: this module does no modelling.
    """
    finished = [f for _, f in _finished(events)]
    ok = [f for f in finished if f.status == "ok"]
    runs = ok or finished
    if not runs:
        return default

    def cost(f: TrialFinished) -> float:
        return charge(f) if devices is None else charge(f) / max(f.devices, 1)

    scale = 1 if devices is None else devices
    predicted = {t: s for t, s in (step_s or {}).items() if math.isfinite(s) and s > 0}
    scaled = [cost(f) / predicted[f.trial] for f in runs if f.trial in predicted]
    if next_step_s is not None and math.isfinite(next_step_s) and next_step_s > 0 and scaled:
        return statistics.median(scaled) * next_step_s * scale
    return statistics.median(cost(f) for f in runs) * scale


def failed_on_its_own(finished: TrialFinished) -> bool:
    """A run that failed on its own: an interrupted one (stopped, its node lost, preempted)
    says nothing about its config."""
    return finished.status != "ok" and not finished.interrupted


def failed_fingerprints(events: Iterable[LedgerEvent]) -> set[str]:
    """Effective-config fingerprints of finished trials that failed (not interrupted)."""
    return {f.fingerprint for _, f in _finished(events) if failed_on_its_own(f)}


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.3f}"


def check_launch(
    events: Iterable[LedgerEvent],
    *,
    budget_device_seconds: float,
    fingerprint: str,
    forecast_device_seconds: float,
) -> LaunchRefusal | None:
    """Refuse an exact rerun of a failed config, then a trial the budget cannot cover.

    A rerun is refused even when budget is left: the same effective config would fail the
    same way, so something must differ before it runs again.
    """
    events = list(events)
    failed = [
        (e, f)
        for e, f in _finished(events)
        if f.fingerprint == fingerprint and failed_on_its_own(f)
    ]
    if failed:
        last, finished = failed[-1]
        return LaunchRefusal(
            reason="failed_rerun",
            message=(
                f"effective config {fingerprint} already ended with status "
                f"{finished.status} (ledger seq {last.seq}); "
                "change something before running it again"
            ),
        )
    spent = spent_device_seconds(events)
    if spent + forecast_device_seconds > budget_device_seconds:
        left = max(0.0, budget_device_seconds - spent)
        return LaunchRefusal(
            reason="budget",
            message=(
                f"forecast {_hours(forecast_device_seconds)} device-hours exceeds the "
                f"{_hours(left)} left of {_hours(budget_device_seconds)}"
            ),
        )
    return None


FIRST_RUN_FORECAST_S = 60.0
"""Device-seconds per device a run is forecast at before any run of the campaign was measured
(``LocalExecutor``'s ``default_forecast_s``): the forecast a new campaign's budget is checked
against before anything launches."""


class CampaignFloor(BaseModel):
    """What a new campaign is forecast to spend before its first candidate, and the least
    budget that buys one (device-seconds)."""

    per_run_s: float
    calibration_runs: int
    calibration_s: float
    """The baseline's calibration runs and the profile the agent asks for first."""
    minimum_s: float
    """Calibration plus one candidate run. The layout checks are not counted: a campaign skips
    them when the budget cannot spare them."""


def campaign_floor(*, per_run_s: float, calibration_runs: int) -> CampaignFloor:
    """The forecast of a new campaign's calibration, and the least budget that buys a
    candidate, at ``per_run_s`` device-seconds a run."""
    calibration_s = (calibration_runs + 1) * per_run_s
    return CampaignFloor(
        per_run_s=per_run_s,
        calibration_runs=calibration_runs,
        calibration_s=calibration_s,
        minimum_s=calibration_s + per_run_s,
    )


def new_campaign_floor(*, devices: int, calibration_runs: int) -> CampaignFloor:
    """The floor a new campaign's budget is checked against before anything launches: every
    run forecast at ``FIRST_RUN_FORECAST_S`` a device, as the executor forecasts a run before
    one is measured. ``attune tune``, ``attune demo`` and ``attune plan`` all print this one."""
    return campaign_floor(
        per_run_s=FIRST_RUN_FORECAST_S * max(devices, 1), calibration_runs=calibration_runs
    )


def minimum_budget_hours(floor: CampaignFloor) -> float:
    """The least budget that buys a candidate, in device-hours rounded up to the thousandth
    (never below the floor): the number every command prints."""
    return math.ceil(round(floor.minimum_s / 3.6, 6)) / 1000


def check_buys_a_candidate(budget_hours: float, floor: CampaignFloor) -> None:
    """Refuse, before anything launches, a budget that calibration would spend before any
    candidate could run: the AttuneError names the forecast and the minimum."""
    if budget_hours * 3600 >= floor.minimum_s:
        return
    minimum_h = minimum_budget_hours(floor)
    raise AttuneError(
        f"--budget {budget_hours:g} device-hours buys no candidate: calibration is forecast at "
        f"{_hours(floor.calibration_s)} device-hours ({floor.calibration_runs} baseline runs "
        f"and a profile, {floor.per_run_s:.0f} device-seconds each until a run is measured) "
        f"and a candidate at {_hours(floor.per_run_s)} more; give --budget {minimum_h:g} or "
        f"more (each further candidate about {_hours(floor.per_run_s)})"
    )
