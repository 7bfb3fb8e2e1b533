"""Predicted vs measured, per trial: the step-time model's ``prediction_made`` before each run
(the prior, and the prior corrected by the calibration over the runs finished before it) next
to what the run measured, and the model's error before and after calibration. Shown by the
report, the campaign comment and ``attune ledger show`` (``docs/perf-model.md``)."""

from __future__ import annotations

import math
import statistics

from pydantic import BaseModel

from bot.render.words import count
from bot.state.judgement import ok_score
from bot.state.model import CampaignState


class PredictionRow(BaseModel):
    trial: str
    role: str
    prior: float
    """The prior's tokens/s/device."""
    calibrated: float
    """Corrected by the calibration over the runs finished before this one."""
    band: float
    """The calibrated prediction's relative error band then."""
    calibration_runs: int
    measured: float | None = None
    """Its score when it counts (``ok_score``); None: not finished ok."""
    status: str | None = None

    @property
    def prior_error(self) -> float | None:
        return None if self.measured is None else self.prior / self.measured - 1

    @property
    def calibrated_error(self) -> float | None:
        return None if self.measured is None else self.calibrated / self.measured - 1


def prediction_rows(state: CampaignState) -> list[PredictionRow]:
    rows = []
    for t in state.trials.values():
        p = t.prediction
        if p is None:
            continue
        rows.append(
            PredictionRow(
                trial=t.trial,
                role=t.role or "-",
                prior=p.tokens_per_s_per_device,
                calibrated=p.calibrated_tokens_per_s_per_device,
                band=p.band,
                calibration_runs=p.calibration_runs,
                measured=ok_score(t.finished),
                status=t.finished.status if t.finished else None,
            )
        )
    return rows


def _median_abs(errors: list[float | None]) -> float | None:
    known = [abs(math.log1p(e)) for e in errors if e is not None]
    return math.expm1(statistics.median(known)) if known else None


def error_summary(rows: list[PredictionRow]) -> str | None:
    """One line: the median absolute error of the prior and of the calibrated predictions over
    the measured runs, each calibrated prediction fitted only on runs before it."""
    measured = [r for r in rows if r.measured is not None]
    prior = _median_abs([r.prior_error for r in measured])
    calibrated = _median_abs([r.calibrated_error for r in measured])
    if prior is None or calibrated is None:
        return None
    last = rows[-1]
    return (
        f"step-time model over {count(len(measured), 'measured run')}: median absolute error "
        f"{prior:.1%} before calibration, {calibrated:.1%} after (each fitted on the runs "
        f"before it); band now +-{math.expm1(last.band):.1%} after "
        f"{count(last.calibration_runs, 'run')}"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def predictions_section(state: CampaignState) -> list[str]:
    """Markdown lines of the report's predicted-vs-measured section; none without predictions."""
    rows = prediction_rows(state)
    if not rows:
        return []
    out = ["", "## Predicted vs measured", ""]
    summary = error_summary(rows)
    if summary:
        out += [summary[0].upper() + summary[1:] + ".", ""]
    out += [
        "| trial | role | predicted (prior) | predicted (calibrated) | band | measured "
        "| error before | error after |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        measured = f"{r.measured:,.0f}" if r.measured is not None else (r.status or "running")
        cells = [r.trial, r.role, f"{r.prior:,.0f}", f"{r.calibrated:,.0f}"]
        cells += [f"+-{math.expm1(r.band):.1%}", measured]
        cells += [_pct(r.prior_error), _pct(r.calibrated_error)]
        out.append("| " + " | ".join(cells) + " |")
    return out
