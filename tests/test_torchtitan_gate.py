"""The gate on real torchtitan recipes: labelled candidates judged after torchtitan's own parsing
and the Trainer's derivations.

Every baseline and candidate below is resolved by torchtitan 0.3.0's ConfigManager in ONE worker
process, then judged against ``registry/torchtitan-0.3.yaml``. A candidate edits an example
recipe (examples/torchtitan/) the way a tuning agent would: it appends command-line overrides
(the last occurrence of a flag wins), or changes the world size, config function or env.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gate.errors import AttuneError, FrameworkRefusal
from gate.models import EffectiveConfig, Recipe
from gate.prelaunch import judge, refused
from gate.recipe import load_recipe
from gate.registry import Registry, load_registry
from runners.torchtitan.adapter import TorchtitanAdapter
from tests.conftest import ATTUNE

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

pytest.importorskip("torchtitan")

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "torchtitan"
Outcome = EffectiveConfig | AttuneError
GBS = "training.global_batch_size"
DP_SHARD = "parallelism.data_parallel_shard_degree"
LOCAL = "training.local_batch_size"


@dataclass(frozen=True)
class Case:
    name: str
    base: str
    """``llama3-8b`` (global batch pinned to 16), ``llama3-8b-unpinned`` (llama3_8b as
    published: global batch derived as 1 x 8), ``llama3-70b`` (derived, 64 ranks), or
    ``llama3-8b`` with one more override (``BASE_EXTRA``: seed, checkpointing) or another config
    function (``BASE_BODY``: NVFP4 on a declared sm100)."""
    overrides: list[str]
    verdict: str
    """allow | review | reject, or error when torchtitan (or its trainer) refuses it."""
    drivers: dict[str, str] = field(default_factory=dict)
    """Keys expected among the findings, with their class (the error text for ``error``)."""
    body: dict[str, Any] = field(default_factory=dict)
    """Recipe keys replaced (world_size, config, env, gpu_arch)."""
    why: tuple[str, str, str] | None = None
    """(key, a phrase of its finding's reason, its source): the finding that decides the verdict;
    for ``error``, the source is where torchtitan raised the refusal."""
    exact: bool = False
    """No finding at all: the derived values are the baseline's."""


S, L = "semantic", "layout"
CASES = [
    # --- layout changes the gate allows (global batch pinned)
    Case("compile", "llama3-8b", ["--compile.enable"], "allow", {"compile.enable": L}),
    Case(
        "compile-model-only",
        "llama3-8b",
        ["--compile.enable", "--compile.components", "model"],
        "allow",
        {"compile.components": L},
    ),
    Case(
        "tp2",
        "llama3-8b",
        ["--parallelism.tensor_parallel_degree", "2"],
        "allow",
        {"parallelism.tensor_parallel_degree": L, DP_SHARD: L, "gradient_accumulation_steps": L},
    ),
    Case(
        "tp2-async-tp",
        "llama3-8b",
        [
            "--compile.enable",
            "--compile.enable_async_tensor_parallel",
            "--parallelism.tensor_parallel_degree",
            "2",
        ],
        "allow",
        {"compile.enable_async_tensor_parallel": L},
    ),
    Case(
        "cp2",
        "llama3-8b",
        ["--parallelism.context_parallel_degree", "2"],
        "allow",
        {"parallelism.context_parallel_degree": L, "batch_degree": L},
    ),
    Case(
        "pp2",
        "llama3-8b",
        ["--parallelism.pipeline_parallel_degree", "2", "--training.disable_cuda_graphs"],
        "allow",
        {"parallelism.pipeline_parallel_degree": L, "num_pipeline_parallel_microbatches": L},
    ),
    Case(
        "pp2-interleaved",
        "llama3-8b",
        [
            "--parallelism.pipeline_parallel_degree",
            "2",
            "--training.disable_cuda_graphs",
            "--parallelism.pipeline_parallel_schedule",
            "Interleaved1F1B",
        ],
        "allow",
        {"parallelism.pipeline_parallel_schedule": L},
    ),
    Case(
        "local-batch-1-accumulate-2",
        "llama3-8b",
        ["--training.local_batch_size", "1"],
        "allow",
        {LOCAL: L, "gradient_accumulation_steps": L},
    ),
    Case(
        "hsdp-replicate-2",
        "llama3-8b",
        ["--parallelism.data_parallel_replicate_degree", "2"],
        "allow",
        {"parallelism.data_parallel_replicate_degree": L, DP_SHARD: L},
    ),
    Case(
        "sixteen-ranks",
        "llama3-8b",
        ["--training.local_batch_size", "1"],
        "allow",
        {"world_size": L, "batch_degree": L, DP_SHARD: L},
        {"world_size": 16},
    ),
    Case(
        "full-ac",
        "llama3-8b",
        ["activation-checkpoint:full"],
        "allow",
        {"activation_checkpoint": L},
    ),
    Case(
        "no-ac", "llama3-8b", ["activation-checkpoint:none"], "allow", {"activation_checkpoint": L}
    ),
    Case(
        "memory-budget-ac",
        "llama3-8b",
        [
            "--compile.enable",
            "activation-checkpoint:memory-budget",
            "--activation-checkpoint.memory-budget",
            "0.3",
        ],
        "allow",
        {"activation_checkpoint": L, "activation_checkpoint.memory_budget": L},
    ),
    Case(
        "reshard-never",
        "llama3-8b",
        ["--parallelism.fsdp_reshard_after_forward", "never"],
        "allow",
        {"parallelism.fsdp_reshard_after_forward": L},
    ),
    Case(
        "cpu-offload",
        "llama3-8b",
        ["--training.enable_cpu_offload"],
        "allow",
        {"training.enable_cpu_offload": L},
    ),
    Case(
        "no-cuda-graphs",
        "llama3-8b",
        ["--training.disable_cuda_graphs"],
        "allow",
        {"training.disable_cuda_graphs": L},
    ),
    Case(
        "foreach-optimizer",
        "llama3-8b",
        ["--optimizer.implementation", "foreach"],
        "allow",
        {"optimizer.implementation": L},
    ),
    Case(
        "quiet-logging",
        "llama3-8b",
        ["--metrics.log_freq", "1", "--profiler.no-enable-profiling"],
        "allow",
        {"metrics.log_freq": L, "profiler.enable_profiling": L},
    ),
    Case(
        "checkpointing-on",
        "llama3-8b",
        ["--checkpoint.enable", "--checkpoint.interval", "100"],
        "allow",
        {"checkpoint.enable": L, "checkpoint.interval": L},
    ),
    Case(
        "validation-on",
        "llama3-8b",
        ["--validator.enable", "--validator.freq", "100"],
        "allow",
        {"validator.enable": L},
    ),
    Case(
        "deterministic",
        "llama3-8b",
        ["--debug.deterministic"],
        "allow",
        {"debug.deterministic": L},
    ),
    Case(
        "gc-every-10", "llama3-8b", ["--training.gc_freq", "10"], "allow", {"training.gc_freq": L}
    ),
    Case(
        "full-dtensor",
        "llama3-8b",
        ["--parallelism.spmd_backend", "full_dtensor"],
        "allow",
        {"parallelism.spmd_backend": L},
    ),
    Case("pin-memory", "llama3-8b", ["--dataloader.pin_memory"], "allow"),
    # derived equality: the scheduler already runs for training.steps; nothing changes
    Case(
        "schedule-length-spelled-out", "llama3-8b", ["--lr_scheduler.total_steps", "1000"], "allow"
    ),
    # an initial checkpoint is never read while checkpointing is off
    Case(
        "initial-checkpoint-unused",
        "llama3-8b",
        ["--checkpoint.initial_load_path", "/ckpt/llama3"],
        "allow",
        {"checkpoint.initial_load_path": L},
    ),
    Case(
        "unpinned-compile",
        "llama3-8b-unpinned",
        ["--compile.enable"],
        "allow",
        {"compile.enable": L},
    ),
    Case(
        "70b-selective-ac",
        "llama3-70b",
        ["activation-checkpoint:selective"],
        "allow",
        {"activation_checkpoint": L},
    ),
    # --- semantic changes the gate rejects
    Case(
        "seq-4096", "llama3-8b", ["--training.seq_len", "4096"], "reject", {"training.seq_len": S}
    ),
    Case(
        "lr",
        "llama3-8b",
        ["--optimizer.param_groups.0.optimizer_kwargs.lr", "1e-4"],
        "reject",
        {"optimizer.param_groups.0.optimizer_kwargs.lr": S},
    ),
    Case("global-batch-32", "llama3-8b", [f"--{GBS}", "32"], "reject", {GBS: S}),
    Case("bf16", "llama3-8b", ["--training.dtype", "bfloat16"], "reject", {"training.dtype": S}),
    Case(
        "fp32-params",
        "llama3-8b",
        ["--training.mixed_precision_param", "float32"],
        "reject",
        {"training.mixed_precision_param": S},
    ),
    Case("clip", "llama3-8b", ["--training.max_norm", "0.5"], "reject", {"training.max_norm": S}),
    Case(
        "more-steps",
        "llama3-8b",
        ["--training.steps", "2000"],
        "reject",
        {"training.steps": S, "lr_scheduler.total_steps": S},
    ),
    Case(
        "warmup-past-the-end",
        "llama3-8b",
        ["--lr_scheduler.warmup_steps", "5000"],
        "reject",
        {"lr_scheduler.warmup_steps": S},
    ),
    Case(
        "cosine",
        "llama3-8b",
        ["--lr_scheduler.decay_type", "cosine"],
        "reject",
        {"lr_scheduler.decay_type": S},
    ),
    Case(
        "dataset",
        "llama3-8b",
        ["--dataloader.dataset", "c4_test"],
        "reject",
        {"dataloader.dataset": S},
    ),
    Case("seed", "llama3-8b", ["--debug.seed", "42"], "reject", {"debug.seed": S}),
    Case(
        "bf16-optimizer-states",
        "llama3-8b",
        ["--optimizer.implementation", "fused_opt_states_bf16"],
        "reject",
        {"optimizer.implementation": S},
    ),
    Case(
        "loader-workers",
        "llama3-8b",
        ["--dataloader.num_workers", "4"],
        "reject",
        {"dataloader.num_workers": S},
    ),
    Case(
        "tokenizer",
        "llama3-8b",
        ["--hf_assets_path", "./assets/hf/Llama-3.2-1B"],
        "reject",
        {"hf_assets_path": S},
    ),
    Case(
        "initial-checkpoint",
        "llama3-8b",
        ["--checkpoint.enable", "--checkpoint.initial_load_path", "/ckpt/llama3"],
        "reject",
        {"checkpoint.initial_load_path": S, "checkpoint.enable": S},
    ),
    Case("dry-run", "llama3-8b", ["--comm.mode", "fake_backend"], "reject", {"comm.mode": S}),
    # an override that imports code (--override.imports) is refused when the recipe is read,
    # before anything resolves: tests/test_env_allowlist.py
    Case(
        "another-model",
        "llama3-8b",
        [],
        "reject",
        {"config": S, "model_spec.flavor": S, "model_spec.model": S, "hf_assets_path": S},
        {"config": "llama3_70b"},
    ),
    # a layout-looking change moves the derived global batch
    Case(
        "unpinned-tp2",
        "llama3-8b-unpinned",
        ["--parallelism.tensor_parallel_degree", "2"],
        "reject",
        {GBS: S, DP_SHARD: S, "parallelism.tensor_parallel_degree": S},
    ),
    Case(
        "unpinned-local-batch-2",
        "llama3-8b-unpinned",
        ["--training.local_batch_size", "2"],
        "reject",
        {GBS: S, LOCAL: S},
    ),
    Case(
        "unpinned-fsdp-4",
        "llama3-8b-unpinned",
        [
            "--parallelism.data_parallel_shard_degree",
            "4",
            "--parallelism.context_parallel_degree",
            "2",
        ],
        "reject",
        {GBS: S, DP_SHARD: S},
    ),
    Case(
        "unpinned-sixteen-ranks",
        "llama3-8b-unpinned",
        [],
        "reject",
        {GBS: S, "world_size": S},
        {"world_size": 16},
    ),
    Case(
        "70b-tp4",
        "llama3-70b",
        ["--parallelism.tensor_parallel_degree", "4"],
        "reject",
        {GBS: S, "parallelism.tensor_parallel_degree": S, DP_SHARD: S},
    ),
    # --- environment on the registry's allow-list (a name off it is refused when the recipe
    # is read, never reviewed: tests/test_env_allowlist.py)
    Case(
        "nccl-algo",
        "llama3-8b",
        [],
        "allow",
        {"env.NCCL_ALGO": L},
        {"env": {"NCCL_ALGO": "Ring"}},
    ),
    Case(
        "compile-and-allocator",
        "llama3-8b",
        ["--compile.enable"],
        "allow",
        {"compile.enable": L, "env.PYTORCH_CUDA_ALLOC_CONF": L},
        {"env": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}},
    ),
    # --- refused before any launch
    Case(
        "pp-with-cuda-graphs",
        "llama3-8b",
        ["--parallelism.pipeline_parallel_degree", "2"],
        "error",
        {"error": "CUDA graphs do not support pipeline parallelism"},
    ),
    Case(
        "memory-budget-uncompiled",
        "llama3-8b",
        ["activation-checkpoint:memory-budget"],
        "error",
        {"error": "Memory budget activation checkpointing requires the model to be compiled"},
    ),
    Case(
        "async-tp-uncompiled",
        "llama3-8b",
        ["--compile.enable_async_tensor_parallel"],
        "error",
        {"error": "Async TP requires 'model' in --compile.components"},
    ),
    Case(
        "batch-not-divisible",
        "llama3-8b",
        [f"--{GBS}", "24"],
        "error",
        {"error": "training.global_batch_size: global batch size must be multiple"},
    ),
    Case(
        "tp-does-not-divide-heads",
        "llama3-8b",
        ["--parallelism.tensor_parallel_degree", "16", "--training.local_batch_size", "16"],
        "error",
        {"error": "tensor_parallel_degree (16) must divide n_kv_heads (8)"},
        {"world_size": 16},
    ),
    Case(
        "seq-not-divisible-by-tp",
        "llama3-8b",
        ["--training.seq_len", "8190", "--parallelism.tensor_parallel_degree", "4"],
        "error",
        {"error": "must be divisible by 4"},
    ),
]

# --- issue 15: derived values, low precision, refusals with their source, conditional semantics
BASE_EXTRA = {
    "llama3-8b-seeded": ["--debug.seed", "42"],
    "llama3-8b-checkpointed": ["--checkpoint.enable"],
}
"""Baselines that are ``llama3-8b`` with one more override."""
BASE_BODY = {
    "llama3-8b-nvfp4": {"config": "llama3_8b_first_85_pct_layers_nvfp4", "gpu_arch": "sm100"},
}
"""Baselines that are ``llama3-8b`` (its batch overrides) with other body keys."""
REPLICATE = "parallelism.data_parallel_replicate_degree"
TP, PP = "parallelism.tensor_parallel_degree", "parallelism.pipeline_parallel_degree"
HSDP_2X4 = [f"--{REPLICATE}", "2", f"--{DP_SHARD}", "4"]
NO_GRAPHS = "--training.disable_cuda_graphs"
BATCH_MOVES = ("the derived global batch changes", "torchtitan/trainer.py:326@0.3.0")
ISSUE_15_CASES = [
    # the same derived global batch and samples per step: layout, whether or not it is pinned
    Case("dp-shard-spelled-out", "llama3-8b", [f"--{DP_SHARD}", "8"], "allow", exact=True),
    Case(
        "unpinned-dp-shard-spelled-out",
        "llama3-8b-unpinned",
        [f"--{DP_SHARD}", "8"],
        "allow",
        exact=True,
    ),
    Case("unpinned-batch-pinned-as-derived", "llama3-8b-unpinned", [f"--{GBS}", "8"], "allow"),
    Case("hsdp-2x4", "llama3-8b", HSDP_2X4, "allow", {REPLICATE: L, DP_SHARD: L}),
    Case("unpinned-hsdp-2x4", "llama3-8b-unpinned", HSDP_2X4, "allow", {REPLICATE: L, DP_SHARD: L}),
    Case(
        "unpinned-replicate-2",
        "llama3-8b-unpinned",
        [f"--{REPLICATE}", "2"],
        "allow",
        {REPLICATE: L, DP_SHARD: L},
    ),
    Case(
        "70b-hsdp",
        "llama3-70b",
        [f"--{REPLICATE}", "2"],
        "allow",
        {REPLICATE: L, DP_SHARD: L},
    ),
    Case(
        "unpinned-local-2-tp-2",
        "llama3-8b-unpinned",
        [f"--{LOCAL}", "2", f"--{TP}", "2"],
        "allow",
        {LOCAL: L, DP_SHARD: L, TP: L, "batch_degree": L},
    ),
    Case(
        "unpinned-local-2-pp-2",
        "llama3-8b-unpinned",
        [f"--{LOCAL}", "2", f"--{PP}", "2", NO_GRAPHS],
        "allow",
        {LOCAL: L, PP: L, "num_pipeline_parallel_microbatches": L},
    ),
    Case(
        "hsdp-local-1-accumulate-2",
        "llama3-8b",
        [*HSDP_2X4, f"--{LOCAL}", "1"],
        "allow",
        {LOCAL: L, "gradient_accumulation_steps": L},
    ),
    # ... and ones that move it: semantic, the layout key named with the batch
    Case(
        "unpinned-hsdp-2x2",
        "llama3-8b-unpinned",
        [f"--{REPLICATE}", "2", f"--{DP_SHARD}", "2", f"--{TP}", "2"],
        "reject",
        {GBS: S, REPLICATE: S, DP_SHARD: S, "batch_degree": S},
        why=("batch_degree", *BATCH_MOVES),
    ),
    Case(
        "unpinned-local-2-accumulate",
        "llama3-8b-unpinned",
        [f"--{LOCAL}", "2", f"--{GBS}", "32"],
        "reject",
        {GBS: S, LOCAL: S, "gradient_accumulation_steps": S},
    ),
    # low precision resolves (torchao) against the declared GPU and is judged semantic
    Case(
        "mxfp8-on-blackwell",
        "llama3-8b",
        [],
        "reject",
        {"model_spec.quantization": S, "config": S, "model_spec.model": S},
        {"config": "llama3_8b_mxfp8", "gpu_arch": "sm100"},
        why=(
            "model_spec.quantization",
            "float8/MX/NVFP4",
            "torchtitan/components/quantization/utils.py:68@0.3.0",
        ),
    ),
    Case(
        "nvfp4-on-blackwell",
        "llama3-8b",
        [],
        "reject",
        {"model_spec.quantization": S},
        {"config": "llama3_8b_first_85_pct_layers_nvfp4", "gpu_arch": "sm100"},
    ),
    Case(
        "float8-405b-on-hopper",
        "llama3-8b",
        [],
        "reject",
        {"model_spec.quantization": S, "model_spec.flavor": S},
        {"config": "llama3_405b", "gpu_arch": "sm90"},
    ),
    Case(
        "symm-mem-on-hopper",
        "llama3-8b",
        ["--parallelism.enable_fsdp_symm_mem"],
        "allow",
        {"parallelism.enable_fsdp_symm_mem": L},
        {"gpu_arch": "sm90"},
    ),
    # refused by torchtitan (on the declared GPU) or by the trainer: where it raised
    Case(
        "mxfp8-on-hopper",
        "llama3-8b",
        [],
        "error",
        {"error": "llama3_8b_mxfp8(): MXFP8 is only supported on SM100 or later"},
        {"config": "llama3_8b_mxfp8", "gpu_arch": "sm90"},
        why=("config", "", "torchtitan/components/quantization/mx.py:71"),
    ),
    Case(
        "float8-405b-undeclared-gpu",
        "llama3-8b",
        [],
        "reject",
        {"model_spec.quantization": S},
        {"config": "llama3_405b"},
    ),
    Case(
        "mxfp8-undeclared-gpu",
        "llama3-8b",
        [],
        "error",
        {"error": "MXFP8 is only supported on SM100 or later architectures (checked as on sm90"},
        {"config": "llama3_8b_mxfp8"},
        why=("config", "", "torchtitan/components/quantization/mx.py:71"),
    ),
    Case(
        "float8-on-ampere",
        "llama3-8b",
        [],
        "error",
        {"error": "float8 is only supported on NVIDIA SM89 or later"},
        {"config": "llama3_405b", "gpu_arch": "sm80"},
        why=("config", "", "torchtitan/components/quantization/float8.py:92"),
    ),
    Case(
        "symm-mem-on-ampere",
        "llama3-8b",
        ["--parallelism.enable_fsdp_symm_mem"],
        "error",
        {"error": "enable_fsdp_symm_mem is only supported for compute capability 9.0"},
        {"gpu_arch": "sm80"},
        why=("overrides", "", "torchtitan/config/configs.py:274"),
    ),
    Case(
        "flex-flash-on-hopper",
        "llama3-8b",
        [],
        "reject",
        {"module": S, "model_spec.name": S},
        {"module": "qwen3", "config": "qwen3_debugmodel_flex_flash", "gpu_arch": "sm90"},
    ),
    Case(
        "flex-flash-on-ampere",
        "llama3-8b",
        [],
        "error",
        {"error": "Flash backend of FlexAttention is only supported on Hopper or Blackwell"},
        {"module": "qwen3", "config": "qwen3_debugmodel_flex_flash", "gpu_arch": "sm80"},
        why=("config", "", "torchtitan/models/common/config_utils.py:89"),
    ),
    Case(
        "unknown-optimizer",
        "llama3-8b",
        ["--optimizer.param_groups.0.optimizer_name", "Lion"],
        "error",
        {"error": "optimizer: Optimizer Lion not added."},
        why=("overrides", "", "torchtitan/components/optimizer/optimizer.py:149"),
    ),
    Case(
        "muon-without-its-layout",
        "llama3-8b",
        ["--optimizer.param_groups.0.optimizer_name", "DistMuon"],
        "error",
        {"error": "DistMuon cannot be built from optimizer_factory_kwargs_by_name"},
        why=("overrides", "", "torchtitan/components/optimizer/optimizer.py:230"),
    ),
    Case(
        "tp3-invalid-dims",
        "llama3-8b",
        [f"--{TP}", "3"],
        "error",
        {"error": "parallelism: Invalid parallel dims"},
        why=("overrides", "", "torchtitan/distributed/parallel_dims.py:186"),
    ),
    # conditional semantics: an option under which a parallel degree changes the math
    Case(
        "seeded-pp-2",
        "llama3-8b-seeded",
        [f"--{PP}", "2", NO_GRAPHS],
        "reject",
        {PP: S},
        why=(PP, "seed + pp rank", "torchtitan/config/configs.py:174@0.3.0"),
    ),
    Case("seeded-tp-2", "llama3-8b-seeded", [f"--{TP}", "2"], "allow", {TP: L, DP_SHARD: L}),
    Case(
        "seeded-single-process",
        "llama3-8b-seeded",
        [],
        "reject",
        {"world_size": S},
        {"world_size": 1},
        why=("world_size", "torch's own generator", "torchtitan/trainer.py:663@0.3.0"),
    ),
    Case(
        "checkpointed-tp-2",
        "llama3-8b-checkpointed",
        [f"--{TP}", "2"],
        "reject",
        {"batch_degree": S, TP: L},
        why=("batch_degree", "data loader's position", "torchtitan/trainer.py:326@0.3.0"),
    ),
    Case("checkpointed-hsdp-2x4", "llama3-8b-checkpointed", HSDP_2X4, "allow", {REPLICATE: L}),
]
ISSUE_15_CASES += [
    Case(
        "nvfp4-tp-2",
        "llama3-8b-nvfp4",
        [f"--{TP}", "2"],
        "reject",
        {TP: S, "batch_degree": S},
        why=(TP, "quantizes each rank's local shard", "torchtitan/config/configs.py:157@0.3.0"),
    ),
    Case(
        "nvfp4-local-1-accumulate-2",
        "llama3-8b-nvfp4",
        [f"--{LOCAL}", "1"],
        "reject",
        {LOCAL: S, "gradient_accumulation_steps": L},
    ),
    Case("nvfp4-hsdp-2x4", "llama3-8b-nvfp4", HSDP_2X4, "allow", {REPLICATE: L, DP_SHARD: L}),
    Case("nvfp4-compile-off", "llama3-8b-nvfp4", ["--compile.no-enable"], "allow"),
]
CASES += ISSUE_15_CASES


def baseline(name: str) -> Recipe:
    if name in BASE_EXTRA or name in BASE_BODY:
        base = load_recipe(EXAMPLES / "llama3-8b.yaml")
        overrides = [*base.body["overrides"], *BASE_EXTRA.get(name, [])]
        body = dict(base.body, overrides=overrides, **BASE_BODY.get(name, {}))
        return base.model_copy(update={"name": name, "path": f"{name}.yaml", "body": body})
    if name == "llama3-8b-unpinned":
        base = load_recipe(EXAMPLES / "llama3-8b.yaml")
        body = dict(base.body, overrides=[])
        return base.model_copy(update={"name": name, "path": f"{name}.yaml", "body": body})
    return load_recipe(EXAMPLES / f"{name}.yaml")


def candidate(case: Case) -> Recipe:
    base = baseline(case.base)
    body = dict(base.body, overrides=[*base.body.get("overrides", []), *case.overrides])
    body.update(case.body)
    return base.model_copy(update={"name": case.name, "path": f"{case.name}.yaml", "body": body})


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Every baseline and candidate, resolved in one worker call."""
    recipes = {name: baseline(name) for name in sorted({c.base for c in CASES})}
    recipes.update({c.name: candidate(c) for c in CASES})
    resolved = TorchtitanAdapter().resolve_each(list(recipes.values()))
    return dict(zip(recipes, resolved, strict=True))


@pytest.fixture(scope="module")
def registry(outcomes: dict[str, Outcome]) -> Registry:
    base = outcomes["llama3-8b"]
    assert isinstance(base, EffectiveConfig), base
    return load_registry("torchtitan", base.framework_version)


def test_at_least_forty_labelled_cases() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    judged = [c for c in CASES if c.verdict != "error"]
    assert len(judged) >= 40
    # no review: every torchtitan key is classified, and env names off the allow-list are
    # refused before the gate
    assert {c.verdict for c in CASES} == {"allow", "reject", "error"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_labelled_candidate(case: Case, outcomes: dict[str, Outcome], registry: Registry) -> None:
    base, cand = outcomes[case.base], outcomes[case.name]
    assert isinstance(base, EffectiveConfig), base
    if case.verdict == "error":
        assert isinstance(cand, FrameworkRefusal), "torchtitan or its trainer should refuse this"
        key = case.why[0] if case.why else "overrides"
        assert str(cand).startswith(f"{case.name}.yaml: {key}: ")
        assert case.drivers["error"] in str(cand)
        assert cand.source and cand.source.startswith("torchtitan/"), cand.source
        assert cand.source.endswith("@0.3.0")
        if case.why:
            assert cand.source == f"{case.why[2]}@0.3.0"
        # the gate's verdict on it: reject, one invalid finding quoting torchtitan
        (finding,) = refused(cand).findings
        assert (finding.key_class, finding.source) == ("invalid", cand.source)
        assert case.drivers["error"] in finding.reason
        return
    assert isinstance(cand, EffectiveConfig), cand
    report = judge(base, cand, registry)
    classes = {f.key: f.key_class for f in report.findings}
    summary = ", ".join(f"{k}={v}" for k, v in sorted(classes.items()))
    assert report.verdict == case.verdict, summary
    for key, expected in case.drivers.items():
        assert classes.get(key) == expected, f"{key}: {summary}"
    if case.exact:
        assert report.findings == [], summary
    if case.why:
        key, phrase, source = case.why
        (finding,) = [f for f in report.findings if f.key == key]
        assert phrase in finding.reason, finding.reason
        assert source in finding.source, finding.source


def test_derived_findings_are_marked(outcomes: dict[str, Outcome], registry: Registry) -> None:
    """TP 2 with FSDP left at -1: the FSDP degree and accumulation steps change as derived."""
    base, cand = outcomes["llama3-8b"], outcomes["tp2"]
    assert isinstance(base, EffectiveConfig) and isinstance(cand, EffectiveConfig)
    findings = {f.key: f for f in judge(base, cand, registry).findings}
    assert (findings[DP_SHARD].baseline, findings[DP_SHARD].candidate) == (8, 4)
    assert findings[DP_SHARD].derived and findings["gradient_accumulation_steps"].derived
    assert not findings["parallelism.tensor_parallel_degree"].derived
    assert findings["gradient_accumulation_steps"].source == "torchtitan/trainer.py:430@0.3.0"


def gate_check(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ATTUNE, "gate", "check", *map(str, paths), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


def test_gate_check_cli_on_torchtitan_pairs(tmp_path: Path) -> None:
    """attune gate check BASE CAND --json: exit 0 for the layout candidate, 1 for bf16."""
    base = EXAMPLES / "llama3-8b.yaml"
    allowed = gate_check(base, EXAMPLES / "candidates" / "llama3-8b-compile-tp2.yaml")
    assert allowed.returncode == 0, allowed.stderr
    payload = json.loads(allowed.stdout)
    assert payload["verdict"] == "allow"
    assert {f["key"] for f in payload["findings"]} >= {"compile.enable", DP_SHARD}
    rejected = gate_check(base, EXAMPLES / "candidates" / "llama3-8b-bf16.yaml")
    assert rejected.returncode == 1, rejected.stderr
    payload = json.loads(rejected.stdout)
    assert payload["verdict"] == "reject"
    (finding,) = payload["findings"]
    assert (finding["key"], finding["class"]) == ("training.dtype", "semantic")
    assert finding["source"] == "torchtitan/config/configs.py:78@0.3.0"


def test_gate_check_cli_rejects_a_refused_candidate(tmp_path: Path) -> None:
    """A candidate torchtitan refuses is a reject (exit 1) with an invalid finding quoting
    torchtitan's message and the line that raised it; a refused baseline stays bad input."""
    bad = tmp_path / "tp3.yaml"
    body = {**baseline("llama3-8b").body, "framework": "torchtitan", "name": "tp3"}
    body["overrides"] = [*body["overrides"], "--parallelism.tensor_parallel_degree", "3"]
    bad.write_text(json.dumps(body))  # JSON is YAML
    proc = gate_check(EXAMPLES / "llama3-8b.yaml", bad)
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["verdict"] == "reject"
    (finding,) = payload["findings"]
    assert finding["class"] == "invalid"
    assert "Invalid parallel dims" in finding["reason"] and "torchtitan" in finding["reason"]
    assert finding["source"] == "torchtitan/distributed/parallel_dims.py:186@0.3.0"
    swapped = gate_check(bad, EXAMPLES / "llama3-8b.yaml")
    assert swapped.returncode == 2
    assert f"{bad}: overrides: parallelism: Invalid parallel dims" in swapped.stderr


def test_warnings_raised_while_resolving_are_collected(outcomes: dict[str, Outcome]) -> None:
    """torchtitan's logger warnings come back with the line that raised them; one about the
    resolving host's files (hf_assets_path missing here) says nothing about the recipe."""
    base = outcomes["llama3-8b"]
    assert isinstance(base, EffectiveConfig)
    sources = {w.source: w for w in base.warnings}
    warned = sources["torchtitan/components/checkpointer/base.py:336"]
    assert warned.message.startswith("initial_load_model_only=True has no effect")
    assert warned.category == "logging"
    assert not [w for w in base.warnings if "HF assets path" in w.message]
    later = outcomes["seeded-tp-2"]
    assert isinstance(later, EffectiveConfig)
    assert warned in later.warnings
