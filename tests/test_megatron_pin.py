"""Megatron-LM is pinned by commit, not only by tag: ``attune train-env`` fetches a pinned tag or
a full commit, and refuses (exit 2) a checkout whose ``git rev-parse HEAD`` is not the pinned
commit, before anything of it is installed. No network: a local git repository with the tag
stands in for NVIDIA/Megatron-LM."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bot.cli import main
from bot.commands import megatron_checkout
from bot.commands.megatron_checkout import (
    checkout_megatron,
    pinned_commit,
    release_of,
    verify_checkout,
)
from bot.commands.train_interpreter import INTERPRETER_VAR, training_interpreter
from gate.errors import AttuneError
from runners.megatron.pins import MEGATRON_COMMITS
from runners.versions import PINS
from tests.conftest import ROOT

MEGATRON = str(ROOT / "examples/megatron/llama3-8b.yaml")
CORE_V0_19_0 = "5be9626709af2722333bf54797c954c09edeada3"
"""The commit of tag core_v0.19.0, read in a mirror of NVIDIA/Megatron-LM."""


def git(*args: str, cwd: Path) -> str:
    env = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *env, *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def remote(tmp_path: Path) -> tuple[str, list[str]]:
    """A repository standing in for Megatron-LM: two commits, the tag core_v0.19.0 on the
    first (so it is not the tip); its file:// URL and its commits, oldest first."""
    repo = tmp_path / "Megatron-LM.git"
    repo.mkdir()
    git("init", "--quiet", cwd=repo)
    commits = []
    for n in (1, 2):
        (repo / "setup.py").write_text(f"# release {n}: never run by the test\n")
        git("add", "setup.py", cwd=repo)
        git("commit", "--quiet", "-m", f"release {n}", cwd=repo)
        commits.append(git("rev-parse", "HEAD", cwd=repo))
        if n == 1:
            git("tag", "-a", "core_v0.19.0", "-m", "core_v0.19.0", cwd=repo)
    return repo.as_uri(), commits


def test_the_table_pins_full_commits() -> None:
    assert MEGATRON_COMMITS["core_v0.19.0"] == CORE_V0_19_0
    assert all(len(c) == 40 and int(c, 16) >= 0 for c in MEGATRON_COMMITS.values())
    assert pinned_commit("core_v0.19.0") == CORE_V0_19_0
    assert pinned_commit(CORE_V0_19_0) == CORE_V0_19_0  # a commit is its own pin
    assert release_of(CORE_V0_19_0) == "core_v0.19.0"  # the torch floor is the tag's
    with pytest.raises(AttuneError, match="the tag main has no pinned commit"):
        pinned_commit("main")


def test_an_unpinned_tag_is_refused_before_anything_is_fetched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ATTUNE_TRAIN_PYTHON", raising=False)
    args = ["train-env", MEGATRON, "--torch", PINS.torch, "--cuda", PINS.cuda]
    assert main([*args, "--megatron", "core_v9.9.9", "--cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "megatron: the tag core_v9.9.9 has no pinned commit in attune" in err
    assert f"core_v0.19.0 ({CORE_V0_19_0})" in err
    assert "git ls-remote https://github.com/NVIDIA/Megatron-LM 'refs/tags/core_v9.9.9^{}'" in err
    assert not (tmp_path / "attune-train").exists()


def test_a_tag_that_names_another_commit_is_refused_before_anything_is_installed(
    tmp_path: Path,
    remote: tuple[str, list[str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stand-in's core_v0.19.0 is not NVIDIA's commit: the build stops after the clone,
    with no venv, no torch, nothing of the checkout installed, and no ready mark."""
    url, commits = remote
    monkeypatch.setattr(megatron_checkout, "MEGATRON_REPO", url)
    monkeypatch.delenv("ATTUNE_TRAIN_PYTHON", raising=False)
    monkeypatch.setenv(INTERPRETER_VAR, training_interpreter("megatron"))
    cache = tmp_path / "cache"
    args = ["train-env", MEGATRON, "--torch", PINS.torch, "--cuda", PINS.cuda]
    assert main([*args, "--megatron", "core_v0.19.0", "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert (
        f"Megatron-LM core_v0.19.0: the tag now names commit {commits[0]}, not the pinned "
        f"{CORE_V0_19_0}; nothing of the checkout was installed or run"
    ) in err
    (folder,) = (cache / "attune-train").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["Megatron-LM", "constraints.txt"]


def test_a_pinned_tag_or_a_commit_is_fetched_and_verified(
    tmp_path: Path, remote: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, (tagged, tip) = remote
    monkeypatch.setitem(MEGATRON_COMMITS, "core_v0.19.0", tagged)  # the stand-in's pin
    assert checkout_megatron("core_v0.19.0", tmp_path / "by-tag", repo=url) == tagged
    # a commit is fetched by itself, tip or not
    assert checkout_megatron(tagged, tmp_path / "by-commit", repo=url) == tagged
    assert checkout_megatron(tip, tmp_path / "tip", repo=url) == tip
    assert (tmp_path / "tip" / "setup.py").read_text().startswith("# release 2")
    # a commit the repository does not have is not fetched
    with pytest.raises(AttuneError, match=f"fetching Megatron-LM {'0' * 40} failed"):
        checkout_megatron("0" * 40, tmp_path / "none", repo=url)
    # a checkout at another commit than the one asked for is refused
    with pytest.raises(AttuneError, match=f"checked out commit {tip}, not the pinned {tagged}"):
        verify_checkout(tmp_path / "tip", tagged)
