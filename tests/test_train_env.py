"""``attune train-env``: the GPU training environment the bench action prepares, pinned by the
training repository's workflow and cached on the runner."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.commands.train_env import (
    CONSTRAINTS,
    LINK_CONFIG,
    READY,
    TrainEnvRequest,
    cache_key,
    plan,
    te_version,
)
from bot.commands.train_interpreter import (
    INTERPRETER_VAR,
    interpreter_version,
    training_interpreter,
)
from gate.errors import AttuneError
from runners.megatron.model_checks import ASSUMED_TE
from runners.megatron.pins import TRANSFORMER_ENGINE
from runners.versions import PINS
from tests.conftest import ROOT

MEGATRON = str(ROOT / "examples/megatron/llama3-8b.yaml")
TITAN = str(ROOT / "examples/torchtitan/llama3-8b.yaml")
PINNED_TAG = "core_v0.19.0"
"""A tag runners/megatron/pins.py pins to its commit (the version set's is pinned by content)."""
PINNED = ["--torch", PINS.torch, "--cuda", PINS.cuda, "--megatron", PINNED_TAG]


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


@pytest.mark.parametrize(
    ("tag", "pin"),
    [
        (PINNED_TAG, "core_v0.19.0-5be9626709af"),
        (PINS.megatron_tag, "core_v0.19.2-tree40056dd05737"),
    ],
)
def test_a_cached_environment_is_reused_and_handed_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tag: str, pin: str
) -> None:
    """By commit or, the version set's tag (what attune init writes), by content."""
    python = training_interpreter("megatron")  # this machine's Python >= 3.12 (see below)
    monkeypatch.setenv(INTERPRETER_VAR, python)
    request = TrainEnvRequest(
        torch=PINS.torch,
        cuda=PINS.cuda,
        megatron=tag,
        transformer_engine=TRANSFORMER_ENGINE,
    )
    key = cache_key("megatron", request, interpreter_version(python))
    assert key.startswith(f"megatron-{pin}")  # what the checkout was verified against
    folder = tmp_path / "attune-train" / key
    folder.mkdir(parents=True)
    (folder / READY).write_text("")  # built by an earlier job on this runner
    out = tmp_path / "github_env"
    args = ["--torch", PINS.torch, "--cuda", PINS.cuda, "--megatron", tag]
    assert (
        main(["train-env", MEGATRON, *args, "--cache", str(tmp_path), "--github-env", str(out)])
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
        ([], f"torch: a version such as {PINS.torch}, got ''"),
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
        torch="2.11.0", cuda="cu128", megatron="core_v0.19.2", transformer_engine="2.8.0"
    )
    steps = plan("megatron", request, tmp_path)
    constraint = ["--constraint", str(tmp_path / CONSTRAINTS)]
    assert steps[0][1:] == ["-m", "venv", str(tmp_path / "venv")]
    assert steps[1][-3:] == [
        "torch==2.11.0",
        "--index-url",
        "https://download.pytorch.org/whl/cu128",
    ]
    # Megatron-LM's checkout is fetched and verified before these (test_megatron_pin.py)
    assert not [step for step in steps if "git" in step[0]]
    assert steps[2][-4:] == [*constraint, str(tmp_path / "Megatron-LM"), "pybind11"]
    assert steps[3][-1] == "transformer_engine[pytorch]==2.8.0"
    assert steps[3][-4:-2] == constraint
    # the venv gets its interpreter's python3-config, then the dataset helpers are built
    assert steps[4][-3:] == ["-c", LINK_CONFIG, str(tmp_path / "venv" / "bin")]
    assert steps[5] == ["make", "-C", str(tmp_path / "Megatron-LM" / "megatron/core/datasets")]
    titan = plan(
        "torchtitan", TrainEnvRequest(torch="2.11.0", cuda="cu128", torchtitan="0.3.0"), tmp_path
    )
    assert titan[-1][-3:] == [*constraint, "torchtitan==0.3.0"]


def test_the_framework_cannot_replace_the_pinned_torch(tmp_path: Path) -> None:
    """pip itself, offline, against a local index: a package that needs a newer torch than the
    constraint allows fails the install instead of upgrading torch. Two tiny wheels stand in
    for torch and a framework; no torch is downloaded."""
    import subprocess
    import zipfile

    wheels = tmp_path / "wheels"
    wheels.mkdir()

    def wheel(name: str, version: str, requires: list[str]) -> None:
        info = f"{name}-{version}.dist-info"
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
        path = wheels / f"{name}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(path, "w") as whl:
            whl.writestr(f"{name}/__init__.py", "")
            whl.writestr(f"{info}/METADATA", meta)
            whl.writestr(
                f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            whl.writestr(f"{info}/RECORD", "")

    wheel("torch", "2.9.0", [])
    wheel("torch", "2.11.0", [])
    wheel("framework", "1.0", ["torch>=2.11"])
    (tmp_path / CONSTRAINTS).write_text("torch==2.9.0\n")
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet"]
    pip += ["--disable-pip-version-check", "--find-links", str(wheels)]
    pip += ["--target", str(tmp_path / "site"), "--ignore-installed"]
    constrained = [*pip, "--constraint", str(tmp_path / CONSTRAINTS), "framework==1.0"]
    refused = subprocess.run(constrained, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "conflicting dependencies" in refused.stderr
    free = subprocess.run([*pip, "framework==1.0"], capture_output=True, text=True, timeout=120)
    assert free.returncode == 0, free.stderr  # without it, pip would take torch 2.11.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [TITAN, "--torch", "2.9.0", "--torchtitan", "0.3.0"],
            "torch 2.9.0 cannot train torchtitan 0.3.0: torchtitan 0.3.0 needs "
            "torch_checkpointing 0.1.1, which requires torch >= 2.11",
        ),
        (
            [MEGATRON, "--torch", "2.5.1", "--megatron", PINNED_TAG],
            f"torch 2.5.1 cannot train megatron {PINNED_TAG}",
        ),
    ],
)
def test_an_incompatible_torch_pin_is_refused_before_anything_is_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["train-env", *args, "--cuda", "cu128", "--cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and f"torch {PINS.torch}" in err
    assert not (tmp_path / "attune-train").exists()


def test_the_runner_installs_the_te_the_gate_assumed() -> None:
    """One value: an undeclared TE is checked as ASSUMED_TE and installed as the pin."""
    assert ASSUMED_TE == TRANSFORMER_ENGINE
    assert te_version({}, "") == TRANSFORMER_ENGINE
    assert te_version({}, TRANSFORMER_ENGINE) == TRANSFORMER_ENGINE
    assert te_version({"transformer_engine": "2.9"}, "2.9.0") == "2.9"
    assert te_version({"transformer_engine": "none"}, "") is None


@pytest.mark.parametrize(
    ("body", "requested", "message"),
    [
        ({}, "2.8.0", "declares none, so the gate assumed transformer_engine 2.14.0"),
        ({"transformer_engine": "2.9"}, "2.10.0", "the recipe declares transformer_engine 2.9"),
        ({"transformer_engine": "none"}, "2.9.0", "declares transformer_engine: none"),
    ],
)
def test_a_te_other_than_the_gates_is_refused(
    body: dict[str, str], requested: str, message: str
) -> None:
    with pytest.raises(AttuneError, match=message):
        te_version(body, requested)


def test_the_cli_refuses_a_te_pin_the_gate_did_not_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train-env", MEGATRON, *PINNED, "--transformer-engine", "2.8.0"]
    assert main([*args, "--cache", str(tmp_path)]) == 2
    assert "the gate assumed transformer_engine 2.14.0" in capsys.readouterr().err
    assert not (tmp_path / "attune-train").exists()


def test_megatron_needs_a_python_of_at_least_3_12(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attune's own 3.11 is not enough for Megatron-LM core_v0.19.0; with no other interpreter
    on PATH the error says how to get one. torchtitan takes attune's own."""
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it, no pyenv
    monkeypatch.delenv(INTERPRETER_VAR, raising=False)
    if sys.version_info < (3, 12):
        with pytest.raises(AttuneError, match=r"needs Python >= 3\.12 .*\(pyenv install 3\.12"):
            training_interpreter("megatron")
    assert training_interpreter("torchtitan") == sys.executable
    with pytest.raises(AttuneError, match="does not run"):
        training_interpreter("megatron", str(tmp_path / "python9"))
    if sys.version_info < (3, 12):
        with pytest.raises(AttuneError, match=r"needs Python >= 3\.12"):
            training_interpreter("megatron", sys.executable)


def test_this_machine_has_a_python_for_megatron() -> None:
    """The training environment's interpreter is found here (PATH or pyenv). Where this fails,
    install Python 3.12 (pyenv install 3.12, uv python install 3.12, apt install python3.12) or
    name one with ATTUNE_TRAIN_INTERPRETER: never a silent skip."""
    python = training_interpreter("megatron")
    version = interpreter_version(python)
    assert version is not None and version >= (3, 12)


@pytest.mark.slow
def test_the_helpers_step_gives_the_venv_its_own_python3_config(tmp_path: Path) -> None:
    """A rehearsal of the build's interpreter steps with the real Python >= 3.12 (no torch, no
    download): its venv, then the step that links its python3-config, whose extension suffix
    names the helpers for that Python."""
    import subprocess

    python = training_interpreter("megatron")
    steps = plan("megatron", TrainEnvRequest(torch="2.9.0", cuda="cu128", megatron="x"), tmp_path,
                 python=python)  # fmt: skip
    subprocess.run(steps[0], check=True)  # the venv
    (link,) = [step for step in steps if LINK_CONFIG in step]
    subprocess.run(link, check=True)  # python3-config into it
    config = tmp_path / "venv" / "bin" / "python3-config"
    suffix = subprocess.run([str(config), "--extension-suffix"], capture_output=True, text=True)
    minor = interpreter_version(python)
    assert minor is not None and f"cpython-{minor[0]}{minor[1]}" in suffix.stdout
