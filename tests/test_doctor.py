"""``attune doctor`` on this CPU machine: it runs, and fails exactly the checks a GPU answers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from runners.torchtitan.offline import ASSETS_VAR, DATASET_VAR
from tests.conftest import ROOT

GPU_CHECKS = {"torch CUDA build", "GPUs", "device memory", "NCCL"}


@pytest.fixture(autouse=True)
def _this_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTUNE_TRAIN_PYTHON", sys.executable)
    monkeypatch.delenv("ATTUNE_MEGATRON_PATH", raising=False)


def _checks(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, dict[str, dict[str, Any]]]:
    code = main(["doctor", *argv, "--json"])
    payload = json.loads(capsys.readouterr().out)
    return code, {c["name"]: c for c in payload["checks"]}


def test_on_a_cpu_machine_exactly_the_gpu_checks_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torchtitan with its local tokenizer and dataset named: everything but the GPU is there
    (attune's own interpreter has torchtitan and a CPU torch)."""
    (tmp_path / "tokenizer").mkdir()
    (tmp_path / "tokenizer" / "tokenizer.json").write_text("{}")
    (tmp_path / "c4").mkdir()
    monkeypatch.setenv(ASSETS_VAR, str(tmp_path / "tokenizer"))
    monkeypatch.setenv(DATASET_VAR, str(tmp_path / "c4"))
    code, checks = _checks(capsys, str(ROOT / "examples/torchtitan/llama3-8b.yaml"))
    assert code == 1
    assert {name for name, c in checks.items() if not c["ok"]} == GPU_CHECKS, checks
    assert "is a CPU build" in checks["torch CUDA build"]["detail"]
    assert checks["GPUs"]["detail"].startswith("0 visible, the recipe needs 8")


def test_megatron_says_what_the_training_environment_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, checks = _checks(capsys, str(ROOT / "examples/megatron/llama3-8b.yaml"))
    assert code == 1
    failed = {name for name, c in checks.items() if not c["ok"]}
    assert failed >= GPU_CHECKS | {"GPU architecture", "Transformer Engine", "Megatron-LM"}
    assert "gpu_arch sm90" in checks["GPU architecture"]["detail"]
    assert "2.14.0" in checks["Transformer Engine"]["detail"]
    if sys.version_info < (3, 12):
        assert "needs >= 3.12" in checks["interpreter"]["detail"]


def test_plain_lines_one_per_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(ROOT / "examples/torchtitan/llama3-8b.yaml")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("FAIL GPUs: 0 visible") for line in lines)
    assert any(line.startswith("ok   torch: ") for line in lines)
