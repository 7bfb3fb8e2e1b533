"""``attune doctor`` runs before a Megatron-LM or torchtitan recipe is launched on the local
backend: on this CPU machine ``attune tune`` and ``attune bench`` stop with exit 2 and the
doctor's words, with nothing launched and nothing in a ledger."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.commands.preflight import SKIP_VAR, doctor_applies
from gate.recipe import load_recipe
from tests.conftest import ROOT

MEGATRON = ROOT / "examples" / "megatron" / "llama3-8b.yaml"
TITAN = ROOT / "examples" / "torchtitan" / "llama3-8b.yaml"


@pytest.fixture(autouse=True)
def _cpu_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTUNE_TRAIN_PYTHON", sys.executable)  # a CPU torch, no GPU
    monkeypatch.delenv("ATTUNE_MEGATRON_PATH", raising=False)
    monkeypatch.delenv(SKIP_VAR, raising=False)


@pytest.mark.slow  # a cold resolve of the recipe by the framework's own parser first
@pytest.mark.parametrize("recipe", [MEGATRON, TITAN], ids=["megatron", "torchtitan"])
def test_tune_stops_before_the_first_launch_with_the_doctors_words(
    tmp_path: Path, recipe: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "campaign"
    args = ["tune", str(recipe), "--budget", "1", "--workdir", str(work)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert (
        f"attune: error: attune doctor: this machine cannot run {load_recipe(recipe).name}" in err
    )
    assert "GPUs: 0 visible, the recipe needs 8" in err
    assert "Nothing was launched or charged" in err
    assert not work.exists()  # no work directory, so no ledger and no charge


@pytest.mark.frameworks  # the refusal names the resolved config, as the bot dispatched it
def test_bench_writes_the_refusal_the_bot_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "result.json"
    args = ["bench", str(TITAN), "--out", str(out), "--workdir", str(tmp_path / "run")]
    assert main([*args, "--trial", "c1", "--sha", "ab" * 20]) == 2
    assert "attune doctor: this machine cannot run" in capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["status"] == "failed" and result["error"].startswith("attune doctor:")
    assert "torch CUDA build" in result["error"]
    assert result["allocated_at"] == result["released_at"]  # no time held: no charge
    assert (result["trial"], result["sha"], result["devices"]) == ("c1", "ab" * 20, 8)
    assert result["fingerprint"]  # the config the bot dispatched, so it adopts the result
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").rglob("*.log"))


def test_where_the_doctor_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    titan, embedded = load_recipe(TITAN), load_recipe(ROOT / "examples" / "ported-gpt.yaml")
    assert doctor_applies(titan, "local")
    assert not doctor_applies(titan, "sim") and not doctor_applies(titan, "slurm")
    assert not doctor_applies(embedded, "local")
    monkeypatch.setenv(SKIP_VAR, "1")  # the launcher starts the ranks elsewhere
    assert not doctor_applies(titan, "local")
