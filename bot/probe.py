"""What the campaign gives an agent about the step-time model and about a move before it
proposes it (re-exported by ``bot.interfaces``)."""

from __future__ import annotations

from pydantic import BaseModel

from gate.models import EffectiveConfig
from perfmodel.calibration import Calibration


class ModelView(BaseModel):
    """The campaign's step-time model as an agent may use it: the part its runs are predicted
    on and the calibration fitted on its finished runs (``bot/campaign/predictions.py``)."""

    hardware: str
    """A part of ``registry/hardware/parts.yaml``."""
    device_memory_gib: float | None = None
    calibration: Calibration


class Probe(BaseModel):
    """What the campaign tells an agent about a move before it proposes it."""

    fingerprint: str
    """Effective-config fingerprint of the incumbent with the move's changes."""
    fits: bool = True
    """False when the memory model predicts the move does not fit the device."""
    memory: str | None = None
    """The memory model's one-line verdict (predicted peak, capacity, margin), if it has one."""
    effective: EffectiveConfig | None = None
    """The incumbent with the move's changes, resolved: what the pre-launch gate will judge."""
    baseline: EffectiveConfig | None = None
    """The campaign's baseline the gate judges it against (with ``effective``, the agent runs
    the gate's own judgement before proposing)."""
    predicted_gain_pct: float | None = None
    """The campaign's calibrated step-time model: the move's tokens/s/device over the
    incumbent's, minus 1, in percent (``bot/campaign/predictions.py``); None without a
    prediction."""
    band_pct: float | None = None
    """The calibrated model's error band now, in percent: a predicted gain inside +-band is
    not evidence either way."""
    predicted_tokens_per_s: float | None = None
    """The move's calibrated tokens/s/device."""
    predicted_trial_device_s: float | None = None
    """What one trial of the move is predicted to cost (device-seconds of its steps)."""
    predicted_peak_bytes: int | None = None
    """The memory model's peak per device (uncalibrated), when it has one."""
