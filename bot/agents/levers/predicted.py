"""What the rules agent does with the calibrated model's predictions: the pruning rule, the
text a hypothesis cites, and the memory savers a memory-hungry move may be paired with."""

from __future__ import annotations

from typing import Any

from bot.probe import Probe

SAVERS: dict[str, list[dict[str, Any]]] = {
    "megatron": [
        {"recompute_granularity": "selective", "recompute_method": None},
        {"use_distributed_optimizer": True},
        {"recompute_granularity": "full", "recompute_method": "uniform"},
    ],
    "embedded": [{"activation_checkpointing": True}],
}
"""Memory savers a memory-hungry move may be paired with, cheapest in time first: Megatron's
selective recompute (attention core only) before the sharded optimizer before full recompute;
the embedded workload's activation checkpointing."""


def slower_beyond_band(probe: Probe) -> bool:
    """The calibrated model predicts the move slower than the incumbent by more than its error
    band: a cheap refusal, like a predicted out-of-memory."""
    gain, band = probe.predicted_gain_pct, probe.band_pct
    return gain is not None and band is not None and gain < -band


def prediction_text(probe: Probe) -> str:
    """The prediction a hypothesis cites: gain, band, throughput and a trial's cost."""
    text = f"predicted {probe.predicted_gain_pct:+.1f}% (band +-{probe.band_pct or 0:.1f}%)"
    if probe.predicted_tokens_per_s is not None:
        text += f", {probe.predicted_tokens_per_s:,.0f} tokens/s/device"
    if probe.predicted_trial_device_s is not None:
        text += f", {probe.predicted_trial_device_s / 3600:.3g} device-hours a trial"
    return text
