"""``attune init --action-repo OWNER/NAME --ref SHA`` against the test GitHub: the commit is
checked on the repository that hosts attune's actions, the workflows point there, they pass
actionlint with the config init writes, and they pin the one version set."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.cli import main
from runners.versions import PINS
from tests.conftest import ROOT
from tests.fakegithub.server import FakeGitHub

ACTIONLINT = ROOT / ".venv" / "bin" / "actionlint"
SHELLCHECK = ROOT / ".venv" / "bin" / "shellcheck"


@pytest.fixture
def github(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeGitHub, str]]:
    """The test GitHub holding a fork of attune (``mirror/attune``); its head commit."""
    with FakeGitHub() as fake:
        fake.create_repo("mirror", "attune", files={"actions/bench/action.yml": "name: x\n"})
        monkeypatch.setenv("ATTUNE_GITHUB_API_URL", fake.url)
        monkeypatch.setenv("GITHUB_TOKEN", fake.issue_token()[0])
        yield fake, fake.head("main", "mirror/attune")


def uses(path: Path) -> list[str]:
    return [
        line.split("uses:", 1)[1].split()[0]
        for line in path.read_text().splitlines()
        if "uses:" in line and not line.lstrip().startswith("#")
    ]


def test_init_checks_the_ref_on_the_action_repo_and_points_the_workflows_there(
    tmp_path: Path, github: tuple[FakeGitHub, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _fake, sha = github
    assert main(["init", str(tmp_path), "--action-repo", "mirror/attune", "--ref", sha]) == 0
    out = capsys.readouterr().out
    assert f"checked: mirror/attune has {sha}" in out
    workflows = tmp_path / ".github" / "workflows"
    assert f"mirror/attune/actions/gate@{sha}" in uses(workflows / "attune-gate.yml")
    assert f"mirror/attune/actions/bench@{sha}" in uses(workflows / "attune-bench.yml")
    assert not any(u.startswith("attune/attune/") for u in uses(workflows / "attune-bench.yml"))
    assert yaml.safe_load((tmp_path / ".github" / "attune.yml").read_text())["attune"] == sha


def test_init_refuses_a_commit_the_action_repo_does_not_have(
    tmp_path: Path, github: tuple[FakeGitHub, str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = "0123456789abcdef" * 2 + "01234567"
    assert main(["init", str(tmp_path), "--action-repo", "mirror/attune", "--ref", missing]) == 2
    err = capsys.readouterr().err
    assert f"--ref: mirror/attune has no commit {missing}" in err
    assert not (tmp_path / ".github").exists()  # nothing written


def test_init_says_when_it_cannot_check_and_writes_anyway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as closed:  # nothing listens there
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("ATTUNE_GITHUB_API_URL", f"http://127.0.0.1:{port}")
    ref = "ab" * 20
    assert main(["init", str(tmp_path), "--ref", ref]) == 0
    out = capsys.readouterr().out
    assert f"not checked: whether attune/attune has {ref}" in out
    assert "could not be reached" in out and "make sure it does" in out
    assert (tmp_path / ".github" / "workflows" / "attune-bench.yml").is_file()


@pytest.mark.parametrize("repo", ["attune", "a/b/c", "-x/y", "x/..", "x/y z"])
def test_init_refuses_an_action_repo_that_is_not_owner_name(
    tmp_path: Path, repo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path), f"--action-repo={repo}", "--ref", "ab" * 20]) == 2
    assert "--action-repo:" in capsys.readouterr().err
    assert not (tmp_path / ".github").exists()


def test_the_bench_workflow_pins_the_version_set(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path), "--ref", "ab" * 20, "--no-check"]) == 0
    bench = yaml.safe_load((tmp_path / ".github/workflows/attune-bench.yml").read_text())
    assert {k: v for k, v in bench["env"].items() if k != "ATTUNE_TRANSFORMER_ENGINE"} == {
        "ATTUNE_TORCH": PINS.torch,
        "ATTUNE_CUDA": PINS.cuda,
        "ATTUNE_MEGATRON": PINS.megatron_tag,
        "ATTUNE_TORCHTITAN": PINS.torchtitan,
    }


@pytest.mark.skipif(not ACTIONLINT.exists(), reason="make setup installs actionlint")
def test_the_written_workflows_pass_actionlint_with_the_written_config(tmp_path: Path) -> None:
    """Run where a training repository runs it: from the repository root, so actionlint finds
    ``.github/actionlint.yaml`` itself. Without that file the ``gpu`` label is unknown."""
    assert main(["init", str(tmp_path), "--ref", "ab" * 20, "--no-check"]) == 0
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    lint = [str(ACTIONLINT), f"-shellcheck={SHELLCHECK}"]
    passed = subprocess.run(lint, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    (tmp_path / ".github" / "actionlint.yaml").unlink()
    failed = subprocess.run(lint, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert failed.returncode != 0 and 'label "gpu" is unknown' in failed.stdout
    shutil.rmtree(tmp_path / ".git")
