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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe
from gate.prelaunch import judge
from gate.recipe import load_recipe
from gate.registry import Registry, load_registry
from runners.torchtitan.adapter import TorchtitanAdapter

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
    published: global batch derived as 1 x 8) or ``llama3-70b`` (derived, 64 ranks)."""
    overrides: list[str]
    verdict: str
    """allow | review | reject, or error when torchtitan (or its trainer) refuses it."""
    drivers: dict[str, str] = field(default_factory=dict)
    """Keys expected among the findings, with their class (the error text for ``error``)."""
    body: dict[str, Any] = field(default_factory=dict)
    """Recipe keys replaced (world_size, config, env)."""


S, L, U = "semantic", "layout", "unknown"
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
    Case(
        "code-override",
        "llama3-8b",
        ["--override.imports", "my_overrides.fused_rope"],
        "reject",
        {"override.imports": S},
    ),
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
        {GBS: S, DP_SHARD: S, "parallelism.tensor_parallel_degree": L},
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
    # the same derived batch (2 x 4 = 1 x 8), still rejected: with the batch unpinned the
    # registry treats the data-parallel layout itself as part of the recipe
    Case(
        "unpinned-compensated",
        "llama3-8b-unpinned",
        ["--training.local_batch_size", "2", "--parallelism.tensor_parallel_degree", "2"],
        "reject",
        {LOCAL: S, DP_SHARD: S},
    ),
    Case(
        "70b-hsdp",
        "llama3-70b",
        ["--parallelism.data_parallel_replicate_degree", "2"],
        "reject",
        {"parallelism.data_parallel_replicate_degree": S, DP_SHARD: S},
    ),
    Case(
        "70b-tp4",
        "llama3-70b",
        ["--parallelism.tensor_parallel_degree", "4"],
        "reject",
        {GBS: S, "parallelism.tensor_parallel_degree": L},
    ),
    # --- environment the registry does not know: launched, flagged for review
    Case(
        "nccl-algo",
        "llama3-8b",
        [],
        "review",
        {"env.NCCL_ALGO": U},
        {"env": {"NCCL_ALGO": "Ring"}},
    ),
    Case(
        "compile-and-allocator",
        "llama3-8b",
        ["--compile.enable"],
        "review",
        {"compile.enable": L, "env.PYTORCH_CUDA_ALLOC_CONF": U},
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


def baseline(name: str) -> Recipe:
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
    assert {c.verdict for c in CASES} == {"allow", "review", "reject", "error"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_labelled_candidate(case: Case, outcomes: dict[str, Outcome], registry: Registry) -> None:
    base, cand = outcomes[case.base], outcomes[case.name]
    assert isinstance(base, EffectiveConfig), base
    if case.verdict == "error":
        assert isinstance(cand, AttuneError), "torchtitan or its trainer should refuse this"
        assert str(cand).startswith(f"{case.name}.yaml: overrides: ")
        assert case.drivers["error"] in str(cand)
        return
    assert isinstance(cand, EffectiveConfig), cand
    report = judge(base, cand, registry)
    classes = {f.key: f.key_class for f in report.findings}
    summary = ", ".join(f"{k}={v}" for k, v in sorted(classes.items()))
    assert report.verdict == case.verdict, summary
    for key, expected in case.drivers.items():
        assert classes.get(key) == expected, f"{key}: {summary}"


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
        [sys.executable, "-m", "bot.cli", "gate", "check", *map(str, paths), "--json"],
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


def test_gate_check_cli_refused_candidate_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "tp3.yaml"
    body = {**baseline("llama3-8b").body, "framework": "torchtitan", "name": "tp3"}
    body["overrides"] = [*body["overrides"], "--parallelism.tensor_parallel_degree", "3"]
    bad.write_text(json.dumps(body))  # JSON is YAML
    proc = gate_check(EXAMPLES / "llama3-8b.yaml", bad)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert f"{bad}: overrides: parallelism: Invalid parallel dims" in proc.stderr
