"""What a runner installs: attune's own dependencies from a hash-pinned lock, no dev extras
(``make setup-runner``, which the gate and bench actions call)."""

from __future__ import annotations

import re
import subprocess
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

LOCK = ROOT / "requirements" / "runner.lock"


def locked() -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of every requirement in the lock."""
    out: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=\S)", LOCK.read_text()):
        first = block.split("\n", 1)[0]
        if first.startswith("#") or not first.strip():
            continue
        spec = first.split(" \\")[0].split(";")[0].strip()
        name, _, version = spec.partition("==")
        assert version, f"not pinned to one version: {first}"
        out[canonicalize_name(name)] = (version, re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return out


def test_every_locked_requirement_is_one_version_with_hashes() -> None:
    pins = locked()
    assert len(pins) > 20
    for name, (_, hashes) in pins.items():
        assert hashes, f"{name} has no --hash"


def test_the_lock_covers_the_runtime_dependencies_and_no_dev_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = locked()
    for spec in project["dependencies"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} (pyproject.toml) is not in {LOCK.name}"
        assert req.specifier.contains(pins[name][0], prereleases=True), (spec, pins[name][0])
    runtime = {canonicalize_name(Requirement(spec).name) for spec in project["dependencies"]}
    for spec in project["optional-dependencies"]["dev"]:
        name = canonicalize_name(Requirement(spec).name)
        assert name in runtime or name not in pins, f"dev extra {name} is in the runner's lock"


def test_the_runner_setup_installs_from_the_lock_with_hashes_and_no_extras() -> None:
    recipe = subprocess.run(
        ["make", "-n", "-B", "-C", str(ROOT), "setup-runner"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pip_lines = [line for line in recipe.splitlines() if " -m pip install" in line]
    assert "--require-hashes --no-deps -r requirements/runner.lock" in pip_lines[0]
    assert any(line.endswith("--no-deps .") for line in pip_lines), pip_lines
    assert not any("[" in line and "dev" in line for line in pip_lines), pip_lines
    assert not any(" -e " in line for line in pip_lines), "a runner does not install editable"
