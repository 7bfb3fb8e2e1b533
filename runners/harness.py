"""The benchmark harness's own command-line arguments for Megatron-LM and torchtitan.

A benchmark runs a recipe for a fixed number of steps, logs every step, evaluates nothing,
saves no checkpoint and reports memory; when profiling, a few more steps run under the
PyTorch profiler after the scored ones. These harness arguments are the same for the baseline
and every candidate, are recorded with each launch, and are appended to the recipe's own
arguments. The gate judges the recipe without them.

A recipe may carry some of them itself (published launch scripts set ``--train-iters``,
``--eval-interval``, ``--save-interval``...). They are taken out and replaced, and each one
is reported back as overridden, so the person reading the pull request sees what changed.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from runners.cli_edit import take_out

PROFILE_EXTRA_STEPS = 4
"""Steps run after the scored ones when profiling: warm-up of the profiler, then one profiled
step. They are never scored (the parser's records past ``steps`` are dropped)."""

MEGATRON_HARNESS_FLAGS: dict[str, int] = {
    "--train-iters": 1,
    "--train-samples": 1,
    "--exit-interval": 1,
    "--exit-duration-in-mins": 1,
    "--log-interval": 1,
    "--log-throughput": 0,
    "--eval-iters": 1,
    "--eval-interval": 1,
    "--skip-train": 0,
    "--save": 1,
    "--save-interval": 1,
    "--load": 1,
    "--tensorboard-dir": 1,
    "--profile": 0,
    "--use-pytorch-profiler": 0,
    "--profile-step-start": 1,
    "--profile-step-end": 1,
    "--profile-ranks": -1,
}
"""Megatron options the harness sets or removes, with how many values follow each (-1: every
token up to the next option). Their meaning: megatron/training/arguments.py (core_v0.19.0) and
megatron/training/config/{training,logger,common}_config.py. ``--save`` and ``--load`` are
removed and not replaced: a benchmark starts from the recipe's initialisation, never from a
checkpoint that another trial (or a production run) left in the folder."""

TORCHTITAN_HARNESS_KEYS = (
    "--training.steps",
    "--metrics.log_freq",
    "--checkpoint.enable",
    "--checkpoint.no-enable",
    "--checkpoint.no_enable",
    "--validator.enable",
    "--validator.no-enable",
    "--validator.no_enable",
    "--dump_folder",
    "--profiler.enable_profiling",
    "--profiler.enable-profiling",
    "--profiler.no-enable-profiling",
    "--profiler.no_enable_profiling",
    "--profiler.profile_freq",
    "--profiler.profiler_warmup",
    "--profiler.profiler_active",
)
"""torchtitan 0.3.0 keys the harness sets (tyro accepts both spellings of a boolean flag):
torchtitan/config/configs.py (training.steps), components/metrics.py:279 (log_freq),
components/checkpointer/base.py (enable), components/validate.py:35 (validator),
trainer.py:86 (dump_folder), tools/profiler.py:126-160 (profiling)."""


class HarnessArgs(BaseModel):
    """A recipe's arguments with the harness's in place."""

    argv: list[str]
    """The recipe's tokens without the harness's options, then the harness's."""
    harness: list[str]
    """The harness's tokens alone: what every launch of the campaign adds."""
    overridden: list[str]
    """The recipe's own tokens the harness replaced (``--train-iters 500000``...)."""
    profile_trace: str | None = None
    """Where the profiler writes the traces: a file, or a folder of one trace per rank."""


def megatron_args(
    args: list[str],
    *,
    steps: int,
    global_batch_size: int,
    devices: int,
    workdir: Path,
    profile: bool,
) -> HarnessArgs:
    """Megatron-LM's ``pretrain_gpt.py`` arguments for a benchmark of ``steps`` iterations.

    A sample-based recipe (``--train-samples``) stays sample-based: its learning-rate schedule
    is in samples and Megatron refuses iteration-based training beside it
    (megatron/training/arguments.py:1236-1262 at core_v0.19.0).
    """
    kept, overridden, _at = take_out(args, MEGATRON_HARNESS_FLAGS)
    total = steps + (PROFILE_EXTRA_STEPS if profile else 0)
    sample_based = any(t.split("=", 1)[0] == "--train-samples" for t in args)
    length = ["--train-samples", str(total * global_batch_size)] if sample_based else []
    harness = length or ["--train-iters", str(total)]
    harness += ["--log-interval", "1", "--log-throughput", "--eval-iters", "0"]
    harness += ["--eval-interval", str(total + 1), "--tensorboard-dir", str(workdir / "tb")]
    trace = None
    if profile:
        harness += ["--profile", "--use-pytorch-profiler"]
        harness += ["--profile-step-start", str(total - 1), "--profile-step-end", str(total)]
        harness += ["--profile-ranks", *(str(r) for r in range(devices))]
        # the trace handler writes {tensorboard_dir}/../torch_profile/rank-<r>.json.gz
        # (megatron/training/training.py:3676-3678 at core_v0.19.0)
        trace = str(workdir / "torch_profile")
    return HarnessArgs(
        argv=kept + harness, harness=harness, overridden=overridden, profile_trace=trace
    )


def torchtitan_overrides(
    overrides: list[str], *, steps: int, workdir: Path, profile: bool
) -> HarnessArgs:
    """torchtitan's command-line overrides for a benchmark of ``steps`` steps."""
    arity = {key: 0 if _is_switch(key) else 1 for key in TORCHTITAN_HARNESS_KEYS}
    kept, overridden, _at = take_out(overrides, arity)
    total = steps + (PROFILE_EXTRA_STEPS if profile else 0)
    dump = workdir / "outputs"
    harness = ["--training.steps", str(total), "--metrics.log_freq", "1"]
    harness += ["--checkpoint.no-enable", "--validator.no-enable", "--dump_folder", str(dump)]
    trace = None
    if profile:
        harness += ["--profiler.enable-profiling", "--profiler.profile_freq", str(total)]
        harness += ["--profiler.profiler_warmup", "3", "--profiler.profiler_active", "1"]
        # traces: {dump_folder}/profiling/traces/iteration_<N>/rank<r>_trace.json.gz
        # (torchtitan/tools/profiler.py:24-26 at 0.3.0)
        trace = str(dump / "profiling" / "traces" / f"iteration_{total}")
    else:
        # torchtitan 0.3.0's registered configs turn the profiler on (models/llama3/
        # config_registry.py:193-194): a run that is not profiled says so explicitly.
        harness += ["--profiler.no-enable-profiling"]
    return HarnessArgs(
        argv=kept + harness, harness=harness, overridden=overridden, profile_trace=trace
    )


def _is_switch(key: str) -> bool:
    """tyro's boolean flags take no value (``--checkpoint.no-enable``)."""
    return key.endswith(("enable", "enable_profiling", "enable-profiling"))
