"""``predict_step``: an effective config's step time on a part, joined with its memory.

Megatron-LM configs use the gate's memory model as they are (``gate.memory``); torchtitan
configs are given to the same formula through the Megatron names of their dimensions and
layout (FSDP as ``use_torch_fsdp2``); the embedded CPU workload has no memory model.
"""

from __future__ import annotations

from typing import Any

from gate.memory import GIB, MemoryCalibration, MemoryPrediction, fits, predict_memory
from gate.models import EffectiveConfig
from perfmodel.hardware import Part, part
from perfmodel.step import StepPrediction, predict_workload
from perfmodel.workload import Workload, workload_of


def _megatron_names(w: Workload) -> dict[str, Any]:
    """A torchtitan step in the names ``gate.memory_megatron`` reads."""
    return {
        "num_layers": w.layers,
        "hidden_size": w.hidden,
        "num_attention_heads": w.heads,
        "group_query_attention": w.kv_heads != w.heads,
        "num_query_groups": w.kv_heads,
        "kv_channels": w.head_dim,
        "ffn_hidden_size": w.ffn,
        "swiglu": w.swiglu,
        "normalization": "RMSNorm",
        "add_bias_linear": False,
        "untie_embeddings_and_output_weights": True,
        "padded_vocab_size": w.vocab,
        "seq_length": w.seq,
        "micro_batch_size": w.micro_batch,
        "num_microbatches": w.microbatches,
        "tensor_model_parallel_size": w.tp,
        "pipeline_model_parallel_size": w.pp,
        "virtual_pipeline_model_parallel_size": w.vpp,
        "context_parallel_size": w.cp,
        "data_parallel_size": w.dp,
        "world_size": w.world,
        "sequence_parallel": w.sequence_parallel,
        "recompute_granularity": {"full": "full", "none": None}.get(w.recompute, "selective"),
        "use_torch_fsdp2": w.fsdp,
        "bf16": w.param_bytes == 2,
        "accumulate_allreduce_grads_in_fp32": w.grad_bytes == 4,
        "attention_backend": "flash",
    }


def memory_of(effective: EffectiveConfig, w: Workload) -> MemoryPrediction | None:
    if effective.framework == "torchtitan":
        named = EffectiveConfig(
            framework="megatron",
            framework_version=effective.framework_version,
            values=_megatron_names(w),
            devices=w.world,
        )
        return predict_memory(named)
    return predict_memory(effective)


def predict_step(
    effective: EffectiveConfig,
    hardware: Part | str,
    *,
    device_memory_gib: float | None = None,
) -> StepPrediction:
    """Step time, throughput, MFU and peak memory of ``effective`` on ``hardware`` (a part or
    its name). Capacity for ``fits``: ``device_memory_gib`` when given, else the part's HBM."""
    hw = hardware if isinstance(hardware, Part) else part(hardware)
    w = workload_of(effective)
    prediction = predict_workload(w, hw)
    memory = memory_of(effective, w)
    if memory is None:
        return prediction
    capacity = int((device_memory_gib or hw.hbm_gib) * GIB)
    ok, reason = fits(memory, MemoryCalibration(), capacity)
    return prediction.model_copy(
        update={
            "peak_memory_bytes": memory.total_bytes,
            "capacity_bytes": capacity,
            "fits": ok,
            "memory_reason": reason,
            "notes": [*prediction.notes, *memory.notes],
        }
    )
