"""The supervisor reports a silent launch as hung even when the runner's hang timeout is longer
than the run's wall-clock limit (900 s against 600 s by default): it is cut to half the limit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runners.supervise import EXIT_FILE, hang_limit
from tests.conftest import ROOT


def test_a_hang_limit_past_the_run_limit_is_cut_to_half_of_it() -> None:
    assert hang_limit(600.0, 900.0) == 300.0
    assert hang_limit(600.0, 600.0) == 300.0
    assert hang_limit(600.0, 120.0) == 120.0
    assert hang_limit(600.0, None) is None


def test_a_silent_launch_is_hung_not_timed_out(tmp_path: Path) -> None:
    """One line, then silence: killed as hung after 2 s (half the 4 s limit), not at 4 s."""
    quiet = "import time; print('step 1', flush=True); time.sleep(60)"
    command = [sys.executable, "-m", "runners.supervise", "--workdir", str(tmp_path)]
    command += ["--timeout", "4", "--hang-timeout", "900", "--", sys.executable, "-c", quiet]
    subprocess.run(command, cwd=ROOT, check=True, timeout=30)
    record = json.loads((tmp_path / EXIT_FILE).read_text())
    assert record["hung"] is True and record["timed_out"] is False
    assert (tmp_path / "stdout.jsonl").read_text() == "step 1\n"


def test_the_runner_defaults_let_a_hang_and_te_libraries_through() -> None:
    """The default hang timeout is below the default 600 s run limit, and a launch inherits
    LD_LIBRARY_PATH and CUDA_HOME (Transformer Engine finds cuDNN and nvcc by them on
    installs outside the standard paths)."""
    from runners.bench import run_bench
    from runners.runner_settings import BASE_ENV, RunnerSettings

    limit = run_bench.__kwdefaults__["timeout_s"]  # type: ignore[index]
    assert RunnerSettings().hang_timeout_s < limit == 600.0
    assert {"LD_LIBRARY_PATH", "CUDA_HOME"} <= set(BASE_ENV)


def test_a_launch_finds_the_training_venvs_tools_first() -> None:
    """``python3`` and ``python3-config`` in Megatron's helpers Makefile are the training
    venv's: its bin leads the launch's PATH."""
    from runners.adapter import LaunchSpec
    from runners.launch_env import launch_environment

    runner = {"PATH": "/usr/bin:/venv/bin", "ATTUNE_TRAIN_PYTHON": "/venv/bin/python"}
    env = launch_environment(LaunchSpec(argv=["x"], devices=1), runner)
    assert env["PATH"] == "/venv/bin:/usr/bin"
