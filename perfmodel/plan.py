"""A recipe's layout space priced by the step-time model, before anything launches.

``layouts(effective, ...)`` enumerates the layouts of a recipe's gate-allowed levers (each
lever is varied only when the registry classifies its keys as layout: the caller passes those
keys), deriving what the framework derives (Megatron-LM's data-parallel degree and micro-batch
count, the embedded workload's accumulation, torchtitan's FSDP shard degree) and skipping
layouts the framework's divisibility rules refuse. Each is priced by ``predict_step`` and the
campaign's calibration. ``path_to`` walks from the incumbent toward the predicted optimum one
lever at a time, each step the one-lever move with the best predicted gain per device-hour
that beats the noise threshold by more than the error band. Pure; the gate still resolves
each proposal through the framework before it runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

from gate.models import EffectiveConfig
from perfmodel.calibration import Calibration
from perfmodel.hardware import Part
from perfmodel.predict import predict_step

Lever = tuple[str, tuple[Any, ...]]
RECOMPUTE: dict[str, dict[str, Any]] = {
    "full": {
        "recompute_granularity": "full",
        "recompute_method": "uniform",
        "recompute_num_layers": 1,
    },
    "selective": {
        "recompute_granularity": "selective",
        "recompute_method": None,
        "recompute_num_layers": None,
    },
    "none": {"recompute_granularity": None, "recompute_method": None, "recompute_num_layers": None},
}
"""Megatron-LM's recompute lever: granularity, method and layer count move together."""


class Layout(BaseModel):
    """One layout of the space and what the model predicts of it."""

    levers: dict[str, Any]
    """Lever -> value (a framework key, or ``recompute`` for Megatron-LM's three keys)."""
    changes: dict[str, Any]
    """The recipe keys it sets, derived ones excluded (what a proposal changes)."""
    tokens_per_s_per_device: float
    step_time_s: float
    world: int
    peak_memory_bytes: int | None = None
    fits: bool | None = None
    memory: str = ""


def lever_choices(framework: str, v: dict[str, Any], cores: int) -> list[Lever]:
    if framework == "megatron":
        levers: list[Lever] = [
            ("tensor_model_parallel_size", (1, 2, 4, 8)),
            ("pipeline_model_parallel_size", (1, 2, 4, 8)),
            ("micro_batch_size", (1, 2, 4, 8)),
            ("recompute", ("full", "selective", "none")),
            ("overlap_grad_reduce", (False, True)),
        ]
        if v.get("use_distributed_optimizer"):
            levers.append(("overlap_param_gather", (False, True)))
        if int(v.get("num_experts") or 0) > 1:  # a MoE model: expert parallelism is layout
            levers.append(("expert_model_parallel_size", (1, 2, 4, 8)))
        return levers
    if framework == "embedded":
        ranks = max(1, int(v.get("data_parallel_size") or 1))
        threads = tuple(t for t in (1, 2, 4, 8, 16) if t * ranks <= max(cores, 1))
        return [
            ("threads", threads or (1,)),
            ("micro_batch_size", (1, 2, 4, 8, 16)),
            ("activation_checkpointing", (False, True)),
            ("attention", ("math", "sdpa")),
            ("compile", (False, True)),
            ("optimizer_impl", ("for_loop", "foreach", "fused")),
        ]
    if framework == "torchtitan":
        return [
            ("parallelism.tensor_parallel_degree", (1, 2, 4, 8)),
            ("activation_checkpoint", ("full", "selective", "none")),
            ("compile.enable", (False, True)),
        ]
    return []


def own_value(v: dict[str, Any], lever: str) -> Any:
    """The recipe's own value of a lever."""
    if lever == "recompute":
        return v.get("recompute_granularity") or "none"
    return v.get(lever)


def _with_own(values: tuple[Any, ...], own: Any) -> tuple[Any, ...]:
    """A lever's values with the recipe's own one (a 175B's pipeline of 16 is in its space)."""
    return values if own is None or own in values else (*values, own)


def _key_of(lever: str) -> str:
    return "recompute_granularity" if lever == "recompute" else lever


def _derived(framework: str, v: dict[str, Any], world: int) -> dict[str, Any] | None:
    """The values the framework derives from a layout; None when it refuses the layout."""
    out = dict(v)
    if framework == "megatron":
        tp, pp = int(v["tensor_model_parallel_size"]), int(v["pipeline_model_parallel_size"])
        cp, ep = (
            int(v.get("context_parallel_size") or 1),
            int(v.get("expert_model_parallel_size") or 1),
        )
        heads, layers = int(v["num_attention_heads"]), int(v["num_layers"])
        groups = (
            int(v.get("num_query_groups") or heads) if v.get("group_query_attention") else heads
        )
        if world % (tp * pp * cp) or heads % tp or groups % tp or layers % pp:
            return None
        dp = world // (tp * pp * cp)
        mbs, gbs = int(v["micro_batch_size"]), int(v["global_batch_size"])
        experts = int(v.get("num_experts") or 0)
        if (dp * cp) % ep or gbs % (mbs * dp) or (ep > 1 and (not experts or experts % ep)):
            return None
        vpp = v.get("virtual_pipeline_model_parallel_size")
        if vpp and (pp == 1 or layers % (pp * int(vpp))):
            out["virtual_pipeline_model_parallel_size"] = None
        out["data_parallel_size"], out["num_microbatches"] = dp, gbs // (mbs * dp)
        out["sequence_parallel"] = bool(v.get("sequence_parallel")) and tp > 1
        if not v.get("use_distributed_optimizer"):
            out["overlap_param_gather"] = False
        return out
    if framework == "embedded":
        ranks = max(1, int(v.get("data_parallel_size") or 1))
        per_rank = int(v["global_batch_size"]) // ranks
        mbs = int(v["micro_batch_size"])
        if per_rank % mbs:
            return None
        out["grad_accum_steps"] = per_rank // mbs
        return out
    if framework == "torchtitan":
        tp = int(v.get("parallelism.tensor_parallel_degree") or 1)
        pp = int(v.get("parallelism.pipeline_parallel_degree") or 1)
        cp = int(v.get("parallelism.context_parallel_degree") or 1)
        rep = int(v.get("parallelism.data_parallel_replicate_degree") or 1)
        if world % (tp * pp * cp * rep):
            return None
        out["parallelism.data_parallel_shard_degree"] = world // (tp * pp * cp * rep)
        return out
    return out


def layouts(
    effective: EffectiveConfig,
    hardware: Part,
    *,
    layout_keys: set[str],
    calibration: Calibration | None = None,
    device_memory_gib: float | None = None,
    cores: int = 1,
) -> Iterator[Layout]:
    """Every layout of the recipe's gate-allowed levers the framework's rules accept, priced."""
    calibration = calibration or Calibration()
    base = effective.values
    world = int(base.get("world_size") or effective.devices)
    levers = [
        (name, _with_own(values, own_value(base, name)))
        for name, values in lever_choices(effective.framework, base, cores)
        if _key_of(name) in layout_keys
    ]
    names = [name for name, _ in levers]
    for combo in itertools.product(*(values for _, values in levers)):
        chosen = dict(zip(names, combo, strict=True))
        changes: dict[str, Any] = {}
        for name, value in chosen.items():
            changes.update(RECOMPUTE[value] if name == "recompute" else {name: value})
        values = _derived(effective.framework, {**base, **changes}, world)
        if values is None:
            continue
        config = effective.model_copy(update={"values": values})
        try:
            p = predict_step(config, hardware, device_memory_gib=device_memory_gib)
        except (ValueError, KeyError, ZeroDivisionError):
            continue
        p = calibration.apply(p)
        yield Layout(
            levers=chosen,
            changes={k: v for k, v in changes.items() if base.get(k) != v},
            tokens_per_s_per_device=p.tokens_per_s_per_device,
            step_time_s=p.step_time_s,
            world=p.world,
            peak_memory_bytes=p.peak_memory_bytes,
            fits=p.fits,
            memory=p.memory_reason,
        )


def lever_values(effective: EffectiveConfig, space: list[Layout]) -> dict[str, Any]:
    """The incumbent's value of each lever of ``space``."""
    return {name: own_value(effective.values, name) for name in space[0].levers} if space else {}


class Step(BaseModel):
    """One move of the path: one lever, with what the model predicts of it."""

    lever: str
    old: Any
    new: Any
    layout: Layout
    gain_pct: float
    """Predicted gain over the step before, in percent."""
    trial_device_s: float


def path_to(
    start: dict[str, Any],
    space: list[Layout],
    *,
    steps: int,
    threshold_pct: float,
    band_pct: float,
    limit: int = 12,
    cost: Callable[[Layout], float] | None = None,
) -> list[Step]:
    """One lever at a time from ``start``: each step the fitting one-lever neighbour with the
    best predicted gain per device-hour, while the predicted gain exceeds the noise threshold
    plus the error band (a smaller one is not worth a trial: the model cannot tell it apart).
    """
    price = cost or (lambda x: x.step_time_s * x.world * steps)
    by_levers = {tuple(sorted(x.levers.items(), key=lambda kv: kv[0])): x for x in space}
    here = by_levers.get(tuple(sorted(start.items(), key=lambda kv: kv[0])))
    if here is None:
        return []
    path: list[Step] = []
    seen = {id(here)}
    while len(path) < limit:
        best: tuple[float, Step] | None = None
        for name in here.levers:
            for other in space:
                if id(other) in seen or other.fits is False:
                    continue
                if any(other.levers[k] != here.levers[k] for k in here.levers if k != name):
                    continue
                if other.levers[name] == here.levers[name]:
                    continue
                gain = 100 * (other.tokens_per_s_per_device / here.tokens_per_s_per_device - 1)
                if gain <= threshold_pct + band_pct:
                    continue
                trial = price(other)
                rate = gain / max(trial, 1e-9)
                if best is None or rate > best[0]:
                    step = Step(
                        lever=name,
                        old=here.levers[name],
                        new=other.levers[name],
                        layout=other,
                        gain_pct=gain,
                        trial_device_s=trial,
                    )
                    best = (rate, step)
        if best is None:
            return path
        path.append(best[1])
        here = best[1].layout
        seen.add(id(here))
    return path
