"""``attune train-env``: the GPU training environment the bench action prepares, pinned by the
training repository's workflow and cached on the runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.commands.train_env import READY, TrainEnvRequest, cache_key, plan

ROOT = Path(__file__).resolve().parent.parent
MEGATRON = str(ROOT / "examples/megatron/llama3-8b.yaml")
TITAN = str(ROOT / "examples/torchtitan/llama3-8b.yaml")
PINNED = ["--torch", "2.9.0", "--cuda", "cu128", "--megatron", "core_v0.19.0"]


@pytest.fixture(autouse=True)
def _runner_without_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTUNE_TRAIN_PYTHON", raising=False)


def test_an_embedded_recipe_needs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "github_env"
    args = ["train-env", str(ROOT / "examples/ported-gpt.yaml"), "--cache", str(tmp_path)]
    assert main([*args, "--github-env", str(out)]) == 0
    assert "nothing to prepare" in capsys.readouterr().out
    assert not out.exists() and not (tmp_path / "attune-train").exists()


def test_a_cached_environment_is_reused_and_handed_on(tmp_path: Path) -> None:
    request = TrainEnvRequest(torch="2.9.0", cuda="cu128", megatron="core_v0.19.0")
    folder = tmp_path / "attune-train" / cache_key("megatron", request)
    folder.mkdir(parents=True)
    (folder / READY).write_text("")  # built by an earlier job on this runner
    out = tmp_path / "github_env"
    assert (
        main(["train-env", MEGATRON, *PINNED, "--cache", str(tmp_path), "--github-env", str(out)])
        == 0
    )
    assert out.read_text().splitlines() == [
        f"ATTUNE_TRAIN_PYTHON={folder / 'venv' / 'bin' / 'python'}",
        f"ATTUNE_MEGATRON_PATH={folder / 'Megatron-LM'}",
    ]


def test_a_runner_that_provides_its_own_environment_builds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTUNE_TRAIN_PYTHON", sys.executable)
    assert main(["train-env", TITAN, "--cache", str(tmp_path)]) == 0
    assert not (tmp_path / "attune-train").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "torch: a version such as 2.9.0, got ''"),
        (["--torch", "2.9.0; rm -rf /", "--cuda", "cu128"], "torch: a version"),
        (["--torch", "2.9.0", "--cuda", "12.8"], "cuda: a CUDA wheel tag such as cu128"),
        (["--torch", "2.9.0", "--cuda", "cu128", "--torchtitan", "main"], "torchtitan: a version"),
    ],
)
def test_an_unpinned_environment_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["train-env", TITAN, *args, "--cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "ATTUNE_TRAIN_PYTHON on the runner" in err
    assert not (tmp_path / "attune-train").exists()


def test_the_build_plan_pins_every_piece(tmp_path: Path) -> None:
    request = TrainEnvRequest(
        torch="2.9.0", cuda="cu128", megatron="core_v0.19.0", transformer_engine="2.8.0"
    )
    steps = plan("megatron", request, tmp_path)
    assert steps[0][1:] == ["-m", "venv", str(tmp_path / "venv")]
    assert steps[1][-3:] == [
        "torch==2.9.0",
        "--index-url",
        "https://download.pytorch.org/whl/cu128",
    ]
    assert steps[2][-4:] == [
        "--branch",
        "core_v0.19.0",
        "https://github.com/NVIDIA/Megatron-LM",
        str(tmp_path / "Megatron-LM"),
    ]
    assert steps[3][-1] == str(tmp_path / "Megatron-LM")
    assert steps[4][-1] == "transformer_engine[pytorch]==2.8.0"
    titan = plan(
        "torchtitan", TrainEnvRequest(torch="2.9.0", cuda="cu128", torchtitan="0.3.0"), tmp_path
    )
    assert titan[-1][-1] == "torchtitan==0.3.0"
