"""Launching Megatron-LM and torchtitan: torchrun over the recipe's shape, the framework's
entry point from the runner's settings, the recipe's arguments and the harness's, and an
environment that holds only what the recipe and the runner name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.recipe import load_recipe
from runners.adapter import LaunchSpec
from runners.launch_env import launch_environment
from runners.local import LocalBackend
from runners.megatron.adapter import MegatronAdapter
from runners.run_outcome import classify
from runners.runner_settings import BASE_ENV, RunnerSettings
from runners.torchtitan.adapter import TorchtitanAdapter
from tests.conftest import ROOT

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

SECRETS = {"GITHUB_TOKEN": "ghs_secret", "ANTHROPIC_API_KEY": "sk-secret", "ATTUNE_X": "1"}


@pytest.fixture
def megatron_checkout(tmp_path: Path) -> Path:
    (tmp_path / "Megatron-LM").mkdir()
    (tmp_path / "Megatron-LM" / "pretrain_gpt.py").write_text("# stand-in checkout\n")
    return tmp_path / "Megatron-LM"


@pytest.mark.slow
def test_megatron_launch(
    megatron_checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    recipe = load_recipe(ROOT / "examples/megatron/llama3-8b.yaml")
    adapter = MegatronAdapter()
    effective = adapter.resolve(recipe)
    settings = RunnerSettings(
        python="/opt/py/bin/python",  # not a path: never run here
        megatron_path=megatron_checkout,
        pass_env=["NCCL_SOCKET_IFNAME"],
    )
    spec = adapter.launch(
        recipe, effective, steps=10, workdir=tmp_path / "t", profile=False, settings=settings
    )
    script = str(megatron_checkout / "pretrain_gpt.py")
    assert spec.argv[:7] == [
        "/opt/py/bin/python",
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc-per-node=8",
        "--standalone",
        script,
    ]
    assert spec.argv[-len(spec.harness) :] == spec.harness
    assert spec.harness[:2] == ["--train-samples", str(10 * 128)]  # the recipe is sample-based
    assert "--train-samples 1953125000" in spec.overridden
    assert spec.devices == 8 and spec.nodes == 1 and spec.framework == "megatron"
    assert spec.metrics_context == {"seq_length": 8192}
    assert spec.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}  # the recipe's env, nothing else
    env = launch_environment(spec)  # what a backend starts it with
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"  # named by the runner
    assert not set(SECRETS) & set(env)


def test_megatron_without_a_checkout_says_what_the_runner_needs(tmp_path: Path) -> None:
    adapter = MegatronAdapter()
    recipe = load_recipe(ROOT / "examples/megatron/llama3-8b.yaml")
    with pytest.raises(AttuneError, match="ATTUNE_MEGATRON_PATH on the runner"):
        # no effective config: entry refuses on the settings before it would read one
        adapter.entry(adapter._body(recipe), None, RunnerSettings())  # type: ignore[arg-type]


@pytest.mark.slow
def test_torchtitan_launch_and_multi_node_rendezvous(tmp_path: Path) -> None:
    adapter = TorchtitanAdapter()
    settings = RunnerSettings(python="py", rdzv_endpoint="node-0:29400")
    single = load_recipe(ROOT / "examples/torchtitan/llama3-8b.yaml")
    spec = adapter.launch(
        single, adapter.resolve(single), steps=8, workdir=tmp_path, profile=True, settings=settings
    )
    entry = spec.argv.index("-m", 3)
    assert spec.argv[entry : entry + 6] == [
        "-m",
        "torchtitan.train",
        "--module",
        "torchtitan.models.llama3",  # only torchtitan's models package is imported
        "--config",
        "llama3_8b",
    ]
    assert spec.metrics_context == {"tokens_per_step": 16 * 8192, "devices": 8}
    assert spec.profile_trace is not None and spec.profile_trace.endswith("iteration_12")
    multi = load_recipe(ROOT / "examples/torchtitan/llama3-70b.yaml")
    spec = adapter.launch(
        multi, adapter.resolve(multi), steps=8, workdir=tmp_path, profile=False, settings=settings
    )
    assert spec.nodes == 8 and spec.devices == 64
    assert spec.argv[3:7] == [
        "--nnodes=8",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=node-0:29400",
    ]
    with pytest.raises(AttuneError, match="spans 8 nodes; the local backend runs one machine"):
        LocalBackend().start(spec, workdir=tmp_path / "run", timeout_s=10)


def test_a_clean_launch_sees_only_its_own_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    probe = "import json, os; print(json.dumps(dict(os.environ)))"
    spec = LaunchSpec(
        argv=[sys.executable, "-c", probe],
        env={"OMP_NUM_THREADS": "3"},
        framework="embedded",
        devices=1,
    )
    backend = LocalBackend()
    outcome = backend.wait(backend.start(spec, workdir=tmp_path, timeout_s=60))
    seen = json.loads(Path(outcome.stdout_path).read_text())
    assert set(seen) <= {"OMP_NUM_THREADS", "PYTHONPATH", "LC_CTYPE", *BASE_ENV}
    assert seen["OMP_NUM_THREADS"] == "3"


def test_a_launch_that_stops_printing_is_killed_as_hung(tmp_path: Path) -> None:
    script = "import time; print('step 1', flush=True); time.sleep(60)"
    spec = LaunchSpec(argv=[sys.executable, "-c", script], devices=1, hang_timeout_s=1.5)
    backend = LocalBackend()
    outcome = backend.wait(backend.start(spec, workdir=tmp_path, timeout_s=120))
    assert outcome.hung and not outcome.timed_out
    assert outcome.released_at - outcome.allocated_at < 30
    status, error = classify(outcome, steps_logged=1, steps_wanted=5, nonfinite=False)
    assert status == "hang" and error is not None and "after 1 steps" in error


def test_runner_settings_come_from_the_runner_environment() -> None:
    settings = RunnerSettings.from_env(
        {
            "ATTUNE_TRAIN_PYTHON": "/venv/bin/python",  # not a path: a setting's value
            "ATTUNE_LAUNCHER": "srun --kill-on-bad-exit torchrun",
            "ATTUNE_LAUNCH_PASS_ENV": "NCCL_IB_HCA, NCCL_DEBUG",
            "ATTUNE_HANG_TIMEOUT_S": "300",
        }
    )
    assert settings.python == "/venv/bin/python"
    assert settings.torchrun(nodes=1, gpus_per_node=4)[:3] == [
        "srun",
        "--kill-on-bad-exit",
        "torchrun",
    ]
    assert settings.pass_env == ["NCCL_IB_HCA", "NCCL_DEBUG"] and settings.hang_timeout_s == 300
    with pytest.raises(AttuneError, match="ATTUNE_HANG_TIMEOUT_S must be seconds"):
        RunnerSettings.from_env({"ATTUNE_HANG_TIMEOUT_S": "soon"})
