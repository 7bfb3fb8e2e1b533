"""What the rules agent does with the calibrated model's predictions: the pruning rule, the
text a hypothesis cites, and the memory savers a memory-hungry move may be paired with."""

from __future__ import annotations

from typing import Any

from bot.probe import ModelView, Probe
from gate.errors import AttuneError
from gate.models import EffectiveConfig
from perfmodel import predict_step
from perfmodel.hardware import part
from perfmodel.plan import RECOMPUTE

SAVERS: dict[str, list[dict[str, Any]]] = {
    "megatron": [
        dict(RECOMPUTE["selective"]),
        {"use_distributed_optimizer": True},
        dict(RECOMPUTE["full"]),
    ],
    "embedded": [{"activation_checkpointing": True}],
}
"""Memory savers a memory-hungry move may be paired with, cheapest in time first: Megatron's
selective recompute (attention core only) before the sharded optimizer before full recompute;
the embedded workload's activation checkpointing. A recompute saver sets granularity, method and
layer count together (``perfmodel.plan.RECOMPUTE``): Megatron-LM refuses full recompute without
a layer count and selective recompute with a method."""


MODEL_NAMES_THE_BOTTLENECK = ("megatron", "torchtitan")
"""Frameworks whose incumbent's bottleneck the calibrated model may name instead of a profile
run, when it predicts a move beyond the noise: the GPU step-time model is checked against
published runs (docs/perf-model.md); the embedded CPU workload keeps its profile."""
SHARES = {
    "compute": ("compute", "optimizer", "other"),
    "communication": ("tp", "cp", "ep", "pp_p2p", "dp"),
    "idle": ("bubble",),
}
"""The profile's bottlenecks, as sums of the step-time model's components."""


def beyond_noise(probe: Probe | None, threshold: float) -> bool:
    """The calibrated model predicts the move faster than the incumbent by more than the noise
    threshold (a fraction) plus its band: a gain a measurement can tell from the noise."""
    if probe is None or probe.predicted_gain_pct is None:
        return False
    return probe.predicted_gain_pct > 100 * threshold + (probe.band_pct or 0.0)


def predicted_bottleneck(
    model: ModelView | None, effective: EffectiveConfig | None
) -> tuple[str, float] | None:
    """The largest share of the incumbent's step by the calibrated model's breakdown (compute,
    communication or idle: the pipeline bubble), and the share; None without a prediction."""
    if model is None or effective is None:
        return None
    try:
        prior = predict_step(
            effective, part(model.hardware), device_memory_gib=model.device_memory_gib
        )
    except (AttuneError, KeyError, ValueError, TypeError, ZeroDivisionError):
        return None
    b = model.calibration.apply(prior).breakdown
    shares = {k: sum(b.get(c, 0.0) for c in comps) for k, comps in SHARES.items()}
    total = sum(shares.values())
    if total <= 0:
        return None
    neck = max(shares, key=lambda k: shares[k])
    return neck, shares[neck] / total


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
