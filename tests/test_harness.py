"""The benchmark harness's arguments: the same for every trial, replacing the recipe's own."""

from __future__ import annotations

from pathlib import Path

from runners.harness import PROFILE_EXTRA_STEPS, megatron_args, torchtitan_overrides

WORK = Path("/runs/trial")  # not a path: a stand-in work directory, never touched


def test_megatron_iteration_based_recipe_gets_its_length_and_logging_replaced() -> None:
    recipe = ["--num-layers", "32", "--train-iters", "500000", "--log-interval", "100"]
    recipe += ["--eval-interval=1000", "--save-interval", "1000", "--log-throughput"]
    recipe += ["--load", "/ckpt/prod"]
    out = megatron_args(
        recipe, steps=12, global_batch_size=128, devices=8, workdir=WORK, profile=False
    )
    assert out.argv[:2] == ["--num-layers", "32"]
    assert out.argv[2:] == out.harness
    assert out.harness[:2] == ["--train-iters", "12"]
    assert out.harness[2:4] == ["--log-interval", "1"] and "--log-throughput" in out.harness
    assert out.harness[5:7] == ["--eval-iters", "0"]
    assert "--save" not in out.argv and "--save-interval" not in out.argv
    assert "--load" not in out.argv  # removed, not replaced: no trial starts from a checkpoint
    assert out.overridden == [
        "--train-iters 500000",
        "--log-interval 100",
        "--eval-interval=1000",
        "--save-interval 1000",
        "--log-throughput",
        "--load /ckpt/prod",
    ]
    assert out.profile_trace is None


def test_a_sample_based_megatron_recipe_stays_sample_based() -> None:
    recipe = ["--train-samples", "1953125", "--lr-decay-samples", "1949218"]
    out = megatron_args(
        recipe, steps=10, global_batch_size=64, devices=8, workdir=WORK, profile=False
    )
    assert out.harness[:2] == ["--train-samples", str(10 * 64)]
    assert "--train-iters" not in out.argv
    assert out.argv[:2] == ["--lr-decay-samples", "1949218"]  # the recipe's schedule is kept


def test_megatron_profiling_runs_extra_steps_and_every_rank_writes_a_trace() -> None:
    recipe = [
        "--profile",
        "--profile-step-start",
        "4",
        "--profile-ranks",
        "0",
        "1",
        "--seq-length",
        "8",
    ]
    out = megatron_args(
        recipe, steps=10, global_batch_size=8, devices=4, workdir=WORK, profile=True
    )
    total = 10 + PROFILE_EXTRA_STEPS
    assert out.harness[:2] == ["--train-iters", str(total)]
    assert out.argv[:2] == ["--seq-length", "8"]
    assert "--profile-ranks 0 1" in out.overridden
    start = out.harness.index("--profile-step-start")
    assert out.harness[start : start + 4] == [
        "--profile-step-start",
        str(total - 1),
        "--profile-step-end",
        str(total),
    ]
    assert out.harness[-5:] == ["--profile-ranks", "0", "1", "2", "3"]
    assert out.profile_trace == str(WORK / "torch_profile")


def test_torchtitan_overrides_replace_both_spellings_of_a_switch() -> None:
    recipe = ["--training.steps", "1000", "--checkpoint.enable", "activation-checkpoint:full"]
    recipe += ["--metrics.log_freq=10", "--training.local_batch_size", "2"]
    out = torchtitan_overrides(recipe, steps=12, workdir=WORK, profile=False)
    assert out.argv[:3] == ["activation-checkpoint:full", "--training.local_batch_size", "2"]
    assert out.harness == [
        "--training.steps",
        "12",
        "--metrics.log_freq",
        "1",
        "--checkpoint.no-enable",
        "--validator.no-enable",
        "--dump_folder",
        str(WORK / "outputs"),
        "--profiler.no-enable-profiling",  # the registered configs turn it on
    ]
    assert out.overridden == [
        "--training.steps 1000",
        "--checkpoint.enable",
        "--metrics.log_freq=10",
    ]


def test_torchtitan_profiling_names_the_iteration_folder() -> None:
    out = torchtitan_overrides([], steps=12, workdir=WORK, profile=True)
    total = 12 + PROFILE_EXTRA_STEPS
    assert "--profiler.enable-profiling" in out.harness
    assert "--profiler.no-enable-profiling" not in out.harness
    assert out.profile_trace == str(
        WORK / "outputs" / "profiling" / "traces" / f"iteration_{total}"
    )
