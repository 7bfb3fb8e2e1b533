"""The simulated cluster's TRUTH: what a layout "really" costs and holds on the simulated GPUs.

Hidden from every agent (``tests/test_sim_backend.py`` proves no module under ``bot/agents/``
can reach it): agents learn it only through runs, like on a real cluster. It is deliberately
NOT attune's own prediction:

* step time = ``perfmodel.predict_step`` x a seeded, deterministic deviation per layout x
  per-run noise. The deviation is log-normal, built from one term per lever set away from
  its reference value (the lever's main effect, 70% of the variance) and one per pair of
  such levers (interactions, 30%), each drawn from a hash of (seed, lever, value): the same
  layout always deviates the same way in a campaign, two seeds are two different clusters.
  ``spread`` is the deviation's log standard deviation for a layout four levers away from
  the reference (0.15: such a layout is typically 15% off the model), see ``log_deviation``.
* per-run noise: log-normal with ``cv`` (default 2.5%, what repeated GPU runs show), each
  step with a third of it again; the first steps are slow (allocator, compilation, NCCL).
* peak memory = the gate's memory model x ``memory_factor`` (the model is conservative) x a
  per-layout deviation (3%); above the device's capacity the run dies of out-of-memory.
* a run hangs with probability ``hang_rate`` and crashes (an NCCL error) with ``crash_rate``,
  drawn per run.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.errors import AttuneError
from gate.models import EffectiveConfig
from perfmodel import Part, StepPrediction, Workload, predict_step, workload_of

GIB = 2**30

LEVERS = (
    "tp",
    "pp",
    "vpp",
    "cp",
    "ep",
    "micro_batch",
    "recompute",
    "sequence_parallel",
    "fsdp",
    "distributed_optimizer",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "fp8",
    "tp_overlap",
    "cuda_graphs",
    "fused_kernels",
    "flash_attention",
    "optimizer_impl",
)
"""The layout levers the deviation is structured by (``perfmodel.Workload`` fields)."""

MAIN_SHARE = 0.7
"""Share of the deviation's variance in the levers' main effects; the rest is interactions."""
LEVERS_VARIED = 4
"""Levers away from the reference at which a layout's deviation has sd ``spread``."""

STARTUP_S = 60.0
"""Simulated seconds from allocation to the first step (imports, NCCL init, model build)."""

WARMUP_SLOWDOWN = (3.0, 1.4, 1.1)
"""The first steps' time over a steady step's (allocator, compilation, NCCL warm-up)."""


class SimParams(BaseModel):
    """The simulated cluster of one campaign: recorded in its ``campaign_opened`` event
    (``simulation``) so that a resumed campaign, or anyone reading the ledger, has the same."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = 0
    spread: float = Field(0.15, ge=0.0, le=1.0)
    """Log standard deviation of the per-layout deviation from the step-time model."""
    cv: float = Field(0.025, ge=0.0, le=0.5)
    """Per-run noise (coefficient of variation of a run's mean step time)."""
    hang_rate: float = Field(0.0, ge=0.0, le=1.0)
    crash_rate: float = Field(0.0, ge=0.0, le=1.0)
    memory_factor: float = Field(0.8, gt=0.0, le=2.0)
    """True peak over the gate's memory model's (the model keeps a safety margin)."""
    noise_seed: int | None = None
    """Seed of the runs' noise, hangs and crashes (default ``seed``): campaigns on one
    cluster (one ``seed``) that draw different noise, as the tuner benchmark runs them."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> SimParams:
        """``ATTUNE_SIM_SEED``, ``_SPREAD``, ``_CV``, ``_HANG_RATE``, ``_CRASH_RATE``,
        ``_MEMORY_FACTOR``; absent ones keep their defaults. A bad value is an AttuneError."""
        values: dict[str, Any] = {}
        for field in cls.model_fields:
            raw = environ.get(f"ATTUNE_SIM_{field.upper()}")
            if raw is not None and raw.strip():
                values[field] = raw.strip()
        try:
            return cls.model_validate(values)
        except ValueError as exc:
            raise AttuneError(f"bad ATTUNE_SIM_* setting: {exc}") from None


def _normal(*key: object) -> float:
    """A standard normal drawn from a hash of ``key``: the same key, the same draw."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).gauss(0.0, 1.0)


def _uniform(*key: object) -> float:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def lever_values(w: Workload) -> list[tuple[str, str]]:
    """The layout as (lever, value) pairs, in ``LEVERS`` order."""
    return [(name, str(getattr(w, name))) for name in LEVERS]


def log_deviation(w: Workload, params: SimParams) -> float:
    """The layout's log deviation from the step-time model.

    A global term (the model's bias on this cluster, sd ``spread / 2``), one main effect per
    lever set away from its reference value (``perfmodel.Workload``'s default: TP 1, no
    recompute, no overlap...), sd ``spread x sqrt(MAIN_SHARE / LEVERS_VARIED)``, and one
    interaction per pair of such levers, sd ``spread x sqrt((1 - MAIN_SHARE) / pairs)``: a
    layout ``LEVERS_VARIED`` levers away from the reference deviates by about ``spread``
    beyond the global bias, and two layouts one lever apart differ by that lever's effect and
    its interactions only."""
    if params.spread == 0:
        return 0.0
    reference = {name: str(Workload.model_fields[name].default) for name in LEVERS}
    moved = [(lever, value) for lever, value in lever_values(w) if value != reference[lever]]
    k = LEVERS_VARIED
    main = math.sqrt(MAIN_SHARE / k) * params.spread
    inter = math.sqrt((1 - MAIN_SHARE) / (k * (k - 1) / 2)) * params.spread
    total = params.spread / 2 * _normal(params.seed, "global")
    total += sum(main * _normal(params.seed, "main", lever, value) for lever, value in moved)
    for i in range(len(moved)):
        for j in range(i + 1, len(moved)):
            total += inter * _normal(params.seed, "pair", *moved[i], *moved[j])
    return total


class TrueLayout(BaseModel):
    """What the truth says of one layout (no run noise)."""

    step_time_s: float
    """Steady step time on the simulated cluster."""
    predicted_step_time_s: float
    """``perfmodel``'s step time (for the benchmark's tables, never shown to agents)."""
    peak_memory_bytes: int
    capacity_bytes: int
    tokens_per_step: int
    model_flops_per_step: float
    peak_flops_per_device: float
    world: int
    shares: dict[str, float]
    """Share of a step per trace category (``compute``, ``communication``, ``cpu``; the rest
    idle), from the model's breakdown: what a simulated profile shows."""

    @property
    def fits(self) -> bool:
        return self.peak_memory_bytes <= self.capacity_bytes

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.tokens_per_step / self.step_time_s / self.world


def true_layout(
    effective: EffectiveConfig,
    hardware: Part,
    params: SimParams,
    *,
    device_memory_gib: float | None = None,
) -> TrueLayout:
    """The truth of ``effective`` on ``hardware``; the embedded workload has none (it runs
    for real on the CPU)."""
    if effective.framework not in ("megatron", "torchtitan"):
        raise AttuneError(
            f"the simulated cluster runs Megatron-LM and torchtitan recipes; a "
            f"{effective.framework} recipe runs for real on this machine (--backend local)"
        )
    prediction: StepPrediction = predict_step(
        effective, hardware, device_memory_gib=device_memory_gib
    )
    w = workload_of(effective)
    step = prediction.step_time_s * math.exp(log_deviation(w, params))
    model_peak = prediction.peak_memory_bytes or 0
    memory_dev = math.exp(0.03 * _normal(params.seed, "memory", *lever_values(w)))
    capacity = prediction.capacity_bytes or int((device_memory_gib or hardware.hbm_gib) * GIB)
    return TrueLayout(
        step_time_s=step,
        predicted_step_time_s=prediction.step_time_s,
        peak_memory_bytes=int(model_peak * params.memory_factor * memory_dev),
        capacity_bytes=capacity,
        tokens_per_step=prediction.tokens_per_step,
        model_flops_per_step=prediction.model_flops_per_step,
        peak_flops_per_device=prediction.peak_flops_per_device,
        world=prediction.world,
        shares=_shares(prediction),
    )


def _shares(prediction: StepPrediction) -> dict[str, float]:
    b, total = prediction.breakdown, max(prediction.step_time_s, 1e-12)
    comm = sum(b.get(k, 0.0) for k in ("tp", "cp", "ep", "pp_p2p", "dp"))
    cpu = b.get("other", 0.0) + b.get("optimizer", 0.0)
    return {
        "compute": b.get("compute", 0.0) / total,
        "communication": comm / total,
        "cpu": cpu / total,
    }


RunEnd = Literal["ok", "oom", "hang", "crash"]


class TrueRun(BaseModel):
    """One simulated run: its steps' times, how it ends, its simulated wall time."""

    end: RunEnd
    step_seconds: list[float]
    """The steps it completes (all of them when it ends ok)."""
    peak_memory_bytes: int
    startup_s: float = STARTUP_S


def true_run(layout: TrueLayout, params: SimParams, *, run_key: str, steps: int) -> TrueRun:
    """One run of ``steps`` steps of ``layout``; ``run_key`` names the run (its trial and
    attempt): the same key, the same run."""
    if not layout.fits:
        return TrueRun(end="oom", step_seconds=[], peak_memory_bytes=layout.peak_memory_bytes)
    seed = params.seed if params.noise_seed is None else params.noise_seed
    sigma = math.sqrt(math.log(1 + params.cv**2))
    run_factor = math.exp(sigma * _normal(seed, "run", run_key) - sigma**2 / 2)
    times = []
    for i in range(steps):
        slow = WARMUP_SLOWDOWN[i] if i < len(WARMUP_SLOWDOWN) else 1.0
        jitter = math.exp(sigma / 3 * _normal(seed, "step", run_key, i))
        times.append(layout.step_time_s * run_factor * slow * jitter)
    draw = _uniform(seed, "fate", run_key)
    if draw < params.hang_rate or draw < params.hang_rate + params.crash_rate:
        cut = 1 + int(_uniform(seed, "cut", run_key) * max(steps - 1, 1))
        end: RunEnd = "hang" if draw < params.hang_rate else "crash"
        return TrueRun(
            end=end, step_seconds=times[:cut], peak_memory_bytes=layout.peak_memory_bytes
        )
    return TrueRun(end="ok", step_seconds=times, peak_memory_bytes=layout.peak_memory_bytes)
