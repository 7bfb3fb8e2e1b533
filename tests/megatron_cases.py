"""Labelled candidate changes to Megatron-LM's published recipes, for the gate tests.

Each case edits one example recipe (examples/megatron/) the way a tuning agent would, and says
what the gate must decide once Megatron's own validation has run: ``allow`` / ``review`` /
``reject`` with the keys (and their classes) that drive the verdict, or ``invalid`` when Megatron
refuses the combination itself (``validate_args``, stage ``args``, or the configuration
dataclasses it builds for the model, stage ``model``): a reject with an ``invalid`` finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gate.models import Recipe
from gate.recipe import load_recipe

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "megatron"
RECIPES = ("llama3-8b", "mixtral-8x7b", "gpt3-175b")
CAPACITY = ["--moe-expert-capacity-factor", "1.25", "--moe-token-drop-policy", "probs"]
"""Turns the Mixtral baseline into one that drops overflow tokens."""


@dataclass(frozen=True)
class Case:
    name: str
    recipe: str
    """Which example recipe is the baseline."""
    verdict: str
    """allow | review | reject | invalid."""
    drivers: dict[str, str] = field(default_factory=dict)
    """Changed keys that must appear in the findings, with their expected class."""
    set_: dict[str, str | None] = field(default_factory=dict)
    """Flag -> new value (None: a bare flag to add)."""
    drop: tuple[str, ...] = ()
    """Flags removed (with their value, when they take one)."""
    env: dict[str, str] = field(default_factory=dict)
    base_extra: tuple[str, ...] = ()
    """Tokens added to the baseline too (a variant of the published recipe)."""
    error: str = ""
    """For ``invalid``: a fragment of Megatron's own message."""
    stage: str = "args"
    """For ``invalid``: ``args`` (validate_args) or ``model`` (the model's config dataclasses)."""
    source: str = ""
    """For ``invalid``: the Megatron file that raises (``path:line@0.19.2`` checked to exist);
    for the others, the line that makes the driving key's class (documentation)."""
    gpu_arch: str = ""
    """A different declared GPU architecture for the candidate."""
    te: str = ""
    """A declared Transformer Engine version for the candidate (``transformer_engine``)."""
    base_drop: tuple[str, ...] = ()
    """Flags removed from the baseline too (e.g. ``--global-batch-size``: a derived batch)."""


CASES: list[Case] = [
    # --- Llama-3 8B (TP1 PP1 CP1, DP8, MBS1 GBS128 pinned, fp8 hybrid) ---
    Case(
        "micro-batch-2",
        "llama3-8b",
        "allow",
        {"micro_batch_size": "layout"},
        set_={"--micro-batch-size": "2"},
    ),
    Case(
        "micro-batch-4",
        "llama3-8b",
        "allow",
        {"num_microbatches": "layout"},
        set_={"--micro-batch-size": "4"},
    ),
    Case(
        "micro-batch-2-gbs-derived",
        "llama3-8b",
        "reject",
        {"global_batch_size": "semantic", "micro_batch_size": "semantic"},
        set_={"--micro-batch-size": "2"},
        drop=("--global-batch-size",),
    ),
    Case(
        "tp2",
        "llama3-8b",
        "allow",
        {"tensor_model_parallel_size": "layout", "data_parallel_size": "layout"},
        set_={"--tensor-model-parallel-size": "2"},
    ),
    # TP8 pads the 128256-token vocabulary to a multiple of 128 x 8: new dummy output rows
    Case(
        "tp8-pads-vocab",
        "llama3-8b",
        "reject",
        {"padded_vocab_size": "semantic", "tensor_model_parallel_size": "layout"},
        set_={"--tensor-model-parallel-size": "8"},
    ),
    Case(
        "tp2-gbs-derived",
        "llama3-8b",
        "reject",
        {"global_batch_size": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        drop=("--global-batch-size",),
    ),
    Case(
        "cp2",
        "llama3-8b",
        "allow",
        {"context_parallel_size": "layout"},
        set_={"--context-parallel-size": "2"},
    ),
    Case(
        "pp2",
        "llama3-8b",
        "allow",
        {"pipeline_model_parallel_size": "layout"},
        set_={"--pipeline-model-parallel-size": "2"},
    ),
    Case(
        "pp4-vpp2",
        "llama3-8b",
        "allow",
        {"virtual_pipeline_model_parallel_size": "layout"},
        set_={
            "--pipeline-model-parallel-size": "4",
            "--num-layers-per-virtual-pipeline-stage": "4",
        },
    ),
    Case(
        "pp4-uneven-first-stage",
        "llama3-8b",
        "allow",
        {"decoder_first_pipeline_num_layers": "layout"},
        set_={
            "--pipeline-model-parallel-size": "4",
            "--decoder-first-pipeline-num-layers": "5",
            "--decoder-last-pipeline-num-layers": "9",
        },
    ),
    Case(
        "selective-recompute",
        "llama3-8b",
        "allow",
        {"recompute_granularity": "layout"},
        set_={"--recompute-granularity": "selective"},
    ),
    Case(
        "full-recompute",
        "llama3-8b",
        "allow",
        {"recompute_method": "layout"},
        set_={
            "--recompute-granularity": "full",
            "--recompute-method": "uniform",
            "--recompute-num-layers": "1",
        },
    ),
    # Megatron itself refuses param-gather overlap without grad-reduce overlap
    Case(
        "no-overlap-grad-reduce",
        "llama3-8b",
        "invalid",
        drop=("--overlap-grad-reduce",),
        error="Must use --overlap-param-gather with --overlap-grad-reduce",
    ),
    Case(
        "no-overlap-param-gather",
        "llama3-8b",
        "allow",
        {"overlap_param_gather": "layout"},
        drop=("--overlap-param-gather",),
    ),
    Case(
        "flash-attention",
        "llama3-8b",
        "allow",
        {"attention_backend": "layout"},
        set_={"--attention-backend": "flash"},
    ),
    Case(
        "empty-cache-off",
        "llama3-8b",
        "allow",
        {"empty_unused_memory_level": "layout"},
        set_={"--empty-unused-memory-level": "0"},
    ),
    Case("no-manual-gc", "llama3-8b", "allow", {"manual_gc": "layout"}, drop=("--manual-gc",)),
    Case(
        "log-interval",
        "llama3-8b",
        "allow",
        {"log_interval": "layout"},
        set_={"--log-interval": "10"},
    ),
    Case(
        "no-grad-accum-fusion",
        "llama3-8b",
        "allow",
        {"gradient_accumulation_fusion": "layout"},
        set_={"--no-gradient-accumulation-fusion": None},
    ),
    Case(
        "bigger-ddp-buckets",
        "llama3-8b",
        "allow",
        {"ddp_bucket_size": "layout"},
        set_={"--ddp-bucket-size": "80000000"},
    ),
    Case(
        "nccl-env",
        "llama3-8b",
        "allow",
        {"env.NCCL_NVLS_ENABLE": "layout"},
        env={"NCCL_NVLS_ENABLE": "0"},
    ),
    # a layout-looking flag that validation erases: sequence parallel is off at TP1 anyway
    Case("drop-sequence-parallel-at-tp1", "llama3-8b", "allow", drop=("--sequence-parallel",)),
    # the paper's trap: bf16 gradient reduction also turns off fp32 accumulation (validation)
    Case(
        "fp32-grad-reduce",
        "llama3-8b",
        "reject",
        {"grad_reduce_in_bf16": "semantic", "accumulate_allreduce_grads_in_fp32": "semantic"},
        drop=("--grad-reduce-in-bf16",),
    ),
    Case("lr", "llama3-8b", "reject", {"lr": "semantic"}, set_={"--lr": "0.0003"}),
    Case(
        "seq-length",
        "llama3-8b",
        "reject",
        {"seq_length": "semantic"},
        set_={"--seq-length": "4096"},
    ),
    Case("fp8-e4m3", "llama3-8b", "reject", {"fp8": "semantic"}, set_={"--fp8-format": "e4m3"}),
    Case("seed", "llama3-8b", "reject", {"seed": "semantic"}, set_={"--seed": "4321"}),
    Case(
        "train-samples",
        "llama3-8b",
        "reject",
        {"train_samples": "semantic"},
        set_={"--train-samples": "1000000"},
    ),
    # a Transformer Engine switch the allow-list holds only under NVTE_* (semantic): it scales
    # the attention logits. A name off the list never gets this far (tests/test_env_allowlist.py)
    Case(
        "te-qk-layer-scaling-env",
        "llama3-8b",
        "reject",
        {"env.NVTE_APPLY_QK_LAYER_SCALING": "semantic"},
        env={"NVTE_APPLY_QK_LAYER_SCALING": "1"},
    ),
    Case(
        "tp2-connections-8",
        "llama3-8b",
        "invalid",
        set_={"--tensor-model-parallel-size": "2"},
        env={"CUDA_DEVICE_MAX_CONNECTIONS": "8"},
        error="CUDA_DEVICE_MAX_CONNECTIONS",
    ),
    # --- Mixtral 8x7B (TP1 PP4 EP8 on 32 GPUs, DP8, MBS1 GBS256 pinned, no capacity factor) ---
    Case(
        "ep4",
        "mixtral-8x7b",
        "allow",
        {"expert_model_parallel_size": "layout"},
        set_={"--expert-model-parallel-size": "4"},
    ),
    # Mixtral balances experts with aux_loss (coefficient 1e-2): the loss is computed from one
    # micro-batch's statistics, so regrouping samples into micro-batches of 2 changes it
    Case(
        "mixtral-micro-batch-2",
        "mixtral-8x7b",
        "reject",
        {"micro_batch_size": "semantic"},
        set_={"--micro-batch-size": "2"},
        source="megatron/core/transformer/moe/router.py:419@0.19.2",
    ),
    # per-sequence statistics (seq_aux_loss), or no aux loss at all: the grouping is free
    Case(
        "mixtral-seq-aux-micro-batch-2",
        "mixtral-8x7b",
        "allow",
        {"micro_batch_size": "layout"},
        set_={"--micro-batch-size": "2"},
        base_extra=("--moe-router-load-balancing-type", "seq_aux_loss"),
        source="megatron/core/transformer/moe/router.py:447@0.19.2",
    ),
    Case(
        "mixtral-no-aux-micro-batch-2",
        "mixtral-8x7b",
        "allow",
        {"micro_batch_size": "layout"},
        set_={"--micro-batch-size": "2"},
        base_extra=("--moe-aux-loss-coeff", "0"),
        source="megatron/core/transformer/moe/router.py:416@0.19.2",
    ),
    # global_aux_loss averages over TP x DP x CP and the micro-batches so far: DP is semantic
    Case(
        "mixtral-global-aux-tp2",
        "mixtral-8x7b",
        "reject",
        {"data_parallel_size": "semantic", "num_microbatches": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--moe-router-load-balancing-type", "global_aux_loss"),
        source="megatron/core/transformer/moe/router.py:517@0.19.2",
    ),
    Case(
        "allgather-dispatcher",
        "mixtral-8x7b",
        "allow",
        {"moe_token_dispatcher_type": "layout"},
        set_={"--moe-token-dispatcher-type": "allgather"},
    ),
    Case(
        "no-grouped-gemm",
        "mixtral-8x7b",
        "allow",
        {"moe_grouped_gemm": "layout"},
        drop=("--moe-grouped-gemm",),
    ),
    Case(
        "permute-fusion",
        "mixtral-8x7b",
        "allow",
        {"moe_permute_fusion": "layout"},
        set_={"--moe-permute-fusion": None},
    ),
    # the paper's other trap: a capacity factor drops the tokens that overflow an expert
    Case(
        "capacity-factor",
        "mixtral-8x7b",
        "reject",
        {"moe_expert_capacity_factor": "semantic"},
        set_={"--moe-expert-capacity-factor": "1.0"},
    ),
    # once tokens are dropped, the micro batch decides which: layout becomes semantic
    Case(
        "micro-batch-under-capacity",
        "mixtral-8x7b",
        "reject",
        {"micro_batch_size": "semantic"},
        set_={"--micro-batch-size": "2"},
        base_extra=tuple(CAPACITY),
    ),
    Case(
        "ep4-under-capacity",
        "mixtral-8x7b",
        "allow",
        {"expert_model_parallel_size": "layout"},
        set_={"--expert-model-parallel-size": "4"},
        base_extra=tuple(CAPACITY),
    ),
    Case(
        "topk-1",
        "mixtral-8x7b",
        "invalid",
        set_={"--moe-router-topk": "1"},
        error="Please use --moe-router-pre-softmax when topk is 1",
        stage="model",
        source="megatron/core/transformer/transformer_config.py",
    ),
    Case(
        "aux-loss-coeff",
        "mixtral-8x7b",
        "reject",
        {"moe_aux_loss_coeff": "semantic"},
        set_={"--moe-aux-loss-coeff": "0.001"},
    ),
    Case(
        "no-load-balancing",
        "mixtral-8x7b",
        "reject",
        {"moe_router_load_balancing_type": "semantic"},
        set_={"--moe-router-load-balancing-type": "none"},
    ),
    # the grouped-GEMM kernels need sm80+: validation probes the (declared) GPU
    Case(
        "grouped-gemm-on-volta",
        "mixtral-8x7b",
        "invalid",
        gpu_arch="sm70",
        error="Unsupported compute capability for GroupedGEMM",
    ),
    # --- GPT-3 175B (TP8 PP16 on 128 GPUs, DP1, MBS1 GBS1536 pinned, fp16) ---
    # GPT-3 trains with Megatron's default dropout (0.1): each pipeline stage seeds its
    # generators with seed + 100 x its rank, so re-placing layers changes their dropout masks
    Case(
        "gpt3-vpp2",
        "gpt3-175b",
        "reject",
        {"num_layers_per_virtual_pipeline_stage": "semantic"},
        set_={"--num-layers-per-virtual-pipeline-stage": "3"},
        source="megatron/training/initialize.py:439@0.19.2",
    ),
    Case(
        "gpt3-micro-batch-2",
        "gpt3-175b",
        "allow",
        {"num_microbatches": "layout"},
        set_={"--micro-batch-size": "2"},
    ),
    Case(
        "gpt3-gbs-derived",
        "gpt3-175b",
        "reject",
        {"global_batch_size": "semantic"},
        drop=("--global-batch-size",),
    ),
    # the GPT-2 vocabulary comes from a file validation never reads, so whether TP4 pads it
    # differently from TP8 (50257 -> 50688 vs 51200) is unknown: a human looks
    # ... and with dropout on, TP draws attention dropout from seed + 2718 + TP rank and PP
    # seeds by stage: both degrees are semantic before the vocabulary question even arises
    Case(
        "gpt3-tp4-pp32",
        "gpt3-175b",
        "reject",
        {"tensor_model_parallel_size": "semantic", "pipeline_model_parallel_size": "semantic"},
        set_={"--tensor-model-parallel-size": "4", "--pipeline-model-parallel-size": "32"},
        source="megatron/core/tensor_parallel/random.py:481@0.19.2",
    ),
    Case(
        "gpt3-nodrop-tp4-pp32",
        "gpt3-175b",
        "review",
        {"tensor_model_parallel_size": "unknown", "pipeline_model_parallel_size": "layout"},
        set_={"--tensor-model-parallel-size": "4", "--pipeline-model-parallel-size": "32"},
        base_extra=("--attention-dropout", "0.0", "--hidden-dropout", "0.0"),
        source="megatron/training/vocab_utils.py:58@0.19.2",
    ),
    # with sequence parallelism the block runs inside the model-parallel RNG fork: hidden
    # dropout (0.1 here) then draws from seed + 2718 + TP rank instead of the default generator
    Case(
        "gpt3-sequence-parallel",
        "gpt3-175b",
        "reject",
        {"sequence_parallel": "semantic"},
        set_={"--sequence-parallel": None},
        source="megatron/core/transformer/transformer_block.py:596@0.19.2",
    ),
    Case(
        "gpt3-recompute",
        "gpt3-175b",
        "allow",
        {"recompute_granularity": "layout"},
        set_={"--recompute-activations": None},
    ),
    Case(
        "gpt3-distributed-optimizer",
        "gpt3-175b",
        "allow",
        {"use_distributed_optimizer": "layout"},
        set_={"--use-distributed-optimizer": None},
    ),
    Case(
        "gpt3-bf16",
        "gpt3-175b",
        "reject",
        {"bf16": "semantic", "fp16": "semantic"},
        set_={"--bf16": None},
        drop=("--fp16",),
    ),
    Case(
        "gpt3-static-loss-scale",
        "gpt3-175b",
        "reject",
        {"loss_scale": "semantic"},
        set_={"--loss-scale": "4096"},
    ),
    Case(
        "gpt3-dropout-off",
        "gpt3-175b",
        "reject",
        {"hidden_dropout": "semantic"},
        set_={"--hidden-dropout": "0.0"},
    ),
    Case(
        "gpt3-timeout",
        "gpt3-175b",
        "allow",
        {"distributed_timeout_minutes": "layout"},
        set_={"--distributed-timeout-minutes": "30"},
    ),
    # EOD tokens masked out of a loss normalised per micro-batch: regrouping re-weights samples
    Case(
        "gpt3-micro-batch-eod-mask",
        "gpt3-175b",
        "reject",
        {"micro_batch_size": "semantic"},
        set_={"--micro-batch-size": "2"},
        base_extra=("--eod-mask-loss",),
    ),
    Case(
        "gpt3-micro-batch-eod-mask-per-token",
        "gpt3-175b",
        "allow",
        {"micro_batch_size": "layout"},
        set_={"--micro-batch-size": "2"},
        base_extra=("--eod-mask-loss", "--calculate-per-token-loss"),
    ),
    # the cyclic sampler shuffles in buckets of micro batch x DP
    Case(
        "gpt3-micro-batch-cyclic",
        "gpt3-175b",
        "reject",
        {"micro_batch_size": "semantic"},
        set_={"--micro-batch-size": "2"},
        base_extra=("--dataloader-type", "cyclic"),
    ),
    # the published script's batch ramp: Megatron 0.19 refuses it beside --global-batch-size
    Case(
        "gpt3-batch-ramp",
        "gpt3-175b",
        "invalid",
        set_={"--step-batch-size-schedule": "0:16 2.4B:320 12B:1536"},
        error="Cannot specify both",
    ),
    # ================= the whole validation, warnings, derived values, conditions =============
    # --- refused by validate_args: a reject with an invalid finding, never an error ---
    Case(
        "te-cross-entropy-fusion",
        "llama3-8b",
        "invalid",
        set_={"--cross-entropy-fusion-impl": "te"},
        error="Transformer Engine cross entropy loss fusion is disabled due to stability issues",
        source="megatron/training/arguments.py",
    ),
    Case(
        "tp3-world-8",
        "llama3-8b",
        "invalid",
        set_={"--tensor-model-parallel-size": "3"},
        error="world size (8) is not divisible by total_model_size",
        source="megatron/training/arguments.py",
    ),
    Case(
        "gpt3-vpp-4-of-6",
        "gpt3-175b",
        "invalid",
        set_={"--num-layers-per-virtual-pipeline-stage": "4"},
        error="must be divisible number of layers per virtual pipeline stage",
        source="megatron/training/arguments.py",
    ),
    # --- refused when the model's configuration is built (TransformerConfig, GPTModelConfig) ---
    # 32 layers, PP4, 6 on the first stage: 26 left for 3 middle stages
    Case(
        "pp4-first-stage-6",
        "llama3-8b",
        "invalid",
        set_={"--pipeline-model-parallel-size": "4", "--decoder-first-pipeline-num-layers": "6"},
        error="number of layers at middle stage: 26 must be divisible",
        stage="model",
        source="megatron/core/transformer/transformer_config.py",
    ),
    # declared without Transformer Engine: the rope fusion (on by default) has no kernel
    Case(
        "no-transformer-engine",
        "llama3-8b",
        "invalid",
        te="none",
        error="apply_rope_fusion is not available",
        stage="model",
        source="megatron/core/transformer/transformer_config.py",
    ),
    # TE 1.3 predates the fused RoPE kernel (TE >= 1.4)
    Case(
        "transformer-engine-1.3",
        "llama3-8b",
        "invalid",
        te="1.3",
        error="apply_rope_fusion is not available. Please install TE >= 1.4",
        stage="model",
        source="megatron/core/transformer/transformer_config.py",
    ),
    # fused MoE permutation needs TE >= 2.1; the recipe declares 2.0
    Case(
        "moe-permute-fusion-te-2.0",
        "mixtral-8x7b",
        "invalid",
        set_={"--moe-permute-fusion": None},
        te="2.0",
        error="fused permutation is not available",
        stage="model",
        source="megatron/core/transformer/transformer_config.py",
    ),
    # CUDA graphs need TE's RNG tracker: GPTModelConfig.finalize refuses them without it
    Case(
        "cuda-graphs-without-te-rng",
        "llama3-8b",
        "invalid",
        set_={"--cuda-graph-impl": "local"},
        error="Transformer engine's RNG tracker is required for cudagraphs",
        stage="model",
        source="megatron/training/models/gpt.py",
    ),
    # --- a warning about numerical stability that the candidate introduces: review ---
    Case(
        "ckpt-exchange-gather-rounds",
        "llama3-8b",
        "review",
        {
            "ckpt_fully_parallel_load": "layout",
            "warning:currently-only-the-broadcast-exchange-algorithm-is-supported": "unknown",
        },
        set_={
            "--ckpt-fully-parallel-load": None,
            "--ckpt-fully-parallel-load-exchange-algo": "gather_rounds",
        },
        source="megatron/training/arguments.py:1732@0.19.2",
    ),
    # --- the derived global batch, not how the recipe spelled it (global batch unpinned) ---
    # TP2 halves DP (8 -> 4) and MBS 2 doubles each rank's batch: the derived global batch stays 8
    Case(
        "unpinned-tp2-mbs2",
        "llama3-8b",
        "allow",
        {"tensor_model_parallel_size": "layout", "micro_batch_size": "layout"},
        set_={"--tensor-model-parallel-size": "2", "--micro-batch-size": "2"},
        base_drop=("--global-batch-size",),
        source="megatron/training/arguments.py:684@0.19.2",
    ),
    Case(
        "unpinned-cp2-mbs2",
        "llama3-8b",
        "allow",
        {"context_parallel_size": "layout", "data_parallel_size": "layout"},
        set_={"--context-parallel-size": "2", "--micro-batch-size": "2"},
        base_drop=("--global-batch-size",),
        source="megatron/training/arguments.py:684@0.19.2",
    ),
    # TP2 alone: DP 8 -> 4, so the derived global batch goes 8 -> 4 samples per step
    Case(
        "unpinned-tp2",
        "llama3-8b",
        "reject",
        {"global_batch_size": "semantic", "tensor_model_parallel_size": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_drop=("--global-batch-size",),
        source="megatron/training/arguments.py:684@0.19.2",
    ),
    Case(
        "unpinned-pp2",
        "llama3-8b",
        "reject",
        {"global_batch_size": "semantic", "pipeline_model_parallel_size": "semantic"},
        set_={"--pipeline-model-parallel-size": "2"},
        base_drop=("--global-batch-size",),
        source="megatron/training/arguments.py:684@0.19.2",
    ),
    # --- options under which a parallel degree changes the math ---
    # blockwise Muon (the default TP mode) orthogonalises each TP shard on its own
    Case(
        "muon-blockwise-tp2",
        "llama3-8b",
        "reject",
        {"tensor_model_parallel_size": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--optimizer", "muon"),
        source="megatron/core/optimizer/emerging_optimizers.py:290@0.19.2",
    ),
    Case(
        "muon-duplicated-tp2",
        "llama3-8b",
        "allow",
        {"tensor_model_parallel_size": "layout"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--optimizer", "muon", "--muon-tp-mode", "duplicated"),
        source="megatron/core/optimizer/emerging_optimizers.py:290@0.19.2",
    ),
    Case(
        "muon-blockwise-etp2",
        "mixtral-8x7b",
        "reject",
        {"expert_tensor_parallel_size": "semantic"},
        set_={"--expert-tensor-parallel-size": "2"},
        base_extra=("--optimizer", "muon"),
        source="megatron/core/optimizer/emerging_optimizers.py:290@0.19.2",
    ),
    # attention dropout is drawn in the TP region from seed + 2718 + TP rank
    Case(
        "attention-dropout-tp2",
        "llama3-8b",
        "reject",
        {"tensor_model_parallel_size": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--attention-dropout", "0.1"),
        source="megatron/core/tensor_parallel/random.py:481@0.19.2",
    ),
    # hidden dropout under sequence parallelism (on at TP2) moves into the TP RNG fork
    Case(
        "hidden-dropout-tp2-sp",
        "llama3-8b",
        "reject",
        {"tensor_model_parallel_size": "semantic", "sequence_parallel": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--hidden-dropout", "0.1"),
        source="megatron/core/transformer/transformer_block.py:596@0.19.2",
    ),
    Case(
        "hidden-dropout-pp2",
        "llama3-8b",
        "reject",
        {"pipeline_model_parallel_size": "semantic"},
        set_={"--pipeline-model-parallel-size": "2"},
        base_extra=("--hidden-dropout", "0.1"),
        source="megatron/training/initialize.py:439@0.19.2",
    ),
    # TE's RNG tracker: another generator draws the masks, which matters only with dropout on
    Case(
        "gpt3-te-rng-tracker",
        "gpt3-175b",
        "reject",
        {"te_rng_tracker": "semantic"},
        set_={"--te-rng-tracker": None},
        source="megatron/core/tensor_parallel/random.py:380@0.19.2",
    ),
    Case(
        "te-rng-tracker-no-dropout",
        "llama3-8b",
        "allow",
        {"te_rng_tracker": "layout"},
        set_={"--te-rng-tracker": None},
        source="megatron/core/tensor_parallel/random.py:380@0.19.2",
    ),
    # replicas seeded by DP rank: another DP degree starts from other weights
    Case(
        "dp-random-init-tp2",
        "llama3-8b",
        "reject",
        {"data_parallel_size": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--data-parallel-random-init",),
        source="megatron/training/initialize.py:443@0.19.2",
    ),
    # the cyclic sampler shuffles in buckets of micro batch x DP
    Case(
        "cyclic-loader-tp2",
        "llama3-8b",
        "reject",
        {"data_parallel_size": "semantic"},
        set_={"--tensor-model-parallel-size": "2"},
        base_extra=("--dataloader-type", "cyclic"),
        source="megatron/training/datasets/data_samplers.py:366@0.19.2",
    ),
    # GPT-3 with dropout off: virtual stages and sequence parallelism are layout again
    Case(
        "gpt3-nodrop-vpp2",
        "gpt3-175b",
        "allow",
        {"num_layers_per_virtual_pipeline_stage": "layout"},
        set_={"--num-layers-per-virtual-pipeline-stage": "3"},
        base_extra=("--attention-dropout", "0.0", "--hidden-dropout", "0.0"),
        source="megatron/training/initialize.py:439@0.19.2",
    ),
    Case(
        "gpt3-nodrop-sequence-parallel",
        "gpt3-175b",
        "allow",
        {"sequence_parallel": "layout"},
        set_={"--sequence-parallel": None},
        base_extra=("--attention-dropout", "0.0", "--hidden-dropout", "0.0"),
        source="megatron/core/transformer/transformer_block.py:596@0.19.2",
    ),
]


def _edit(args: list[str], set_: dict[str, str | None], drop: tuple[str, ...]) -> list[str]:
    out = list(args)
    for flag in drop:
        i = out.index(flag)
        takes_value = i + 1 < len(out) and not out[i + 1].startswith("--")
        del out[i : i + (2 if takes_value else 1)]
    for flag, value in set_.items():
        if flag in out:
            if value is not None:
                out[out.index(flag) + 1] = value
        else:
            out += [flag] if value is None else [flag, value]
    return out


def _variant(
    recipe: Recipe,
    name: str,
    args: list[str],
    env: dict[str, str],
    gpu_arch: str = "",
    te: str = "",
) -> Recipe:
    body = dict(recipe.body, args=args, env={**recipe.body.get("env", {}), **env})
    if gpu_arch:
        body["gpu_arch"] = gpu_arch
    if te:
        body["transformer_engine"] = te
    return recipe.model_copy(update={"name": name, "path": f"{name}.yaml", "body": body})


def baseline_of(case: Case) -> Recipe:
    recipe = load_recipe(EXAMPLES / f"{case.recipe}.yaml")
    if not case.base_extra and not case.base_drop:
        return recipe
    args = [*_edit(recipe.body["args"], {}, case.base_drop), *case.base_extra]
    return _variant(recipe, f"{case.recipe}+{case.name}-base", args, {})


def candidate_of(case: Case) -> Recipe:
    base = baseline_of(case)
    args = _edit(base.body["args"], case.set_, case.drop)
    return _variant(base, case.name, args, case.env, case.gpu_arch, case.te)
