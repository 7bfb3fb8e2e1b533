"""One training step's time on given hardware, by component, before any launch.

``predict_step(effective, part)`` reads the step (``perfmodel.workload``), counts its FLOPs
(``perfmodel.flops``) and its communication (``perfmodel.comm``), and prices them with the
part's published peaks (``registry/hardware/parts.yaml``) and the model's named factors
(``registry/hardware/factors.yaml``):

- compute: layer matmuls at the bf16 peak (x the FP8 speed-up when FP8 is on) times an
  achieved-efficiency curve of the micro-batch's GEMM shape, I/(I + I_half) of the
  generation's best share, I the arithmetic intensity of a (tokens x hidden) by
  (hidden x hidden/TP) GEMM; causal attention at its own efficiency; memory-bound kernels as a
  share of that (fused or eager); recompute as extra forward FLOPs;
- exposed communication per kind: TP and EP in full unless overlapped, CP and PP p2p what the
  attention / neighbouring compute does not cover, DP gradient reduce and parameter gather
  hidden behind the backward (forward) of the last (first) micro-batch when their overlap
  flags are on, per micro-batch under FSDP;
- pipeline bubble (p - 1) / (v m) of the pipelined work (Narayanan et al. 2021, eq. 1-2);
- optimizer step: HBM bytes per locally updated parameter;
- other: host launch overhead per layer and micro-batch (less with CUDA graphs) and a fixed
  per-step cost.

``StepPrediction.corrected(factors)`` multiplies components by per-component factors (a
campaign's calibration) and recomputes the totals.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.comm import communication, local_parameters
from perfmodel.flops import recompute_forward, token_flops
from perfmodel.hardware import TERA, Part, load_factors
from perfmodel.workload import Workload

MODEL_VERSION = "perfmodel-1"
COMPONENTS = ("compute", "tp", "cp", "ep", "pp_p2p", "dp", "bubble", "optimizer", "other")


class StepPrediction(BaseModel):
    """Predicted step time and its parts (seconds), with the throughput they give."""

    model_config = ConfigDict(frozen=True)

    hardware: str
    model_version: str = MODEL_VERSION
    world: int
    tokens_per_step: int
    model_flops_per_step: float
    peak_flops_per_device: float
    breakdown: dict[str, float]
    """Seconds per component, exposed time only: sums to ``step_time_s``."""
    notes: list[str] = []
    peak_memory_bytes: int | None = None
    """Predicted peak on the most loaded device (``gate.memory``); None without a model."""
    capacity_bytes: int | None = None
    fits: bool | None = None
    memory_reason: str = ""

    @property
    def step_time_s(self) -> float:
        return sum(self.breakdown.values())

    @property
    def tokens_per_s_per_device(self) -> float:
        return self.tokens_per_step / self.step_time_s / self.world

    @property
    def mfu(self) -> float:
        """Model FLOPs (no recompute) per second per device over the dense bf16 peak."""
        per_device = self.model_flops_per_step / self.step_time_s / self.world
        return per_device / self.peak_flops_per_device

    def corrected(self, factors: dict[str, float]) -> StepPrediction:
        """The prediction with each named component multiplied by its factor (others kept)."""
        unknown = set(factors) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown components {sorted(unknown)}: known {COMPONENTS}")
        scaled = {k: v * factors.get(k, 1.0) for k, v in self.breakdown.items()}
        return self.model_copy(update={"breakdown": scaled})


def _f(name: str) -> float:
    return load_factors().factors[name].value


def gemm_efficiency(w: Workload, hw: Part) -> float:
    """Achieved share of the bf16 peak for the micro-batch's typical GEMM."""
    m = w.micro_batch * w.seq / w.cp
    k, n = w.hidden, max(1.0, w.hidden / w.tp)
    intensity = 1 / (1 / m + 1 / k + 1 / n)
    best = _f(f"gemm_efficiency_{hw.generation}")
    half = _f("gemm_half_intensity_cpu" if hw.generation == "cpu" else "gemm_half_intensity")
    return best * intensity / (intensity + half)


def fp8_speedup(w: Workload, hw: Part) -> float:
    if w.fp8 == "none" or hw.fp8_tflops is None:
        return 1.0
    return _f(f"fp8_speedup_{w.fp8}")


def _exposed(comm: float, share: float, window: float) -> float:
    """What overlap leaves: at least ``share`` of it, all that ``window`` cannot cover."""
    return max(comm * share, comm - window)


def predict_workload(w: Workload, hw: Part) -> StepPrediction:
    notes: list[str] = []
    peak = hw.bf16_tflops * TERA * (w.threads if hw.generation == "cpu" else 1)
    sustained = peak * (_f("power_capped_share") if hw.power_capped else 1.0)
    f = token_flops(w)
    extra = recompute_forward(w, f, _f("torchtitan_selective_recompute_share"))
    tokens = w.tokens_per_step
    linear = tokens * 3 * f.layer_linear + tokens * extra.layer_linear
    attention = tokens * (3 * f.attention + extra.attention)
    head = tokens * 3 * f.head
    eff = gemm_efficiency(w, hw)
    t_linear = linear / w.world / (sustained * eff * fp8_speedup(w, hw))
    t_head = head / w.world / (sustained * eff)
    kernel = "attention_efficiency_te" if w.framework == "megatron" else "attention_efficiency_sdpa"
    attn_eff = min(_f(kernel), _f(f"gemm_efficiency_{hw.generation}"))
    t_attn = attention / w.world / (sustained * attn_eff * (1.0 if w.flash_attention else 0.5))
    if not w.flash_attention:
        notes.append("attention without a fused kernel: at half the fused kernel's speed")
    elementwise = _f(f"elementwise_overhead_{'fused' if w.fused_kernels else 'eager'}")
    compute = (t_linear + t_head + t_attn) * (1 + elementwise)
    per_micro = compute / w.microbatches

    c = communication(w, hw, _f("comm_efficiency"))
    tp_share = _f("tp_overlap_exposed_share" if w.tp_overlap else "tp_exposed_share")
    tp = c.tp * tp_share
    cp = _exposed(c.cp, _f("cp_exposed_share"), t_attn)
    ep = c.ep * _f("ep_exposed_share")
    pp = c.pp_p2p * _f("pp_p2p_exposed_share")
    share = _f("dp_overlap_exposed_share")
    if w.fsdp:
        dp = _exposed(c.dp_grad + c.dp_param, share, compute)
    else:
        grad = _exposed(c.dp_grad, share, per_micro * 2 / 3) if w.overlap_grad_reduce else c.dp_grad
        gather_on = w.overlap_param_gather
        param = _exposed(c.dp_param, share, per_micro / 3) if gather_on else c.dp_param
        dp = grad + param
    bubble = (w.pp - 1) / (w.vpp * w.microbatches) * (compute + tp + cp + ep) if w.pp > 1 else 0.0

    updated = local_parameters(w) / (w.dp * w.cp if (w.distributed_optimizer or w.fsdp) else 1)
    slowdown = {"fused": 1.0, "foreach": _f("optimizer_slowdown_foreach")}.get(
        w.optimizer_impl, _f("optimizer_slowdown_for_loop")
    )
    bandwidth = hw.hbm_gbps * 1e9 * _f("optimizer_bandwidth_share")
    optimizer = updated * _f("optimizer_bytes_per_param") / bandwidth * slowdown
    launch = _f("launch_overhead_s") * (w.layers / w.pp) * w.microbatches
    launch *= _f("cuda_graph_overhead_share") if w.cuda_graphs else 1.0
    other = launch + _f("step_overhead_s")
    breakdown = {
        "compute": compute,
        "tp": tp,
        "cp": cp,
        "ep": ep,
        "pp_p2p": pp,
        "dp": dp,
        "bubble": bubble,
        "optimizer": optimizer,
        "other": other,
    }
    return StepPrediction(
        hardware=hw.key,
        world=w.world,
        tokens_per_step=tokens,
        model_flops_per_step=tokens * f.model,
        peak_flops_per_device=peak,
        breakdown=breakdown,
        notes=[*w.notes, *notes],
    )
