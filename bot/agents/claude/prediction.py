"""The ``predict`` tool's answer and the prediction every accepted proposal records."""

from __future__ import annotations

from typing import Any

from bot.probe import Probe


def prediction_answer(probe: Probe) -> dict[str, Any]:
    """The ``predict`` tool's answer."""
    device_s = probe.predicted_trial_device_s
    return {
        "predicted_gain_pct": round(probe.predicted_gain_pct or 0.0, 2),
        "band_pct": round(probe.band_pct or 0.0, 2),
        "predicted_tokens_per_s_per_device": probe.predicted_tokens_per_s,
        "trial_device_hours": None if device_s is None else device_s / 3600,
        "predicted_peak_bytes": probe.predicted_peak_bytes,
        "fits": probe.fits,
        "memory": probe.memory,
    }


def with_prediction(mechanism: str, probe: Probe) -> str:
    """The hypothesis's mechanism with the model's prediction of the move appended."""
    if probe.predicted_gain_pct is None:
        return mechanism
    return (
        f"{mechanism} [step-time model: predicted {probe.predicted_gain_pct:+.1f}% "
        f"(band +-{probe.band_pct or 0:.1f}%)]"
    )
