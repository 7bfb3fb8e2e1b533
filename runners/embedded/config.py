"""The embedded workload's config model and the validation that derives values from it.

Validation derives and rewrites keys the way Megatron-LM's ``validate_args`` does, so the
pre-launch gate has real side effects to catch:

- ``global_batch_size`` defaults to ``micro_batch_size x data_parallel_size`` when unset, so a
  "layout" change to either silently changes the batch that is trained;
- ``grad_reduce_in_bf16`` also turns off ``accumulate_grads_in_fp32``;
- ``moe_fast_dispatch`` (static-shape, padded expert dispatch) needs a capacity and sets
  ``moe_capacity_factor`` to 1.0 when unset, which starts dropping tokens;
- ``threads`` defaults to the ``OMP_NUM_THREADS`` environment variable.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

WORKLOAD_VERSION = "1"
"""Bumped whenever validation or training semantics change: part of the effective config."""

ENV_READ = ("OMP_NUM_THREADS",)
"""Environment variables the workload itself reads."""
TEST_HOOK_PREFIX = "ATTUNE_"
"""The workload's test hooks (``ATTUNE_FAULT``: ``faults.py``) are read from variables with
this prefix; a recipe naming one is refused, so only a test harness can switch a hook on."""


class WorkloadConfig(BaseModel):
    """Everything a recipe may set. Unknown keys are an error."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- model shape (semantic) ---
    vocab_size: int = Field(256, ge=2)
    """Token vocabulary size."""
    n_layer: int = Field(4, ge=1)
    """Transformer blocks."""
    n_head: int = Field(4, ge=1)
    """Attention heads per block."""
    d_model: int = Field(128, ge=1)
    """Hidden size."""
    seq_len: int = Field(128, ge=2)
    """Tokens per sample."""
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    """Dropout probability on attention and residual outputs."""

    # --- mixture of experts (semantic) ---
    moe_num_experts: int = Field(0, ge=0)
    """Experts per MoE layer; 0 means a dense MLP."""
    moe_top_k: int = Field(2, ge=1)
    """Experts each token is routed to."""
    moe_capacity_factor: float | None = Field(None, gt=0.0)
    """Expert capacity as a multiple of the even share; overflow is dropped. None: no drops."""
    moe_fast_dispatch: bool = False
    """Padded, static-shape expert dispatch (batched matmul); needs a capacity factor."""

    # --- optimisation and data (semantic) ---
    global_batch_size: int | None = Field(None, ge=1, le=2**24)
    """Samples per optimizer step over all ranks; derived from micro x data-parallel when unset."""
    seed: int = 1234
    """Seed of weight init and dropout."""
    data_seed: int = 0
    """Seed of the synthetic corpus."""
    optimizer: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(3e-3, gt=0.0)
    weight_decay: float = Field(0.1, ge=0.0)
    adam_beta1: float = Field(0.9, ge=0.0, lt=1.0)
    adam_beta2: float = Field(0.95, ge=0.0, lt=1.0)
    adam_eps: float = Field(1e-8, gt=0.0)
    sgd_momentum: float = Field(0.9, ge=0.0, lt=1.0)
    grad_clip: float = Field(1.0, ge=0.0)
    """Global gradient-norm clip; 0 disables it."""
    precision: Literal["fp32", "bf16"] = "fp32"
    """Autocast dtype of the forward pass."""
    grad_reduce_in_bf16: bool = False
    """All-reduce gradients in bf16 (half the bytes); also lowers the accumulation dtype."""
    accumulate_grads_in_fp32: bool = True
    """Keep the gradient accumulation buffer in fp32; false rounds it to bf16 every micro-batch."""
    init_from: str | None = None
    """Checkpoint to start from (a path); None starts from the seeded random init."""

    # --- layout (how the same math is executed) ---
    threads: int | None = Field(None, ge=1, le=1024)
    """Intra-op threads per process; from OMP_NUM_THREADS when unset, else 1."""
    data_parallel_size: int = Field(1, ge=1, le=1024)
    """Processes; gradients are all-reduced over gloo."""
    micro_batch_size: int = Field(1, ge=1, le=2**24)
    """Samples per forward/backward on one rank."""
    compile: bool = False
    """Run the model through torch.compile (inductor)."""
    attention: Literal["sdpa", "math"] = "sdpa"
    """Attention kernel: fused scaled_dot_product_attention or explicit matmul-softmax."""
    activation_checkpointing: bool = False
    """Recompute each block's activations in backward instead of storing them."""
    optimizer_impl: Literal["for_loop", "foreach", "fused"] = "foreach"
    """Optimizer kernel implementation."""

    # --- derived by validation (never set by a recipe) ---
    grad_accum_steps: int | None = None
    """Micro-batches per rank per step: global / (micro x data-parallel)."""
    workload_version: str = WORKLOAD_VERSION
    """Version of this workload's semantics."""


DERIVED_KEYS = frozenset({"grad_accum_steps", "workload_version"})
"""Keys only validation may set."""


def validate_and_derive(raw: dict[str, Any], env: dict[str, str]) -> WorkloadConfig:
    """Validate a recipe's config and fill in derived values, in the order training needs.

    Raises ``ValueError`` (with the key first, ``key: message``) for impossible values.
    """
    for key in DERIVED_KEYS & raw.keys():
        raise ValueError(f"{key}: derived by validation, a recipe cannot set it")
    for var in sorted(env):
        if var.startswith(TEST_HOOK_PREFIX):
            raise ValueError(f"env.{var}: a test hook of the workload, a recipe cannot set it")
    cfg = WorkloadConfig.model_validate(raw)

    if cfg.threads is None:
        omp = env.get("OMP_NUM_THREADS")
        if omp is not None and (not omp.isdigit() or int(omp) < 1):
            raise ValueError(f"env.OMP_NUM_THREADS: must be a positive integer, got {omp!r}")
        cfg.threads = int(omp) if omp is not None else 1

    if cfg.d_model % cfg.n_head:
        raise ValueError(f"n_head: {cfg.n_head} does not divide d_model={cfg.d_model}")

    # Megatron-style: the global batch follows the layout unless the recipe pins it.
    if cfg.global_batch_size is None:
        cfg.global_batch_size = cfg.micro_batch_size * cfg.data_parallel_size
    per_step = cfg.micro_batch_size * cfg.data_parallel_size
    if cfg.global_batch_size % per_step:
        raise ValueError(
            f"micro_batch_size: {cfg.micro_batch_size} x data_parallel_size "
            f"{cfg.data_parallel_size} does not divide global_batch_size={cfg.global_batch_size}"
        )
    cfg.grad_accum_steps = cfg.global_batch_size // per_step

    if cfg.grad_reduce_in_bf16:
        cfg.accumulate_grads_in_fp32 = False

    if cfg.moe_num_experts:
        if cfg.moe_top_k > cfg.moe_num_experts:
            raise ValueError(
                f"moe_top_k: {cfg.moe_top_k} exceeds moe_num_experts={cfg.moe_num_experts}"
            )
        if cfg.moe_fast_dispatch and cfg.moe_capacity_factor is None:
            cfg.moe_capacity_factor = 1.0
    elif cfg.moe_fast_dispatch or cfg.moe_capacity_factor is not None:
        raise ValueError("moe_fast_dispatch: MoE options need moe_num_experts > 0")
    return cfg


def expert_capacity(tokens: int, cfg: WorkloadConfig) -> int | None:
    """Slots per expert for one micro-batch's ``tokens``; None when nothing is dropped."""
    if cfg.moe_capacity_factor is None:
        return None
    share = tokens * cfg.moe_top_k / cfg.moe_num_experts
    return max(1, math.ceil(cfg.moe_capacity_factor * share))


def rank_memory_bytes(cfg: WorkloadConfig) -> int:
    """A generous estimate of one rank's peak memory, for the pre-launch resource check: fp32
    weights, gradients and two Adam moments (16 bytes a parameter), then one micro-batch's
    activations: per layer ~34 values a token and hidden unit plus the attention scores
    (``5 x heads x seq`` a token, Korthikanti et al. 2022, in fp32), all layers kept unless
    recomputed, and the logits with their softmax and gradient. It is meant to catch what
    cannot fit at all (a micro-batch of 10^12), not to predict a peak."""
    d, layers = cfg.d_model, cfg.n_layer
    experts = max(cfg.moe_num_experts, 1)
    params = layers * (4 * d * d + experts * 8 * d * d) + cfg.vocab_size * d
    tokens = cfg.micro_batch_size * cfg.seq_len
    per_layer = tokens * (34 * d + 5 * cfg.n_head * cfg.seq_len) * 4
    kept = per_layer * (1 if cfg.activation_checkpointing else layers)
    if cfg.activation_checkpointing:
        kept += tokens * d * 4 * layers  # each block's input is kept
    logits = tokens * cfg.vocab_size * 4 * 3
    return 16 * params + kept + logits
