"""What one training step does, read from an effective config: the model's dimensions and the
layout, in one shape for every framework.

Megatron-LM's resolved arguments carry the dimensions. torchtitan's effective config names the
model only by module and flavor, so the dimensions of its published flavors are here, read from
torchtitan 0.3.0 (``torchtitan/models/llama3/__init__.py``: ``_debugmodel`` .. ``_405b``). The
embedded workload's config is its own (``runners/embedded/config.py``, ``model.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gate.errors import AttuneError
from gate.models import EffectiveConfig

Recompute = Literal["none", "selective", "selective_op", "full"]
Fp8 = Literal["none", "tensorwise", "rowwise", "mxfp8"]

TORCHTITAN_FLAVORS: dict[str, dict[str, dict[str, int]]] = {
    "llama3": {
        "debugmodel": dict(layers=6, hidden=256, heads=16, kv_heads=16, ffn=768, vocab=2048),
        "1B": dict(layers=16, hidden=2048, heads=32, kv_heads=8, ffn=8192, vocab=128256),
        "3B": dict(layers=28, hidden=3072, heads=24, kv_heads=8, ffn=8192, vocab=128256),
        "8B": dict(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=128256),
        "70B": dict(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=128256),
        "405B": dict(layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256),
    }
}
"""torchtitan 0.3.0 llama3 flavors (SwiGLU, RMSNorm, untied output, no biases)."""


class Workload(BaseModel):
    """One optimizer step of one recipe, framework-neutral."""

    model_config = ConfigDict(frozen=True)

    framework: str
    # model
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    seq: int
    swiglu: bool = True
    experts: int = 0
    topk: int = 0
    moe_ffn: int = 0
    shared_ffn: int = 0
    moe_layers: int = 0
    # layout
    world: int
    tp: int = 1
    pp: int = 1
    vpp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 1
    micro_batch: int = 1
    microbatches: int = 1
    """Micro-batches each data-parallel rank runs per optimizer step (accumulation or pipeline)."""
    # levers
    sequence_parallel: bool = False
    recompute: Recompute = "none"
    recompute_share: float = 1.0
    """Share of the layers the recompute applies to (Megatron's block method)."""
    fsdp: bool = False
    distributed_optimizer: bool = False
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    fp8: Fp8 = "none"
    fp8_param_gather: bool = False
    grad_bytes: int = 4
    param_bytes: int = 2
    fused_kernels: bool = True
    """Fused elementwise kernels (Transformer Engine, torch.compile)."""
    flash_attention: bool = True
    tp_overlap: bool = False
    """Megatron's --tp-comm-overlap, torch's async TP."""
    cuda_graphs: bool = False
    optimizer_impl: Literal["fused", "foreach", "for_loop"] = "fused"
    threads: int = 1
    notes: list[str] = []

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.microbatches * self.dp

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq


def _i(v: dict[str, Any], key: str, default: int = 1) -> int:
    return default if v.get(key) in (None, "") else int(v[key])


def _megatron(v: dict[str, Any], devices: int) -> Workload:
    L, h, a = int(v["num_layers"]), int(v["hidden_size"]), int(v["num_attention_heads"])
    g = _i(v, "num_query_groups", a) if v.get("group_query_attention") else a
    experts = _i(v, "num_experts", 0)
    freq = v.get("moe_layer_freq", 1)
    moe_layers = 0
    if experts:
        moe_layers = sum(freq) if isinstance(freq, list) else len(range(0, L, int(freq)))
    granularity = v.get("recompute_granularity") or "none"
    share = 1.0
    if granularity == "full" and v.get("recompute_method") == "block":
        share = min(1.0, _i(v, "recompute_num_layers") * _i(v, "pipeline_model_parallel_size") / L)
    recipe = str(v.get("fp8_recipe") or "delayed")
    fp8: Fp8 = "none"
    if v.get("fp8"):
        fp8 = "mxfp8" if recipe in ("mxfp8", "blockwise") else "tensorwise"
    half = bool(v.get("bf16") or v.get("fp16"))
    grad_bytes = 2 if v.get("grad_reduce_in_bf16") else 4
    if not v.get("accumulate_allreduce_grads_in_fp32", True) and half:
        grad_bytes = 2
    fsdp = bool(v.get("use_torch_fsdp2") or v.get("use_megatron_fsdp"))
    graphs = bool(v.get("enable_cuda_graph") or v.get("external_cuda_graph"))
    graphs = graphs or str(v.get("cuda_graph_impl") or "none") not in ("none", "None")
    return Workload(
        framework="megatron",
        layers=L,
        hidden=h,
        heads=a,
        kv_heads=g,
        head_dim=_i(v, "kv_channels", h // a),
        ffn=_i(v, "ffn_hidden_size", 4 * h),
        vocab=_i(v, "padded_vocab_size", _i(v, "vocab_size", 0)),
        seq=int(v["seq_length"]),
        swiglu=bool(v.get("swiglu")),
        experts=experts,
        topk=_i(v, "moe_router_topk", 2) if experts else 0,
        moe_ffn=_i(v, "moe_ffn_hidden_size", _i(v, "ffn_hidden_size", 4 * h)) if experts else 0,
        shared_ffn=_i(v, "moe_shared_expert_intermediate_size", 0),
        moe_layers=moe_layers,
        world=_i(v, "world_size", devices),
        tp=_i(v, "tensor_model_parallel_size"),
        pp=_i(v, "pipeline_model_parallel_size"),
        vpp=_i(v, "virtual_pipeline_model_parallel_size"),
        cp=_i(v, "context_parallel_size"),
        ep=_i(v, "expert_model_parallel_size"),
        dp=_i(v, "data_parallel_size"),
        micro_batch=_i(v, "micro_batch_size"),
        microbatches=_i(v, "num_microbatches"),
        sequence_parallel=bool(v.get("sequence_parallel")),
        recompute=granularity if granularity in ("selective", "full") else "none",
        recompute_share=share,
        fsdp=fsdp,
        distributed_optimizer=bool(v.get("use_distributed_optimizer")),
        overlap_grad_reduce=bool(v.get("overlap_grad_reduce")),
        overlap_param_gather=bool(v.get("overlap_param_gather")),
        fp8=fp8,
        fp8_param_gather=bool(v.get("fp8_param_gather")),
        grad_bytes=grad_bytes if half else 4,
        param_bytes=2 if half else 4,
        flash_attention=str(v.get("attention_backend", "auto")).rsplit(".", 1)[-1]
        in ("flash", "fused", "auto"),
        tp_overlap=bool(v.get("tp_comm_overlap")),
        cuda_graphs=graphs,
    )


def _optimizer(value: Any) -> Literal["fused", "foreach", "for_loop"]:
    """The optimizer's implementation; anything else (an unset default) counts as fused."""
    if value == "foreach":
        return "foreach"
    return "for_loop" if value == "for_loop" else "fused"


def _torchtitan_fp8(quantization: list[str]) -> Fp8:
    text = " ".join(quantization).lower()
    if "float8" in text:
        return "rowwise" if "rowwise" in text else "tensorwise"
    return "mxfp8" if ("mx" in text or "fp4" in text) else "none"


def _torchtitan(v: dict[str, Any], devices: int) -> Workload:
    module, flavor = str(v.get("module", "")), str(v.get("model_spec.flavor", ""))
    module = module.rsplit(".", 1)[-1]
    dims = TORCHTITAN_FLAVORS.get(module, {}).get(flavor)
    if dims is None:
        raise AttuneError(
            f"no dimensions for torchtitan {module} flavor {flavor!r}: the step-time model "
            f"knows {', '.join(f'{m} {f}' for m, fl in TORCHTITAN_FLAVORS.items() for f in fl)}"
        )
    pp = _i(v, "parallelism.pipeline_parallel_degree")
    local = _i(v, "training.local_batch_size")
    accumulation = _i(v, "gradient_accumulation_steps")
    micro = _i(v, "parallelism.pipeline_parallel_microbatch_size") if pp > 1 else local
    schedule = str(v.get("parallelism.pipeline_parallel_schedule", "1F1B"))
    interleaved = pp > 1 and schedule.lower() not in ("1f1b", "gpipe")
    shard = _i(v, "parallelism.data_parallel_shard_degree")
    dp = shard * _i(v, "parallelism.data_parallel_replicate_degree")
    ac = str(v.get("activation_checkpoint", "selective"))
    quant = [str(q) for q in v.get("model_spec.quantization") or []]
    return Workload(
        framework="torchtitan",
        layers=dims["layers"],
        hidden=dims["hidden"],
        heads=dims["heads"],
        kv_heads=dims["kv_heads"],
        head_dim=dims["hidden"] // dims["heads"],
        ffn=dims["ffn"],
        vocab=dims["vocab"],
        seq=_i(v, "training.seq_len", 2048),
        world=_i(v, "world_size", devices),
        tp=_i(v, "parallelism.tensor_parallel_degree"),
        pp=pp,
        vpp=2 if interleaved else 1,
        cp=_i(v, "parallelism.context_parallel_degree"),
        ep=_i(v, "parallelism.expert_parallel_degree"),
        dp=dp,
        micro_batch=micro,
        microbatches=accumulation * max(1, local // micro),
        sequence_parallel=bool(v.get("parallelism.enable_sequence_parallel", True)),
        recompute={"full": "full", "selective": "selective_op"}.get(ac, "none"),
        fsdp=shard > 1,
        distributed_optimizer=shard > 1,
        overlap_grad_reduce=shard > 1,
        overlap_param_gather=shard > 1,
        fp8=_torchtitan_fp8(quant),
        grad_bytes=4 if str(v.get("training.mixed_precision_reduce")) == "float32" else 2,
        param_bytes=2 if str(v.get("training.mixed_precision_param")) != "float32" else 4,
        fused_kernels=bool(v.get("compile.enable")),
        tp_overlap=bool(v.get("compile.enable_async_tensor_parallel")),
        optimizer_impl=_optimizer(v.get("optimizer.implementation")),
    )


def _embedded(v: dict[str, Any], devices: int) -> Workload:
    d, experts = int(v["d_model"]), int(v.get("moe_num_experts") or 0)
    return Workload(
        framework="embedded",
        layers=int(v["n_layer"]),
        hidden=d,
        heads=int(v["n_head"]),
        kv_heads=int(v["n_head"]),
        head_dim=d // int(v["n_head"]),
        ffn=4 * d,
        vocab=int(v["vocab_size"]),
        seq=int(v["seq_len"]),
        swiglu=False,
        experts=experts,
        topk=int(v.get("moe_top_k") or 0) if experts else 0,
        moe_ffn=4 * d if experts else 0,
        moe_layers=int(v["n_layer"]) if experts else 0,
        world=max(1, int(v.get("data_parallel_size") or 1)),
        dp=max(1, int(v.get("data_parallel_size") or 1)),
        micro_batch=int(v["micro_batch_size"]),
        microbatches=int(v.get("grad_accum_steps") or 1),
        recompute="full" if v.get("activation_checkpointing") else "none",
        grad_bytes=4,
        param_bytes=4,
        fused_kernels=bool(v.get("compile")),
        flash_attention=v.get("attention") != "math",
        optimizer_impl=_optimizer(v.get("optimizer_impl")),
        threads=max(1, int(v.get("threads") or 1)),
    )


def workload_of(effective: EffectiveConfig) -> Workload:
    """The step an effective config describes; an ``AttuneError`` naming what is missing."""
    readers = {"megatron": _megatron, "torchtitan": _torchtitan, "embedded": _embedded}
    reader = readers.get(effective.framework)
    if reader is None:
        raise AttuneError(f"no step-time model for framework {effective.framework!r}")
    try:
        return reader(effective.values, effective.devices)
    except KeyError as exc:
        raise AttuneError(
            f"{effective.framework} effective config lacks {exc.args[0]!r}: no step-time model"
        ) from None
