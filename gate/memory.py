"""Peak device memory per GPU before launch, and how a campaign corrects it from measured peaks.

``predict_memory`` gives the bytes the most loaded device will hold at its peak, by component:
weights, gradients, optimizer state and saved activations (the formula and its sources are in
``gate.memory_megatron``: ZeRO's 16 bytes per parameter, Korthikanti et al. 2022's per-layer
activations, Narayanan et al. 2021's in-flight micro-batches). It counts what a framework
allocates for training state; it leaves to ``fits``'s margin the CUDA context, NCCL buffers,
allocator fragmentation and transient workspaces.

A campaign learns how far off the model is on its workload. ``MemoryCalibration`` keeps one
correction factor that multiplies every prediction, from two kinds of evidence:

- a measured peak (max-allocated bytes of a run that finished) gives the ratio
  measured / predicted exactly;
- an out-of-memory run is a censored observation: its real peak is unknown but above the
  device's capacity, so the ratio is at least capacity / predicted.

The factor is max(R, B): R the largest measured ratio (1.0 before any measured run), B the
largest OOM bound (none before an OOM). So one run that used more than predicted raises it for
the rest of the campaign; measured peaks below prediction lower it only while every measured
run was below (the factor is then the largest ratio seen, under 1), never below an OOM's bound;
an OOM raises it to at least capacity / predicted, and an OOM of a run predicted above capacity
(bound under 1) lowers nothing. The max is deliberately conservative: an OOM costs a whole
launch, a refusal one candidate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from gate import memory_megatron
from gate.models import EffectiveConfig, Recipe

GIB, MIB = 1024**3, 1024**2
DEFAULT_MARGIN = 0.10
"""Share of capacity ``fits`` holds back for what the model does not count: the CUDA context
and NCCL buffers (about 1 GiB together), allocator fragmentation, transient workspaces."""

DEVICE_MIB = {
    "a100-40gb": 40960,
    "a100-80gb": 81920,
    "h100": 81559,
    "h200": 143771,
    "b200": 183359,
    "l40s": 46068,
}
"""Total device memory as ``nvidia-smi`` reports it (MiB). Plain ``a100`` is the 40 GB part."""
ARCH_DEVICE = {"sm80": "a100-40gb", "sm89": "l40s", "sm90": "h100", "sm100": "b200"}
"""An architecture stands for its smallest part in ``DEVICE_MIB`` (sm90 is also the 141 GB
H200): a recipe on a larger part declares ``device_memory_gib``."""


class MemoryPrediction(BaseModel):
    """Predicted peak bytes on the most loaded device, by component."""

    model_config = ConfigDict(frozen=True)

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    """fp32 master weights and the optimizer's moments, after sharding."""
    activations_bytes: int
    """Saved activations of every micro-batch in flight, plus one recomputed group's."""
    layer_activation_bytes: int
    """One transformer layer, one micro-batch: Korthikanti et al.'s table-2 quantity."""
    parameters: int
    """Parameters of the whole model."""
    stage: str
    """The most loaded pipeline stage: ``first``, ``last`` or ``only`` (no pipeline)."""
    notes: list[str] = []
    """What was assumed or left out."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def weights_and_optimizer_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_bytes(self) -> int:
        return self.weights_and_optimizer_bytes + self.activations_bytes


def predict_memory(effective: EffectiveConfig) -> MemoryPrediction | None:
    """Peak bytes per device, or None when the effective config lacks the model's dimensions.

    Megatron-LM configs are predicted. None for torchtitan (its effective config names the
    model only by flavor and a digest: no layer count, hidden size or heads), for the embedded
    CPU workload, and for Megatron models the formula does not cover (multi-latent attention,
    hybrid Mamba layers).
    """
    if effective.framework != "megatron" or not memory_megatron.supported(effective.values):
        return None
    return MemoryPrediction(**memory_megatron.predict(effective.values))


class MemoryCalibration(BaseModel):
    """This campaign's evidence about the model's error; ``factor`` multiplies predictions."""

    model_config = ConfigDict(frozen=True)

    measured_ratio: float | None = None
    """Largest measured peak / predicted bytes seen; None before a measured run."""
    oom_bound: float | None = None
    """Largest capacity / predicted bytes of a run that ran out of memory; None before one."""
    measured: int = 0
    ooms: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def factor(self) -> float:
        """max(largest measured ratio or 1.0 before one, largest OOM lower bound)."""
        measured = 1.0 if self.measured_ratio is None else self.measured_ratio
        return measured if self.oom_bound is None else max(measured, self.oom_bound)


def _positive(**values: int) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")


def observe(
    calibration: MemoryCalibration, predicted_bytes: int, measured_peak_bytes: int
) -> MemoryCalibration:
    """Add a finished run's measured peak: an exact ratio measured / predicted."""
    _positive(predicted_bytes=predicted_bytes, measured_peak_bytes=measured_peak_bytes)
    ratio = measured_peak_bytes / predicted_bytes
    best = ratio if calibration.measured_ratio is None else max(calibration.measured_ratio, ratio)
    return calibration.model_copy(
        update={"measured_ratio": best, "measured": calibration.measured + 1}
    )


def observe_oom(
    calibration: MemoryCalibration, predicted_bytes: int, capacity_bytes: int
) -> MemoryCalibration:
    """Add a run that ran out of memory: censored, its ratio is at least capacity / predicted."""
    _positive(predicted_bytes=predicted_bytes, capacity_bytes=capacity_bytes)
    bound = capacity_bytes / predicted_bytes
    best = bound if calibration.oom_bound is None else max(calibration.oom_bound, bound)
    return calibration.model_copy(update={"oom_bound": best, "ooms": calibration.ooms + 1})


def calibration_from(
    runs: Iterable[tuple[int, int | None, str]], capacity_bytes: int | None
) -> MemoryCalibration:
    """The calibration a campaign's finished runs give: (predicted bytes, measured peak bytes
    or None, status) each. An ``oom`` run is censored at ``capacity_bytes``; an ``ok`` run with
    a measured peak is exact; others say nothing about memory."""
    calibration = MemoryCalibration()
    for predicted, measured, status in runs:
        if predicted <= 0:
            continue
        if status == "oom" and capacity_bytes:
            calibration = observe_oom(calibration, predicted, capacity_bytes)
        elif status == "ok" and measured:
            calibration = observe(calibration, predicted, measured)
    return calibration


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def fits(
    prediction: MemoryPrediction,
    calibration: MemoryCalibration,
    capacity_bytes: int,
    margin: float = DEFAULT_MARGIN,
) -> tuple[bool, str]:
    """Whether prediction x calibration factor stays within capacity less ``margin`` (a share
    of capacity), and a one-line reason naming the predicted GiB, the capacity and the margin."""
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    _positive(capacity_bytes=capacity_bytes)
    factor = calibration.factor
    expected = prediction.total_bytes * factor
    budget = capacity_bytes * (1 - margin)
    how = f"model {_gib(prediction.total_bytes)} x calibration {factor:.2f}, "
    how += f"{prediction.stage} pipeline stage" if prediction.stage != "only" else "no pipeline"
    ok = expected < budget  # strictly: an OOM's bound is strict (its peak exceeded capacity)
    verdict = "fits within" if ok else "exceeds"
    return ok, (
        f"predicted peak {_gib(expected)} per device ({how}) {verdict} {_gib(budget)}: "
        f"capacity {_gib(capacity_bytes)} less a {margin:.0%} margin"
    )


def device_capacity_bytes(gpu: str | None) -> int | None:
    """Memory of one device named by model (``H100``, ``A100-80GB``, ``H200``, ``B200``,
    ``L40S``) or architecture (``sm90``: its smallest part, see ``ARCH_DEVICE``); None when
    unknown."""
    if not gpu:
        return None
    key = gpu.strip().lower().replace(" ", "-").removeprefix("nvidia-")
    key = ARCH_DEVICE.get(key, key)
    key = {"a100": "a100-40gb"}.get(key, key)
    mib = DEVICE_MIB.get(key) or DEVICE_MIB.get(key.split("-", 1)[0])
    return None if mib is None else mib * MIB


def recipe_capacity_bytes(recipe: Recipe) -> int | None:
    """A recipe's device memory: its ``device_memory_gib`` if declared, else what its
    ``gpu_arch`` stands for; None when it declares neither."""
    body: dict[str, Any] = recipe.body
    declared = body.get("device_memory_gib")
    if declared is not None:
        return int(float(declared) * GIB)
    arch = body.get("gpu_arch")
    return device_capacity_bytes(arch) if isinstance(arch, str) else None
