"""The embedded workload trains the same thing whatever the layout, its derived side effects are
real and caught by the pre-launch gate, and injected faults are caught by the post-launch gate.

Every run here is real training in a real subprocess (torchrun for data parallel)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from gate import postlaunch, prelaunch
from gate.models import EffectiveConfig, GateReport, Recipe, TrialResult
from gate.postlaunch_reference import PostLaunchReference
from gate.recipe import load_recipe
from gate.registry import Registry
from runners.bench import run_bench
from runners.embedded.config import WorkloadConfig, expert_capacity, validate_and_derive
from runners.embedded.data import BLOCK, micro_batch, samples
from runners.embedded.model import GPT, MoE
from runners.local import PROJECT_ROOT

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

STEPS = 3
"""Steps of a layout comparison run: step 1 checks the forward, steps 2-3 the update."""
STEP1_RTOL = 1e-5
LATER_RTOL = 1e-4
"""Later steps also went through backward, all-reduce and the optimizer: a little more slack."""

MakeRecipe = Callable[..., Recipe]
Resolve = Callable[[Recipe], EffectiveConfig]


def rel(a: float | None, b: float | None) -> float:
    """Relative difference of two logged losses; a run that logged none fails here."""
    assert a is not None and b is not None
    return abs(a - b) / abs(b)


def bench(recipe: Recipe, workdir: Path, *, steps: int = STEPS) -> TrialResult:
    return run_bench(recipe, steps=steps, warmup=1, workdir=workdir, timeout_s=300)


def finding(report: GateReport, key: str) -> Any:
    matches = [f for f in report.findings if f.key == key]
    assert matches, f"no finding for {key}: {[f.key for f in report.findings]}"
    return matches[0]


# --------------------------------------------------------------------------- data


DATA = {"vocab_size": 256, "seq_len": 16, "data_seed": 3}


@pytest.mark.parametrize(("micro", "world"), [(1, 1), (2, 1), (8, 1), (1, 2), (2, 2), (4, 2)])
@pytest.mark.parametrize("step", [1, 2, 9])
def test_micro_batches_of_any_layout_make_the_same_global_batch(
    step: int, micro: int, world: int
) -> None:
    global_batch = 8
    inputs, targets = [], []
    for rank in range(world):  # rank r owns the r-th slice, cut into micro-batches in order
        for m in range(global_batch // (micro * world)):
            x, y = micro_batch(
                step, rank, m, global_batch=global_batch, micro_batch=micro, world=world, **DATA
            )
            assert x.shape == y.shape == (micro, DATA["seq_len"])
            inputs.append(x)
            targets.append(y)
    x, y = torch.cat(inputs), torch.cat(targets)

    expected = samples((step - 1) * global_batch, global_batch, **DATA)
    assert torch.equal(x, expected[:, :-1])
    assert torch.equal(y, expected[:, 1:])
    # targets are the inputs shifted by one token
    assert torch.equal(x[:, 1:], y[:, :-1])
    # and a step really has its own samples (step 9 crosses into the second generation block)
    other = samples(step * global_batch, global_batch, **DATA)
    assert not torch.equal(expected, other)


def test_a_sample_does_not_depend_on_how_many_were_requested() -> None:
    everything = samples(0, 3 * BLOCK, **DATA)
    assert len({tuple(row.tolist()) for row in everything}) == 3 * BLOCK  # not one repeated row
    for first, count in [(0, 1), (5, 3), (BLOCK - 2, 5), (2 * BLOCK + 7, 1), (1, 3 * BLOCK - 1)]:
        assert torch.equal(samples(first, count, **DATA), everything[first : first + count])
    # another corpus seed is another corpus
    assert not torch.equal(samples(0, 4, **{**DATA, "data_seed": 4}), everything[:4])


# --------------------------------------------------------------------------- layout levers


@pytest.fixture(scope="module")
def baseline(
    tmp_path_factory: pytest.TempPathFactory, small_recipe: MakeRecipe
) -> tuple[Recipe, TrialResult]:
    """The small recipe's reference run: threads 1, micro batch 1, sdpa, foreach, 1 process."""
    tmp = tmp_path_factory.mktemp("baseline")
    recipe = small_recipe(tmp, "baseline")
    result = bench(recipe, tmp / "run")
    assert result.status == "ok", result.error
    assert [s.step for s in result.steps] == [1, 2, 3]
    return recipe, result


LAYOUT_LEVERS = [
    pytest.param({"threads": 2}, id="threads-2"),
    pytest.param({"micro_batch_size": 4}, id="micro-batch-4"),
    pytest.param({"attention": "math"}, id="attention-math"),
    pytest.param({"activation_checkpointing": True}, id="activation-checkpointing"),
    pytest.param({"optimizer_impl": "for_loop"}, id="optimizer-for-loop"),
    pytest.param({"optimizer_impl": "fused"}, id="optimizer-fused"),
    pytest.param({"data_parallel_size": 2}, id="data-parallel-2"),
    pytest.param({"compile": True}, id="compile", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("lever", LAYOUT_LEVERS)
def test_layout_lever_trains_the_same_thing_and_the_gate_allows_it(
    lever: dict[str, Any],
    baseline: tuple[Recipe, TrialResult],
    small_recipe: MakeRecipe,
    resolve: Resolve,
    registry: Registry,
    tmp_path: Path,
) -> None:
    base_recipe, base = baseline
    name = "-".join(f"{k}-{v}" for k, v in lever.items())
    candidate = small_recipe(tmp_path, name, **lever)

    report = prelaunch.judge(resolve(base_recipe), resolve(candidate), registry)
    assert report.verdict == "allow", report.to_json()
    for key, value in lever.items():  # the lever really changed the effective config
        assert finding(report, key).candidate == value
    assert all(f.key_class == "layout" for f in report.findings)

    result = bench(candidate, tmp_path / "run")
    assert result.status == "ok", result.error
    assert result.devices == lever.get("data_parallel_size", 1)
    if lever.get("compile"):  # inductor really ran: step 1 paid for the compilation
        assert result.steps[0].step_seconds > 10 * result.steps[1].step_seconds
    assert result.fingerprint != base.fingerprint
    assert result.step1_loss is not None and base.step1_loss is not None
    deltas = [rel(c.loss, b.loss) for c, b in zip(result.steps, base.steps, strict=True)]
    print(f"{name}: relative loss deltas per step {[f'{d:.2e}' for d in deltas]}")
    assert rel(result.step1_loss, base.step1_loss) <= STEP1_RTOL
    assert all(d <= LATER_RTOL for d in deltas[1:]), deltas
    # and the training did move: a broken optimizer would log a flat loss
    first, last = result.steps[0].loss, result.steps[-1].loss
    assert first is not None and last is not None and abs(last - first) > 1e-3
    assert postlaunch.check(result, PostLaunchReference.step1_only(base.step1_loss)).passed


def test_the_example_layout_candidate_is_allowed_and_the_bf16_one_rejected(
    resolve: Resolve, registry: Registry
) -> None:
    examples = PROJECT_ROOT / "examples"
    base = resolve(load_recipe(examples / "ported-gpt.yaml"))
    threads = resolve(load_recipe(examples / "candidates" / "threads-2.yaml"))
    bf16 = resolve(load_recipe(examples / "candidates" / "grad-reduce-bf16.yaml"))

    report = prelaunch.judge(base, threads, registry)
    assert report.verdict == "allow"
    assert [(f.key, f.baseline, f.candidate) for f in report.findings] == [("threads", 1, 2)]

    report = prelaunch.judge(base, bf16, registry)
    assert report.verdict == "reject"
    acc = finding(report, "accumulate_grads_in_fp32")
    assert (acc.baseline, acc.candidate, acc.key_class, acc.derived) == (
        True,
        False,
        "semantic",
        True,
    )
    assert finding(report, "grad_reduce_in_bf16").derived is False


# --------------------------------------------------------------------------- derived side effects


Judge = Callable[[dict[str, Any], dict[str, Any]], GateReport]


@pytest.fixture
def judge_configs(
    tmp_path: Path,
    write_recipe: Callable[..., Path],
    resolve: Resolve,
    registry: Registry,
) -> Judge:
    """Write both configs as recipe files, resolve them, and run the pre-launch gate."""

    def judge(base: dict[str, Any], cand: dict[str, Any]) -> GateReport:
        b = resolve(load_recipe(write_recipe(tmp_path, "base", **base)))
        c = resolve(load_recipe(write_recipe(tmp_path, "cand", **cand)))
        return prelaunch.judge(b, c, registry)

    return judge


def assert_finding(
    report: GateReport, key: str, baseline: Any, candidate: Any, key_class: str, derived: bool
) -> None:
    f = finding(report, key)
    assert (f.baseline, f.candidate, f.key_class, f.derived) == (
        baseline,
        candidate,
        key_class,
        derived,
    ), f


def test_micro_batch_with_unpinned_global_batch_changes_the_batch(
    judge_configs: Judge, small_config: dict[str, Any]
) -> None:
    del small_config["global_batch_size"]
    report = judge_configs(small_config, {**small_config, "micro_batch_size": 2})
    assert report.verdict == "reject"
    assert_finding(report, "global_batch_size", 1, 2, "semantic", derived=True)
    mb = finding(report, "micro_batch_size")
    assert (mb.key_class, mb.derived) == ("semantic", False)
    assert "global_batch_size" in mb.reason

    pinned = {**small_config, "global_batch_size": 8}
    assert judge_configs(pinned, {**pinned, "micro_batch_size": 2}).verdict == "allow"


def test_data_parallel_with_unpinned_global_batch_changes_the_batch(
    judge_configs: Judge, small_config: dict[str, Any]
) -> None:
    del small_config["global_batch_size"]
    report = judge_configs(small_config, {**small_config, "data_parallel_size": 2})
    assert report.verdict == "reject"
    assert_finding(report, "global_batch_size", 1, 2, "semantic", derived=True)
    assert finding(report, "data_parallel_size").key_class == "semantic"


def test_grad_reduce_in_bf16_lowers_the_accumulation_dtype(
    judge_configs: Judge, small_config: dict[str, Any]
) -> None:
    report = judge_configs(small_config, {**small_config, "grad_reduce_in_bf16": True})
    assert report.verdict == "reject"
    assert_finding(report, "accumulate_grads_in_fp32", True, False, "semantic", derived=True)
    assert_finding(report, "grad_reduce_in_bf16", False, True, "semantic", derived=False)


MOE = {"moe_num_experts": 4, "moe_top_k": 2}


def test_fast_dispatch_without_capacity_sets_one_and_is_rejected(
    judge_configs: Judge, small_config: dict[str, Any]
) -> None:
    base = {**small_config, **MOE}
    report = judge_configs(base, {**base, "moe_fast_dispatch": True})
    assert report.verdict == "reject"
    assert_finding(report, "moe_capacity_factor", None, 1.0, "semantic", derived=True)
    assert_finding(report, "moe_fast_dispatch", False, True, "layout", derived=False)

    # with the capacity pinned, fast dispatch is the layout change the registry says it is
    capped = {**base, "moe_capacity_factor": 1.0}
    assert judge_configs(capped, {**capped, "moe_fast_dispatch": True}).verdict == "allow"


def test_micro_batch_with_a_capacity_factor_is_semantic(
    judge_configs: Judge, small_config: dict[str, Any]
) -> None:
    capped = {**small_config, **MOE, "moe_capacity_factor": 1.25}
    report = judge_configs(capped, {**capped, "micro_batch_size": 4})
    assert report.verdict == "reject"
    mb = finding(report, "micro_batch_size")
    assert mb.key_class == "semantic" and "capacity" in mb.reason
    assert finding(report, "grad_accum_steps").key_class == "layout"

    dropless = {**small_config, **MOE}
    assert judge_configs(dropless, {**dropless, "micro_batch_size": 4}).verdict == "allow"


# The side effects are real: the same weights give other outputs.


MOE_MODEL = {"n_layer": 2, "n_head": 4, "d_model": 64, "seq_len": 32, "global_batch_size": 8}


def moe_config(**over: Any) -> WorkloadConfig:
    return validate_and_derive({**MOE_MODEL, **MOE, "micro_batch_size": 8, **over}, {})


def loss_of(cfg: WorkloadConfig, state: dict[str, torch.Tensor]) -> float:
    model = GPT(cfg)
    model.load_state_dict(state)
    x, y = micro_batch(
        1,
        0,
        0,
        global_batch=8,
        micro_batch=8,
        world=1,
        vocab_size=cfg.vocab_size,
        seq_len=cfg.seq_len,
        data_seed=cfg.data_seed,
    )
    with torch.no_grad():
        return float(model(x, y))


def moe_pair(a: WorkloadConfig, b: WorkloadConfig) -> tuple[MoE, MoE]:
    torch.manual_seed(0)
    first = MoE(a)
    second = MoE(b)
    second.load_state_dict(first.state_dict())
    return first, second


def test_fast_dispatch_default_capacity_drops_tokens() -> None:
    dropless, fast = moe_config(), moe_config(moe_fast_dispatch=True)
    assert (dropless.moe_capacity_factor, fast.moe_capacity_factor) == (None, 1.0)
    torch.manual_seed(0)
    state = GPT(dropless).state_dict()
    loss_dropless, loss_fast = loss_of(dropless, state), loss_of(fast, state)
    print(f"dropless {loss_dropless:.6f} vs fast dispatch {loss_fast:.6f}")
    assert rel(loss_fast, loss_dropless) > 1e-5

    # at the layer: exactly the tokens routed past an expert's capacity lose an expert
    ref, dropping = moe_pair(dropless, fast)
    x = torch.randn(8, 32, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full, cut = ref(x).reshape(-1, 64), dropping(x).reshape(-1, 64)
        experts = torch.softmax(ref.router(x.reshape(-1, 64)), -1).topk(2, -1).indices
    capacity = expert_capacity(8 * 32, fast)
    assert capacity == 8 * 32 * 2 // 4
    over = int((torch.bincount(experts.reshape(-1), minlength=4) - capacity).clamp(min=0).sum())
    changed = int((~torch.isclose(full, cut, atol=1e-6).all(-1)).sum())
    assert over > 0
    assert math.ceil(over / 2) <= changed <= over


def test_fast_dispatch_with_the_same_capacity_computes_the_same_thing() -> None:
    loop, fast = (
        moe_config(moe_capacity_factor=1.0),
        moe_config(moe_capacity_factor=1.0, moe_fast_dispatch=True),
    )
    torch.manual_seed(0)
    state = GPT(loop).state_dict()
    assert rel(loss_of(fast, state), loss_of(loop, state)) <= 1e-5
    a, b = moe_pair(loop, fast)
    x = torch.randn(8, 32, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(a(x), b(x), rtol=1e-5, atol=1e-6)


def test_capacity_is_per_micro_batch() -> None:
    """Why micro_batch_size is semantic once a capacity factor is set."""
    x = torch.randn(8, 32, 64, generator=torch.Generator().manual_seed(2))
    for cfg, same in [(moe_config(), True), (moe_config(moe_capacity_factor=1.0), False)]:
        torch.manual_seed(0)
        layer = MoE(cfg)
        with torch.no_grad():
            whole = layer(x)
            halves = torch.cat([layer(x[:4]), layer(x[4:])])
        assert torch.allclose(whole, halves, atol=1e-6) is same


# --------------------------------------------------------------------------- faults


def test_nan_in_a_later_step_fails_the_post_launch_gate(
    baseline: tuple[Recipe, TrialResult],
    small_recipe: MakeRecipe,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, base = baseline
    assert base.step1_loss is not None
    monkeypatch.setenv("ATTUNE_FAULT", "nan_at_step=3")
    result = bench(small_recipe(tmp_path, "nan"), tmp_path / "run", steps=4)

    assert result.status == "nan"
    assert result.has_nonfinite
    assert result.score is None
    assert [s.finite() for s in result.steps][:3] == [True, True, False]
    assert result.step1_loss is not None
    assert rel(result.step1_loss, base.step1_loss) <= STEP1_RTOL  # the loss check alone passes

    post = postlaunch.check(result, PostLaunchReference.step1_only(base.step1_loss))
    assert not post.passed
    assert post.relative_loss_delta is not None and post.relative_loss_delta <= STEP1_RTOL
    assert any("NaN" in r for r in post.reasons), post.reasons


CHECKPOINT_STEPS = 60
"""Enough training that the two blocks differ: misloading them moves step-1 loss > 5%."""


def test_misloaded_layers_fail_the_post_launch_gate(
    small_recipe: MakeRecipe,
    small_config: dict[str, Any],
    resolve: Resolve,
    registry: Registry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # train the weights for real, with the workload's own entry point
    train_cfg = validate_and_derive({**small_config, "micro_batch_size": 8}, {})
    config_path = tmp_path / "train-config.json"
    config_path.write_text(train_cfg.model_dump_json())
    ckpt = tmp_path / "trained.pt"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("ATTUNE_FAULT", None)
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "runners.embedded.train", "--config", str(config_path)),
            *("--steps", str(CHECKPOINT_STEPS), "--save-checkpoint", str(ckpt)),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    logged = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(logged) == CHECKPOINT_STEPS and logged[-1]["loss"] < logged[0]["loss"] * 0.9

    base_recipe = small_recipe(tmp_path, "base", init_from=str(ckpt))
    cand_recipe = small_recipe(tmp_path, "cand", init_from=str(ckpt), micro_batch_size=4)
    report = prelaunch.judge(resolve(base_recipe), resolve(cand_recipe), registry)
    assert report.verdict == "allow"

    base = bench(base_recipe, tmp_path / "base", steps=2)
    normal = bench(cand_recipe, tmp_path / "normal", steps=2)
    monkeypatch.setenv("ATTUNE_FAULT", "misload_layers")
    misloaded = bench(cand_recipe, tmp_path / "misloaded", steps=2)
    for r in (base, normal, misloaded):
        assert r.status == "ok", r.error
    assert base.step1_loss is not None
    # the checkpoint was really loaded: well below the random-init loss ln(256) = 5.55
    assert base.step1_loss < 0.9 * math.log(256)
    assert misloaded.fingerprint == normal.fingerprint  # the bug is invisible before launch

    ok = postlaunch.check(normal, PostLaunchReference.step1_only(base.step1_loss))
    bad = postlaunch.check(misloaded, PostLaunchReference.step1_only(base.step1_loss))
    print(
        f"misload: normal delta {ok.relative_loss_delta:.2e}, "
        f"misloaded delta {bad.relative_loss_delta:.2%}"
    )
    assert ok.passed, ok.reasons
    assert ok.relative_loss_delta is not None and ok.relative_loss_delta <= STEP1_RTOL
    assert not bad.passed
    assert bad.relative_loss_delta is not None and bad.relative_loss_delta > 0.05
    assert any("trains something else" in r for r in bad.reasons), bad.reasons
