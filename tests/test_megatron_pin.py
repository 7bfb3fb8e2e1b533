"""Megatron-LM is pinned by commit or by content, not only by tag: ``attune train-env`` fetches a
pinned tag or a full commit, and refuses (exit 2) a checkout whose ``git rev-parse HEAD`` is not
the pinned commit, or, for a tag pinned by content, whose ``megatron/core`` and
``megatron/training`` Python files are not the released wheel's, before anything of it is
installed. No network: a local git repository with the tag stands in for NVIDIA/Megatron-LM, and
a wheel built here for the released megatron-core."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from benchmarks.megatron_tree_digest import from_installed, from_wheel
from bot.cli import main
from bot.commands import megatron_checkout
from bot.commands.megatron_checkout import (
    checkout_megatron,
    pin_name,
    pinned_commit,
    release_of,
    verify_checkout,
)
from bot.commands.train_interpreter import INTERPRETER_VAR, training_interpreter
from gate.errors import AttuneError
from runners.megatron import tree
from runners.megatron.pins import MEGATRON_COMMITS, MEGATRON_TREE_DIGESTS
from runners.megatron.tree import manifest_text, pinned_manifest, tree_digest
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


# --- pinned by content: the released wheel's megatron/core and megatron/training Python files

CORE_V0_19_2_TREE = "40056dd05737c11be265fb96249690d1d80a7dd84b7d4e429cb57b629d8da7fc"
"""The tree digest of the megatron-core 0.19.2 wheel (benchmarks/megatron_tree_digest.py)."""
TRAINING = "megatron/training/training.py"
RELEASED = {
    "megatron/core/__init__.py": b"from megatron.core.package_info import __version__\n",
    "megatron/core/package_info.py": b'MAJOR = 0\nMINOR = 19\nPATCH = 3\nPRE_RELEASE = ""\n'
    b"VERSION = (MAJOR, MINOR, PATCH, PRE_RELEASE)\n",
    TRAINING: b"def pretrain():\n    return 1\n",
}
"""The stand-in release's pinned files as tagged (the version line as the tag has it)."""


def sha256_b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def write_wheel(path: Path, files: dict[str, bytes]) -> Path:
    """A megatron-core wheel of ``files`` with its RECORD, as a release build writes one."""
    record = io.StringIO()
    rows = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
            rows.writerow([name, f"sha256={sha256_b64(data)}", len(data)])
        rows.writerow(["megatron_core-0.19.2.dist-info/RECORD", "", ""])
        wheel.writestr("megatron_core-0.19.2.dist-info/RECORD", record.getvalue())
    return path


@pytest.fixture
def released(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A stand-in Megatron-LM with the tag core_v0.19.2, and attune pinning that tag by the
    content of a wheel built from the same sources (whose build rewrote the version line);
    the repository's URL and its working tree."""
    repo = tmp_path / "Megatron-LM.git"
    for name, data in {**RELEASED, "pretrain_gpt.py": b"# not pinned\n"}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    git("init", "--quiet", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "--quiet", "-m", "release", cwd=repo)
    git("tag", "core_v0.19.2", cwd=repo)
    wheel_files = {
        **RELEASED,
        "megatron/core/package_info.py": RELEASED["megatron/core/package_info.py"]
        .replace(b"PATCH = 3", b"PATCH = 2")
        .replace(b'""', b"''"),
        "megatron/core/datasets/helpers.cpp": b"// not a Python file: not pinned\n",
    }
    entries, bad = from_wheel(write_wheel(tmp_path / "megatron_core.whl", wheel_files))
    assert not bad and sorted(entries) == sorted(RELEASED)
    trees = tmp_path / "trees"
    trees.mkdir()
    (trees / "core_v0.19.2.txt").write_text(manifest_text(entries))
    monkeypatch.setattr(tree, "TREES", trees)
    monkeypatch.setitem(MEGATRON_TREE_DIGESTS, "core_v0.19.2", tree_digest(manifest_text(entries)))
    return repo.as_uri(), repo


def test_the_version_sets_tag_is_pinned_by_its_wheels_content() -> None:
    """The tag attune init and the bench template write is accepted: pinned by content."""
    assert PINS.megatron_tag not in MEGATRON_COMMITS
    assert MEGATRON_TREE_DIGESTS[PINS.megatron_tag] == CORE_V0_19_2_TREE
    assert pinned_commit(PINS.megatron_tag) is None  # no commit: the tree is checked
    assert pin_name(PINS.megatron_tag) == f"{PINS.megatron_tag}-tree{CORE_V0_19_2_TREE[:12]}"
    assert pin_name("core_v0.19.0") == f"core_v0.19.0-{CORE_V0_19_0[:12]}"  # the commit wins
    for tag, digest in MEGATRON_TREE_DIGESTS.items():  # the shipped manifests are the pinned
        assert len(pinned_manifest(tag, digest)) == 542


@pytest.mark.skipif(
    not any(d.metadata["Name"] == "megatron-core" for d in metadata.distributions()),
    reason="megatron-core is not installed (make setup installs it for the gate)",
)
def test_the_pinned_digest_is_rederived_from_the_installed_wheel() -> None:
    if metadata.version("megatron-core") != "0.19.2":
        pytest.skip(f"megatron-core {metadata.version('megatron-core')} installed, not 0.19.2")
    entries, bad = from_installed("megatron-core")
    assert not bad  # every file is the wheel's, as its RECORD says
    assert tree_digest(manifest_text(entries)) == CORE_V0_19_2_TREE


def test_a_tag_whose_files_are_the_released_ones_is_accepted(
    tmp_path: Path, released: tuple[str, Path]
) -> None:
    url, repo = released
    head = git("rev-parse", "HEAD", cwd=repo)
    assert checkout_megatron("core_v0.19.2", tmp_path / "ok", repo=url) == head


def test_one_changed_byte_in_a_training_file_is_refused_naming_it(
    tmp_path: Path,
    released: tuple[str, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tag moved to a commit with one byte changed in megatron/training: train-env stops
    after the clone, with nothing of the checkout installed."""
    url, repo = released
    changed = RELEASED[TRAINING].replace(b"1", b"2")
    (repo / TRAINING).write_bytes(changed)
    git("commit", "--quiet", "-am", "one byte", cwd=repo)
    git("tag", "-f", "core_v0.19.2", cwd=repo)
    monkeypatch.setattr(megatron_checkout, "MEGATRON_REPO", url)
    monkeypatch.delenv("ATTUNE_TRAIN_PYTHON", raising=False)
    monkeypatch.setenv(INTERPRETER_VAR, training_interpreter("megatron"))
    cache = tmp_path / "cache"
    args = ["train-env", MEGATRON, "--torch", PINS.torch, "--cuda", PINS.cuda]
    assert main([*args, "--megatron", "core_v0.19.2", "--cache", str(cache)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    head = git("rev-parse", "HEAD", cwd=repo)
    assert (
        f"Megatron-LM core_v0.19.2 (commit {head}) is not the released megatron-core's source: "
        f"{TRAINING} differs (sha256 {sha256_b64(changed)}, the release's "
        f"{sha256_b64(RELEASED[TRAINING])})"
    ) in err
    assert "nothing of the checkout was installed or run" in err
    (folder,) = (cache / "attune-train").iterdir()
    assert folder.name.startswith("megatron-core_v0.19.2-tree")
    assert sorted(p.name for p in folder.iterdir()) == ["Megatron-LM", "constraints.txt"]


def test_a_missing_an_extra_or_a_linked_file_is_refused(
    tmp_path: Path, released: tuple[str, Path]
) -> None:
    url, _ = released
    checkout = tmp_path / "c"
    checkout_megatron("core_v0.19.2", checkout, repo=url)
    (checkout / "megatron/core/datasets").mkdir()
    (checkout / "megatron/core/datasets/helpers.cpp").write_text("// not pinned")
    (checkout / "pretrain_gpt.py").write_text("# not pinned either")
    verify_checkout(checkout, "core_v0.19.2")  # neither is a pinned file
    extra = checkout / "megatron/training/extra.py"
    extra.write_text("")
    with pytest.raises(AttuneError, match=r"megatron/training/extra\.py is extra"):
        verify_checkout(checkout, "core_v0.19.2")
    extra.unlink()
    (checkout / TRAINING).unlink()
    with pytest.raises(AttuneError, match=f"{TRAINING} is missing"):
        verify_checkout(checkout, "core_v0.19.2")
    (checkout / TRAINING).symlink_to(tmp_path / "Megatron-LM.git" / TRAINING)
    with pytest.raises(AttuneError, match=f"{TRAINING} is not a regular file"):
        verify_checkout(checkout, "core_v0.19.2")


def test_a_manifest_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, released: tuple[str, Path]
) -> None:
    url, _ = released
    checkout_megatron("core_v0.19.2", tmp_path / "c", repo=url)
    manifest = tree.TREES / "core_v0.19.2.txt"
    manifest.write_text(manifest.read_text().replace(TRAINING, "megatron/training/other.py"))
    with pytest.raises(
        AttuneError, match=r"pinned by content, but the manifest core_v0\.19\.2\.txt"
    ):
        verify_checkout(tmp_path / "c", "core_v0.19.2")
