"""Ledger events of the step-time model's predictions (``docs/perf-model.md``)."""

from __future__ import annotations

from gate.event_base import Event


class PredictionMade(Event):
    """Before a launch: what the step-time model predicts of the run, as the prior alone and
    corrected by the campaign's calibration over the trials finished before it (so the
    calibrated error is out of sample). Scored against the run's measurement afterwards."""

    KIND = "prediction_made"
    trial: str
    hardware: str
    model_version: str
    tokens_per_s_per_device: float
    """The prior's prediction (``perfmodel.predict_step``)."""
    step_time_s: float
    breakdown: dict[str, float]
    """The prior's seconds per component (``perfmodel.COMPONENTS``)."""
    tokens_per_step: int
    world: int
    peak_memory_bytes: int | None = None
    fits: bool | None = None
    calibrated_tokens_per_s_per_device: float
    """The prediction corrected by ``factors``."""
    factors: dict[str, float]
    """The campaign's calibration then: group -> factor (``perfmodel.calibration.GROUPS``)."""
    band: float
    """The calibrated prediction's relative (log) error band then."""
    calibration_runs: int
    """Finished trials the calibration was fitted on."""
