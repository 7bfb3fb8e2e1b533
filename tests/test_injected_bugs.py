"""The injected-bug suite: which post-launch check catches each silent training bug.

Real training steps of the embedded workload (``tests/injected_bugs.py``, one process for all
runs), the reference calibrated the way a campaign calibrates it (baseline repeats plus its
layout-only variants), and ``postlaunch.check`` on each bug's run. The table in
``docs/postlaunch-checks.md`` is these assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gate import postlaunch, prelaunch
from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe, StepRecord, TrialResult
from gate.postlaunch import Check, PostLaunchReport
from gate.postlaunch_reference import LOSS_BAND_FLOOR, PostLaunchReference, calibrate
from gate.registry import Registry
from runners.embedded.config import validate_and_derive
from runners.local import PROJECT_ROOT
from tests.injected_bugs import CONFIG

pytestmark = pytest.mark.slow  # trains a checkpoint once, then real runs

Runs = dict[str, Any]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    out = tmp_path_factory.mktemp("bugs") / "runs.json"
    env = {k: v for k, v in os.environ.items() if k != "ATTUNE_FAULT"}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.injected_bugs", str(out)],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded: Runs = json.loads(out.read_text())
    return loaded


def _steps(raw: list[dict[str, Any]]) -> list[StepRecord]:
    return [StepRecord.model_validate(s) for s in raw]


def _reference(setting: Runs) -> PostLaunchReference:
    return calibrate(
        [(trial, _steps(raw)) for trial, raw in setting["baseline"].items()],
        [(desc, _steps(raw)) for desc, raw in setting["variants"].items()],
        variants=list(setting["variants"]),
    )


def _check(setting: Runs, bug: str) -> PostLaunchReport:
    steps = _steps(setting["bugs"][bug])
    result = TrialResult(
        recipe=bug,
        fingerprint="-",
        status="ok",
        steps=steps,
        warmup=1,
        score=1.0,
        step1_loss=postlaunch.first_loss(steps),
        allocated_at=0.0,
        released_at=1.0,
        devices=1,
    )
    return postlaunch.check(result, _reference(setting))


def test_the_checkpoint_was_trained(runs: Runs) -> None:
    first, last = runs["pretrain_losses"]
    assert last < 0.6 * first  # fine-tuning starts from a model that has learnt the chain


def test_layout_variants_are_allowed_by_the_gate_and_train_the_same_thing(
    runs: Runs,
    small_recipe: Callable[..., Recipe],
    resolve: Callable[[Recipe], EffectiveConfig],
    registry: Registry,
    tmp_path: Path,
) -> None:
    setting = runs["fine_tune"]
    assert list(setting["variants"]) == [
        "micro_batch_size 2 -> 4 (accumulation 4 -> 2)",
        "data_parallel_size 1 -> 2",
    ]
    base = resolve(small_recipe(tmp_path, "base", **CONFIG))
    for name, changes in (
        ("mbs", {"micro_batch_size": 4}),
        ("ranks", {"data_parallel_size": 2}),
    ):
        variant = resolve(small_recipe(tmp_path, name, **{**CONFIG, **changes}))
        assert prelaunch.judge(base, variant, registry).verdict == "allow"
    reference = _reference(setting)
    # fp32 on the CPU: a new summation order moves the first losses by ~1e-7, so the floors
    # set the tolerances
    assert reference.loss_band == [LOSS_BAND_FLOOR] * reference.k
    assert reference.k == 8 and len(reference.runs) == 4
    for raw in setting["variants"].values():
        for step, base_loss in zip(_steps(raw), reference.losses, strict=True):
            assert step.loss == pytest.approx(base_loss, rel=1e-5)


FINE_TUNE_CAUGHT: dict[str, list[Check]] = {
    # the forward pass sees wrong weights and wrong targets at step 1: all three checks
    "misload_layers": ["step1_loss", "step1_grad_norm", "loss_trajectory"],
    "misshard_mlp": ["step1_loss", "step1_grad_norm", "loss_trajectory"],
    "shift_labels": ["step1_loss", "step1_grad_norm", "loss_trajectory"],
    # the step-1 loss is all-reduced before any update: only the gradient norm sees it at
    # step 1, the trajectory from step 2 (each update used half the gradient)
    "drop_grad_reduce": ["step1_grad_norm", "loss_trajectory"],
    # step 1's loss and gradients are computed before the optimizer runs: only the losses
    # after an update can see which parameters it skipped
    "optimizer_subset": ["loss_trajectory"],
    # 2% noisy targets raise the step-1 loss by 4%: under the 5% rule, far outside the band
    "label_noise": ["loss_trajectory"],
}


@pytest.mark.parametrize("bug", list(FINE_TUNE_CAUGHT))
def test_fine_tuning_each_bug_is_caught_by(runs: Runs, bug: str) -> None:
    report = _check(runs["fine_tune"], bug)
    assert report.failed == FINE_TUNE_CAUGHT[bug], report.reasons
    assert report.trajectory_worst is not None and report.trajectory_worst > 3


def test_fine_tuning_margins(runs: Runs) -> None:
    """The catches are not near their tolerances (the table quotes these numbers)."""
    setting = runs["fine_tune"]
    drop = _check(setting, "drop_grad_reduce")
    assert drop.relative_loss_delta == 0.0
    assert drop.grad_norm_delta is not None and drop.grad_norm_delta > 0.2
    noise = _check(setting, "label_noise")
    assert noise.relative_loss_delta is not None and 0.02 < noise.relative_loss_delta < 0.05
    subset = _check(setting, "optimizer_subset")
    assert subset.relative_loss_delta == 0.0 and subset.grad_norm_delta == 0.0


def test_from_random_init_the_step1_loss_sees_none_of_them(runs: Runs) -> None:
    """Every output distribution is near uniform before training, whatever the weights'
    layout or the targets: the step-1 loss moves by under 0.2% for every bug."""
    setting = runs["scratch"]
    assert "misload_layers" not in setting["bugs"]  # nothing to load
    for bug in setting["bugs"]:
        report = _check(setting, bug)
        assert report.relative_loss_delta is not None and report.relative_loss_delta < 0.002
        assert "step1_loss" not in report.failed


def test_from_random_init_what_is_caught_and_what_is_not(runs: Runs) -> None:
    setting = runs["scratch"]
    # the gradient norm sees a dropped reduction (-30%) and shifted labels (+6.6%)
    for bug in ("drop_grad_reduce", "shift_labels"):
        report = _check(setting, bug)
        assert report.failed == ["step1_grad_norm", "loss_trajectory"], (bug, report.reasons)
    # borderline: within 2x of the 0.2% floor over 8 steps. Mis-sharded weights and 2% label
    # noise leave the band; an optimizer that skips the biases and LayerNorms stays inside it
    # (worst 0.93x): NOT caught from random init in 8 steps, the updates of the skipped
    # parameters are too small to show yet.
    for bug, caught in (("misshard_mlp", True), ("label_noise", True), ("optimizer_subset", False)):
        report = _check(setting, bug)
        assert report.trajectory_worst is not None and 0.5 < report.trajectory_worst < 2.5
        assert report.failed == (["loss_trajectory"] if caught else []), (bug, report.reasons)


def test_a_recipe_cannot_switch_a_test_hook_on(
    small_recipe: Callable[..., Recipe],
    resolve: Callable[[Recipe], EffectiveConfig],
    tmp_path: Path,
) -> None:
    hook = {"ATTUNE_FAULT": "optimizer_subset"}
    never = (
        r"env\.ATTUNE_FAULT is never allowed in a recipe \(attune's own settings and test hooks\)"
    )
    with pytest.raises(AttuneError, match=never):  # refused when the recipe is read
        small_recipe(tmp_path, "sneaky", env=hook)
    unparsed = Recipe(framework="embedded", name="sneaky", path="sneaky.yaml", body={"env": hook})
    with pytest.raises(AttuneError, match=never):  # and by the adapter, whatever made the recipe
        resolve(unparsed)
    with pytest.raises(ValueError, match=r"env\.ATTUNE_FAULT: a test hook of the workload"):
        validate_and_derive({}, hook)  # and by the workload's own validation
