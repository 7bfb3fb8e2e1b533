"""Campaign calibration of the memory prediction (gate/memory.py): measured peaks, OOMs as
censored observations, the refusal message, device capacities and the recipe's declaration."""

from __future__ import annotations

import pytest

from gate.memory import (
    DEFAULT_MARGIN,
    GIB,
    MemoryCalibration,
    MemoryPrediction,
    device_capacity_bytes,
    fits,
    observe,
    observe_oom,
    recipe_capacity_bytes,
)
from gate.models import Recipe


def _prediction(weights_gib: float, activations_gib: float) -> MemoryPrediction:
    return MemoryPrediction(
        weights_bytes=int(weights_gib * GIB),
        gradients_bytes=0,
        optimizer_bytes=0,
        activations_bytes=int(activations_gib * GIB),
        layer_activation_bytes=0,
        parameters=1,
        stage="first",
    )


# Calibration: measured peaks are exact ratios, OOMs censored lower bounds.


def test_calibration_takes_the_largest_ratio_seen() -> None:
    fresh = MemoryCalibration()
    assert fresh.factor == 1.0
    high = observe(fresh, predicted_bytes=100 * GIB, measured_peak_bytes=120 * GIB)
    assert high.factor == pytest.approx(1.2)
    assert observe(high, 100 * GIB, 90 * GIB).factor == pytest.approx(1.2)  # kept
    low = observe(fresh, 100 * GIB, 80 * GIB)
    assert low.factor == pytest.approx(0.8)  # every measured run below: lowered
    assert observe(low, 100 * GIB, 90 * GIB).factor == pytest.approx(0.9)
    assert (low.measured, low.ooms) == (1, 0)


def test_oom_raises_the_factor_to_at_least_capacity_over_predicted() -> None:
    capacity = 80 * GIB
    after = observe_oom(MemoryCalibration(), predicted_bytes=64 * GIB, capacity_bytes=capacity)
    assert after.factor >= capacity / (64 * GIB) == 1.25
    assert after.ooms == 1
    # a later measured run below prediction cannot lower it under the OOM's bound
    assert observe(after, 100 * GIB, 70 * GIB).factor == pytest.approx(1.25)
    # an OOM of a run already predicted above capacity lowers nothing
    assert observe_oom(MemoryCalibration(), 100 * GIB, capacity).factor == 1.0
    low = observe(MemoryCalibration(), 100 * GIB, 60 * GIB)
    assert observe_oom(low, 100 * GIB, capacity).factor == pytest.approx(0.8)
    # the config that ran out no longer fits once calibrated
    pred = _prediction(50, 20)
    ran_out = observe_oom(MemoryCalibration(), pred.total_bytes, pred.total_bytes)
    assert not fits(pred, ran_out, pred.total_bytes, margin=0.0)[0]
    with pytest.raises(ValueError, match="measured_peak_bytes must be positive"):
        observe(MemoryCalibration(), 1, 0)


def test_refusal_names_predicted_gib_capacity_and_margin() -> None:
    pred = _prediction(60, 25.5)
    capacity = device_capacity_bytes("H100")
    assert capacity is not None
    ok, message = fits(pred, MemoryCalibration(), capacity)
    assert not ok
    assert f"predicted peak {pred.total_bytes / GIB:.1f} GiB per device" in message
    assert "predicted peak 85.5 GiB per device (model 85.5 GiB x calibration 1.00" in message
    assert "exceeds 71.7 GiB: capacity 79.6 GiB less a 10% margin" in message
    assert f"less a {DEFAULT_MARGIN:.0%} margin" in message
    calibrated = observe(MemoryCalibration(), 100, 110)
    ok, message = fits(_prediction(40, 20), calibrated, capacity)
    assert ok and "predicted peak 66.0 GiB" in message and "x calibration 1.10" in message
    assert "fits within 71.7 GiB" in message
    assert not fits(_prediction(40, 20), calibrated, capacity, margin=0.2)[0]


def test_device_capacities() -> None:
    assert device_capacity_bytes("H100") == 81559 * 1024**2
    assert device_capacity_bytes("NVIDIA H200") == 143771 * 1024**2
    assert device_capacity_bytes("A100-80GB") == 81920 * 1024**2
    assert device_capacity_bytes("a100") == device_capacity_bytes("A100 40GB") == 40 * GIB
    assert device_capacity_bytes("sm90") == device_capacity_bytes("h100")  # smallest sm90 part
    assert device_capacity_bytes("B200") == device_capacity_bytes("sm100")
    assert device_capacity_bytes("L40S") is not None
    assert device_capacity_bytes("V100") is device_capacity_bytes(None) is None


def test_recipe_declares_device_memory_and_the_framework_never_sees_it() -> None:
    from runners.megatron.adapter import MegatronAdapter
    from runners.megatron.recipe import MegatronRecipe
    from runners.torchtitan.adapter import TorchtitanAdapter
    from runners.torchtitan.recipe import TorchtitanRecipe

    body = {"world_size": 8, "gpu_arch": "sm90", "args": ["--num-layers", "2"]}
    declared = {**body, "device_memory_gib": 141}
    recipe = Recipe(framework="megatron", name="r", path="r.yaml", body=declared)
    assert recipe_capacity_bytes(recipe) == 141 * GIB
    assert recipe_capacity_bytes(recipe.model_copy(update={"body": body})) == 81559 * 1024**2
    megatron = MegatronRecipe.model_validate(declared)
    assert megatron.device_memory_gib == 141
    assert "141" not in str(MegatronAdapter().request_item(megatron))
    assert MegatronAdapter().request_item(megatron) == MegatronAdapter().request_item(
        MegatronRecipe.model_validate(body)
    )
    titan = TorchtitanRecipe.model_validate(
        {"world_size": 8, "module": "llama3", "config": "llama3_8b", "device_memory_gib": 80}
    )
    assert "device_memory_gib" not in TorchtitanAdapter().request_item(titan)
    with pytest.raises(ValueError, match="greater than 0"):
        MegatronRecipe.model_validate({**body, "device_memory_gib": 0})
