"""attune installed into a training repository: ``attune init``, the workflow templates it
writes, and the composite actions they pin (``actions/gate``, ``actions/bench``).

The actions' shell steps run for real, with bash as GitHub runs them, against real git
repositories in temporary folders; this checkout plays the pinned attune (the actions find it
two folders above themselves). Only the steps that install software (setup-python,
``make setup``) are left out, and their scripts are checked instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.checks import GATE_CHECK
from bot.cli import main
from bot.commands import init as init_command
from tests.conftest import SMALL_CONFIG

REPO_ROOT = Path(__file__).resolve().parents[1]
ACTIONS = REPO_ROOT / "actions"
TEMPLATES = REPO_ROOT / "bot" / "templates"
WORKFLOW_TEMPLATES = sorted((TEMPLATES / "workflows").glob("*.yml"))
ACTION_FILES = sorted(ACTIONS.glob("*/action.yml"))
REF = "89abcdef01" * 4
ATTUNE = REPO_ROOT / ".venv" / "bin" / "attune"
INSTALLED = {
    ".github/workflows/attune-gate.yml",
    ".github/workflows/attune-bench.yml",
    ".github/attune.yml",
    ".github/actionlint.yaml",
}
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<spec>\S+)(?P<rest>.*)$", re.MULTILINE)
PINNED = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_./-]+)?@[0-9a-f]{40}")
ROOT_LINE = 'root=$(cd -- "$GITHUB_ACTION_PATH/../.." && pwd -P)'
needs_attune = pytest.mark.skipif(not ATTUNE.exists(), reason="make setup has not run")


def recipe_yaml(**over: Any) -> str:
    body = {"framework": "embedded", "name": "gpt", "config": {**SMALL_CONFIG, **over}}
    return yaml.safe_dump(body, sort_keys=False)


def installed(dest: Path) -> dict[str, str]:
    return {p.relative_to(dest).as_posix(): p.read_text() for p in dest.rglob("*") if p.is_file()}


# -- attune init -----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _github_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """init asks GitHub whether the pinned commit exists; here nothing answers (a closed
    loopback port), so it says it could not check (tests/test_init_action_repo.py asks the
    test GitHub)."""
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("ATTUNE_GITHUB_API_URL", f"http://127.0.0.1:{port}")


def test_init_writes_the_workflows_and_config_pinned_to_the_ref(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path), "--ref", REF]) == 0
    files = installed(tmp_path)
    assert set(files) == INSTALLED
    assert "wrote: .github/attune.yml" in capsys.readouterr().out

    for path in (".github/workflows/attune-gate.yml", ".github/workflows/attune-bench.yml"):
        specs = [m["spec"] for m in USES.finditer(files[path])]
        assert specs, path
        for spec in specs:
            assert PINNED.fullmatch(spec), f"{path}: {spec} is not pinned to a commit"
        ours = [s for s in specs if s.startswith("attune/")]
        action = "gate" if "gate" in path else "bench"
        assert ours == [f"attune/attune/actions/{action}@{REF}"]

    config = yaml.safe_load(files[".github/attune.yml"])
    assert config == {"recipes": ["recipes/**/*.yaml", "recipes/**/*.yml"], "attune": REF}

    # the workflows the bot relies on: names, triggers, inputs, the check name
    bench = yaml.safe_load(files[".github/workflows/attune-bench.yml"])
    assert bench["name"] == "attune-bench"
    assert bench["run-name"] == "attune-bench ${{ inputs.campaign }} ${{ inputs.trial }}"
    inputs = bench[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads `on` as True
    assert list(inputs) == ["campaign", "trial", "sha", "recipe", "steps", "warmup", "profile"]
    assert bench["jobs"]["bench"]["runs-on"] == ["self-hosted", "gpu"]
    gate = yaml.safe_load(files[".github/workflows/attune-gate.yml"])
    assert gate["name"] == "attune-gate"
    assert gate[True] == {"pull_request": {"types": ["opened", "synchronize", "reopened"]}}
    assert gate["jobs"]["gate"]["name"] == GATE_CHECK  # the check the executor waits for


def test_init_again_is_a_no_op_and_a_differing_file_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path), "--ref", REF]) == 0
    before = {p: (tmp_path / p).stat().st_mtime_ns for p in INSTALLED}
    first = installed(tmp_path)
    capsys.readouterr()

    assert main(["init", str(tmp_path), "--ref", REF]) == 0
    assert installed(tmp_path) == first
    assert {p: (tmp_path / p).stat().st_mtime_ns for p in INSTALLED} == before
    assert capsys.readouterr().out.count("unchanged: ") == len(INSTALLED)

    edited = tmp_path / ".github" / "workflows" / "attune-gate.yml"
    edited.write_text("# mine\n")
    (tmp_path / ".github" / "attune.yml").unlink()
    assert main(["init", str(tmp_path), "--ref", REF]) == 1
    out = capsys.readouterr().out
    assert "differs: .github/workflows/attune-gate.yml" in out and "--force" in out
    assert edited.read_text() == "# mine\n"
    assert not (tmp_path / ".github" / "attune.yml").exists()  # nothing written at all

    other = "f" * 40  # another pin differs too
    assert main(["init", str(tmp_path), "--ref", other, "--force"]) == 0
    files = installed(tmp_path)
    assert f"attune/attune/actions/gate@{other}" in files[".github/workflows/attune-gate.yml"]
    assert f"attune/attune/actions/bench@{other}" in files[".github/workflows/attune-bench.yml"]
    assert not list(tmp_path.rglob("*.attune-partial"))


@pytest.mark.parametrize("ref", ["abc", "v1.2.3", "main", "g" * 40, REF + "0", REF[:-1]])
def test_init_refuses_a_ref_that_is_not_a_full_commit(
    tmp_path: Path, ref: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", str(tmp_path), "--ref", ref]) == 2
    assert "attune: error: --ref:" in capsys.readouterr().err
    assert installed(tmp_path) == {}


def test_init_lowercases_the_ref(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path), "--ref", REF.upper()]) == 0
    assert yaml.safe_load((tmp_path / ".github" / "attune.yml").read_text())["attune"] == REF


def test_init_pins_the_commit_of_this_checkout_by_default(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert main(["init", str(tmp_path)]) == 0
    gate = (tmp_path / ".github" / "workflows" / "attune-gate.yml").read_text()
    assert f"attune/attune/actions/gate@{head.stdout.strip()}" in gate


def test_init_without_a_checkout_or_a_ref_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # attune installed from a package inside some other git repository: that repository's
    # HEAD is not an attune commit
    other = tmp_path / "models"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    package = other / ".venv" / "site-packages"
    package.mkdir(parents=True)
    monkeypatch.setattr(init_command, "package_root", lambda: package)
    dest = tmp_path / "dest"
    dest.mkdir()
    assert main(["init", str(dest)]) == 2
    assert "pass --ref" in capsys.readouterr().err
    assert installed(dest) == {}


def test_init_refuses_a_missing_folder_and_links(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path / "nowhere"), "--ref", REF]) == 2
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / ".github").symlink_to(outside, target_is_directory=True)
    assert main(["init", str(dest), "--ref", REF, "--force"]) == 2
    assert list(outside.iterdir()) == []


# -- what the templates and actions may run --------------------------------------------------


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def action_steps(name: str) -> list[dict[str, Any]]:
    doc = load(ACTIONS / name / "action.yml")
    assert doc["runs"]["using"] == "composite"
    steps: list[dict[str, Any]] = doc["runs"]["steps"]
    return steps


def test_every_action_used_is_pinned_to_a_commit_with_its_version() -> None:
    versions: dict[str, set[str]] = {}
    files = [*WORKFLOW_TEMPLATES, *ACTION_FILES, *sorted((REPO_ROOT / ".github").rglob("*.yml"))]
    for path in files:
        for match in USES.finditer(path.read_text()):
            spec, rest = match["spec"], match["rest"]
            assert PINNED.fullmatch(spec), f"{path}: {spec} is not pinned to a commit"
            if spec.startswith("attune/attune/"):
                continue
            version = re.fullmatch(r"\s*# (v\d+\.\d+\.\d+)\s*", rest)
            assert version, f"{path}: {spec} needs a '# vX.Y.Z' comment"
            versions.setdefault(spec.split("@")[0], set()).add(f"{spec} {version[1]}")
    assert {"actions/checkout", "actions/setup-python", "actions/upload-artifact"} <= set(versions)
    for name, pins in versions.items():  # one version of each action everywhere
        assert len(pins) == 1, f"{name}: {sorted(pins)}"


def test_the_templates_only_check_out_call_attune_and_upload() -> None:
    for path in WORKFLOW_TEMPLATES:
        doc = load(path)
        assert doc["permissions"] == {"contents": "read"}
        for job in doc["jobs"].values():
            for step in job["steps"]:
                assert "run" not in step, f"{path}: a run step in a workflow template"
                uses = step["uses"].split("@")[0]
                assert uses in (
                    "actions/checkout",
                    "actions/upload-artifact",
                    "attune/attune/actions/gate",
                    "attune/attune/actions/bench",
                ), uses
                if uses == "actions/checkout":
                    assert step["with"]["persist-credentials"] is False


def test_the_templates_pass_what_the_actions_declare() -> None:
    gate = load(TEMPLATES / "workflows" / "attune-gate.yml")["jobs"]["gate"]["steps"]
    checkouts = [s["with"]["path"] for s in gate if s["uses"].startswith("actions/checkout@")]
    (call,) = [s for s in gate if s["uses"].startswith("attune/attune/actions/gate@")]
    (upload,) = [s for s in gate if s["uses"].startswith("actions/upload-artifact@")]
    declared = load(ACTIONS / "gate" / "action.yml")["inputs"]
    assert set(call["with"]) <= set(declared)
    assert {n for n, spec in declared.items() if spec.get("required")} <= set(call["with"])
    assert [call["with"]["base"], call["with"]["candidate"]] == checkouts == ["base", "pr"]
    assert upload["with"]["path"] == f"{call['with']['out']}/gate.json"
    assert upload["with"]["name"] == "attune-gate-${{ github.event.pull_request.number }}"

    bench = load(TEMPLATES / "workflows" / "attune-bench.yml")
    steps = bench["jobs"]["bench"]["steps"]
    (call,) = [s for s in steps if s["uses"].startswith("attune/attune/actions/bench@")]
    (upload,) = [s for s in steps if s["uses"].startswith("actions/upload-artifact@")]
    declared = load(ACTIONS / "bench" / "action.yml")["inputs"]
    assert set(call["with"]) <= set(declared)
    for name in bench[True]["workflow_dispatch"]["inputs"]:
        assert call["with"][name] == f"${{{{ inputs.{name} }}}}"
    assert upload["with"]["path"] == f"{call['with']['out']}/result.json"
    assert upload["with"]["name"] == "attune-result-${{ inputs.trial }}"
    for step in (call, upload):
        assert step.get("id") in ("bench", None)


@pytest.mark.parametrize("name", ["gate", "bench"])
def test_the_actions_run_only_the_pinned_attune(name: str) -> None:
    """Nothing of the training repository's checkout is executed, installed or imported: the
    only things run are git, coreutils and the attune installed from the action's own root."""
    scripts = [s["run"] for s in action_steps(name) if "run" in s]
    assert scripts
    installs = 0
    for script in scripts:
        assert "${{" not in script, "expressions reach scripts through env only"
        for line in script.splitlines():
            code = line.split(" # ")[0].strip()
            if code.startswith("#"):
                continue
            if re.search(r"\bmake\b", code):
                assert code == 'make -C "$root" setup-runner', code
                installs += 1
            for found in re.finditer(r"\S*\.venv\S*", code):
                assert found[0].startswith('"$root/.venv/bin/attune"'), code
            assert not re.search(r"\b(pip3?|python3?|source|eval|exec|npm|uv|sh)\b", code), code
            assert not re.match(r"\.\s", code), code
            if code.startswith("root="):
                assert code == ROOT_LINE
    assert installs == 1
    # the action's root, two folders up, is this checkout: its Makefile and registry
    root = (ACTIONS / name).resolve().parents[1]
    assert root == REPO_ROOT and (root / "Makefile").exists()


def test_the_gate_judges_with_the_registry_of_the_pinned_attune() -> None:
    (script,) = [s["run"] for s in action_steps("gate") if "gate check" in s.get("run", "")]
    assert script.count("--registry") == 1
    assert '--registry "$root/registry"' in script
    assert ROOT_LINE in script
    assert (REPO_ROOT / "registry" / "embedded.yaml").exists()


SHELLCHECK = REPO_ROOT / ".venv" / "bin" / "shellcheck"


@pytest.mark.skipif(not SHELLCHECK.exists(), reason="make setup has not run")
@pytest.mark.parametrize("name", ["gate", "bench"])
def test_the_action_scripts_pass_shellcheck(name: str, tmp_path: Path) -> None:
    """actionlint checks the workflows' scripts; the actions' are checked here."""
    for i, step in enumerate(s for s in action_steps(name) if "run" in s):
        script = tmp_path / f"step-{i}.sh"
        script.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + step["run"])
        proc = subprocess.run([str(SHELLCHECK), str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


# -- the actions' steps, for real --------------------------------------------------------------


@dataclass
class Ran:
    rc: int
    stdout: str
    summary: str
    outputs: dict[str, str]


class Runner:
    """Runs an action's ``run:`` steps with bash the way GitHub does (``shell: bash`` is
    ``bash --noprofile --norc -eo pipefail``), with the step's ``env`` filled from the inputs."""

    def __init__(self, tmp: Path, action: str, **github: str) -> None:
        self.action = action
        self.doc = load(ACTIONS / action / "action.yml")
        self.workspace = tmp / "workspace"
        self.temp = tmp / "runner-temp"
        self.workspace.mkdir(exist_ok=True)
        self.temp.mkdir(exist_ok=True)
        self.summary = tmp / "summary.md"
        self.github = github
        self.outputs: dict[str, str] = {}
        self.github_env = tmp / "github_env"
        """``$GITHUB_ENV``: what a step exports here, later steps see (as on GitHub)."""
        self.github_env.write_text("")

    def env(self, step: dict[str, Any], inputs: dict[str, str]) -> dict[str, str]:
        values = {
            name: str(spec["default"])
            for name, spec in self.doc["inputs"].items()
            if "default" in spec and "${{" not in str(spec["default"])
        }
        values.update(inputs)
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.temp),
            "GITHUB_WORKSPACE": str(self.workspace),
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_ACTION_PATH": str(ACTIONS / self.action),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_ENV": str(self.github_env),
            **self.github,
            **dict(line.split("=", 1) for line in self.github_env.read_text().splitlines() if line),
        }
        for key, value in (step.get("env") or {}).items():
            expression = re.fullmatch(
                r"\$\{\{ (inputs|steps\.files\.outputs)\.([\w-]+) \}\}", value
            )
            assert expression, f"{key}: {value}"
            source = values if expression[1] == "inputs" else self.outputs
            env[key] = source[expression[2]]
        return env

    def run(self, step: dict[str, Any], inputs: dict[str, str]) -> Ran:
        assert step["shell"] == "bash"
        script = self.temp / "step.sh"
        script.write_text(step["run"])
        output = self.temp / "output"
        output.write_text("")
        self.summary.write_text("")
        env = {**self.env(step, inputs), "GITHUB_OUTPUT": str(output)}
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=self.workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        outputs = dict(
            line.split("=", 1) for line in output.read_text().splitlines() if "=" in line
        )
        self.outputs.update(outputs)
        return Ran(proc.returncode, proc.stdout + proc.stderr, self.summary.read_text(), outputs)

    def run_all(self, inputs: dict[str, str]) -> list[Ran]:
        """Every run step in order, up to the first that fails; the install step is left out
        (this checkout's .venv is the installed attune)."""
        done = []
        for step in self.doc["runs"]["steps"]:
            if "run" not in step or "make -C" in step["run"]:
                continue
            done.append(self.run(step, inputs))
            if done[-1].rc != 0:
                break
        return done

    def step(self, name: str) -> dict[str, Any]:
        (found,) = [s for s in self.doc["runs"]["steps"] if s.get("name") == name]
        assert isinstance(found, dict)
        return found


GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class Git:
    """A real git repository in a temporary folder."""

    def __init__(self, path: Path, *, bare: bool = False) -> None:
        self.path = path
        self("init", "-q", "-b", "main", *(["--bare"] if bare else []), str(path), cwd=path.parent)

    def __call__(self, *args: str, cwd: Path | None = None) -> str:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd or self.path,
            env={**os.environ, **GIT_ENV, "HOME": str(self.path.parent)},
            capture_output=True,
            text=True,
            check=True,
        )
        return proc.stdout.strip()

    def commit(self, files: dict[str, str | Path | None], message: str = "change") -> str:
        """Write ``files`` (a str is the content, a Path a link to it, None deletes)."""
        for name, content in files.items():
            path = self.path / name
            if path.is_symlink() or path.is_file():
                path.unlink()
            if content is None:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                path.symlink_to(content)
            else:
                path.write_text(content)
        self("add", "-A")
        self("commit", "-q", "--allow-empty", "-m", message)
        return self("rev-parse", "HEAD")

    def clone_at(self, dest: Path, sha: str) -> Path:
        self("clone", "-q", str(self.path), str(dest), cwd=dest.parent)
        self("checkout", "-q", "--detach", sha, cwd=dest)
        return dest


BASE_FILES: dict[str, str | Path | None] = {
    "recipes/gpt.yaml": recipe_yaml(),
    "recipes/other.yaml": recipe_yaml(threads=2),
    "recipes/link.yaml": Path("gpt.yaml"),
    "recipes/a..yaml": recipe_yaml(),
    "registry/embedded.yaml": "framework: embedded\n",
    "README.md": "models\n",
}


def gate_checkouts(tmp: Path, change: dict[str, str | Path | None]) -> tuple[str, str]:
    """A repository with BASE_FILES, a candidate commit making ``change``, and the two
    checkouts the gate workflow makes (``base`` at the base, ``pr`` at the head, full
    history) in the workspace. Returns (base sha, head sha)."""
    origin = Git(tmp / "origin")
    base_sha = origin.commit(BASE_FILES, "base")
    origin("checkout", "-q", "-b", "attune/c-1/1")
    head_sha = origin.commit(change, "candidate")
    workspace = tmp / "workspace"
    workspace.mkdir(exist_ok=True)
    origin.clone_at(workspace / "base", base_sha)
    origin.clone_at(workspace / "pr", head_sha)
    return base_sha, head_sha


def gate_inputs(base_sha: str, head_sha: str) -> dict[str, str]:
    return {
        "base": "base",
        "candidate": "pr",
        "base-sha": base_sha,
        "head-sha": head_sha,
        "out": "gate-out",
    }


FILES_STEP = "Allow exactly one changed recipe"


def test_the_gate_allows_a_candidate_that_changes_one_recipe(tmp_path: Path) -> None:
    base, head = gate_checkouts(tmp_path, {"recipes/gpt.yaml": recipe_yaml(micro_batch_size=2)})
    runner = Runner(tmp_path, "gate")
    ran = runner.run(runner.step(FILES_STEP), gate_inputs(base, head))
    assert ran.rc == 0, ran.stdout
    assert ran.outputs == {"recipe": "recipes/gpt.yaml"}
    assert ran.summary == ""


REFUSED: dict[str, tuple[dict[str, str | Path | None], str]] = {
    "two files": (
        {"recipes/gpt.yaml": recipe_yaml(threads=2), "README.md": "x\n"},
        "changes exactly one recipe file; this one changes 2 files: README.md recipes/gpt.yaml",
    ),
    "no file": ({}, "this one changes 0 files: none"),
    "a registry file": (
        {"registry/embedded.yaml": "framework: embedded\nkeys: {}\n"},
        "a candidate never changes registry/",
    ),
    "a workflow": (
        {".github/workflows/attune-gate.yml": "name: x\n"},
        "is not a recipe: a candidate changes one .yaml or .yml file",
    ),
    "a file of attune's own folders": (
        {"gate/prelaunch.yaml": "x: 1\n"},
        "a candidate never changes registry/, gate/, runners/, bot/, .github/, tests/",
    ),
    "not a recipe": ({"README.md": "x\n"}, "The changed file README.md is not a recipe"),
    "a '..' path": ({"recipes/a..yaml": recipe_yaml(threads=2)}, "is not a recipe: a candidate"),
    "a link in the candidate": (
        {"recipes/gpt.yaml": Path("other.yaml")},
        "recipes/gpt.yaml is not a regular file in the candidate (deleted, or a link)",
    ),
    "a link on the base": (
        {"recipes/link.yaml": recipe_yaml(threads=2)},
        "recipes/link.yaml is not a recipe file on the base branch",
    ),
    "a new file": (
        {"recipes/new.yaml": recipe_yaml()},
        "recipes/new.yaml is not a recipe file on the base branch",
    ),
    "a deletion": ({"recipes/gpt.yaml": None}, "is not a regular file in the candidate"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_gate_refuses_anything_but_one_changed_recipe(tmp_path: Path, case: str) -> None:
    change, message = REFUSED[case]
    base, head = gate_checkouts(tmp_path, change)
    (tmp_path / "workspace" / "gate-out").mkdir()
    stale = tmp_path / "workspace" / "gate-out" / "gate.json"
    stale.write_text('{"verdict": "allow"}')  # an earlier job's, on a reused machine
    runner = Runner(tmp_path, "gate")
    ran = runner.run(runner.step(FILES_STEP), gate_inputs(base, head))
    assert ran.rc == 1, ran.stdout
    assert "::error title=attune/gate::" in ran.stdout
    assert ran.summary.startswith("## attune/gate: refused")
    assert message in ran.summary
    assert ran.outputs == {}
    assert not stale.exists()


def test_the_gate_refuses_checkouts_that_are_not_the_event_commits(tmp_path: Path) -> None:
    base, head = gate_checkouts(tmp_path, {"recipes/gpt.yaml": recipe_yaml(threads=2)})
    runner = Runner(tmp_path, "gate")
    ran = runner.run(runner.step(FILES_STEP), gate_inputs(base, base))
    assert ran.rc == 1 and "is not the head commit" in ran.summary
    ran = runner.run(runner.step(FILES_STEP), gate_inputs(head, head))
    assert ran.rc == 1 and "is not the base commit" in ran.summary
    ran = runner.run(runner.step(FILES_STEP), gate_inputs(base, head.upper()))
    assert ran.rc == 1 and "head-sha: a full commit id" in ran.summary

    # a base commit the candidate's history does not hold (a force-pushed base branch)
    other = Git(tmp_path / "other")
    other_base = other.commit(BASE_FILES, "rewritten base")
    shutil.rmtree(tmp_path / "workspace" / "base")
    other.clone_at(tmp_path / "workspace" / "base", other_base)
    ran = runner.run(runner.step(FILES_STEP), gate_inputs(other_base, head))
    assert ran.rc == 1 and "is not in the history of this repository" in ran.summary


@needs_attune
def test_the_gate_action_judges_with_its_own_registry(tmp_path: Path) -> None:
    """The files check and the gate, in order: the candidate's base and head carry a registry
    that would call a semantic change layout, and the verdict is still the pinned attune's."""
    poisoned = yaml.safe_load((REPO_ROOT / "registry" / "embedded.yaml").read_text())
    for entry in poisoned["keys"].values():
        entry["class"] = "layout"
        entry.pop("when", None)
    files = {**BASE_FILES, "registry/embedded.yaml": yaml.safe_dump(poisoned)}
    origin = Git(tmp_path / "origin")
    base = origin.commit(files, "base with a registry of its own")
    origin("checkout", "-q", "-b", "attune/c-1/1")
    head = origin.commit({"recipes/gpt.yaml": recipe_yaml(grad_reduce_in_bf16=True)})
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    origin.clone_at(workspace / "base", base)
    origin.clone_at(workspace / "pr", head)

    runner = Runner(tmp_path, "gate")
    files_ran, gate_ran = runner.run_all(gate_inputs(base, head))
    assert files_ran.rc == 0
    assert gate_ran.rc == 1, gate_ran.stdout
    assert "::error title=attune/gate::rejected" in gate_ran.stdout
    verdict = json.loads((workspace / "gate-out" / "gate.json").read_text())
    assert verdict["verdict"] == "reject"
    assert {f["key"] for f in verdict["findings"]} >= {"grad_reduce_in_bf16"}
    assert gate_ran.summary.startswith("## attune/gate\n")
    assert f"base `{base}`, candidate `{head}`" in gate_ran.summary
    assert "grad_reduce_in_bf16" in gate_ran.summary

    # a layout change passes, with its verdict as the artifact
    origin("checkout", "-q", "-b", "attune/c-1/2", base)
    layout = origin.commit({"recipes/gpt.yaml": recipe_yaml(micro_batch_size=2)})
    shutil.rmtree(workspace / "pr")
    origin.clone_at(workspace / "pr", layout)
    ran = runner.run_all(gate_inputs(base, layout))
    assert [r.rc for r in ran] == [0, 0], ran[-1].stdout
    assert json.loads((workspace / "gate-out" / "gate.json").read_text())["verdict"] == "allow"


# -- the bench action --------------------------------------------------------------------------

GOOD_BENCH = {
    "campaign": "octo-org-models-pr1-1",
    "trial": "c3",
    "recipe": "recipes/gpt.yaml",
    "steps": "3",
    "warmup": "1",
    "profile": "false",
    "out": "attune-out",
    "token": "ghs_secret-token-value",
}


@dataclass
class Server:
    """A bare repository served as ``$GITHUB_SERVER_URL/$GITHUB_REPOSITORY`` (file://)."""

    github: dict[str, str]
    head: str
    older: str
    pull_only: str
    link: str
    big: str


def bench_server(tmp: Path) -> Server:
    work = Git(tmp / "src")
    older = work.commit({"recipes/gpt.yaml": recipe_yaml(), "README.md": "models\n"})
    head = work.commit({"recipes/gpt.yaml": recipe_yaml(micro_batch_size=2)})
    work("checkout", "-q", "-b", "links")
    link = work.commit({"recipes/gpt.yaml": Path("../README.md")})  # not a path: a link target
    work("checkout", "-q", "-b", "big", head)
    big = work.commit({"recipes/gpt.yaml": "#" * (1024 * 1024 + 1)})
    work("checkout", "-q", "--detach", head)
    pull_only = work.commit({"recipes/gpt.yaml": recipe_yaml(threads=2)}, "from a fork")
    (tmp / "srv" / "octo").mkdir(parents=True)
    server = Git(tmp / "srv" / "octo" / "models", bare=True)
    work("push", "-q", str(server.path), "main", "links", "big")
    work("push", "-q", str(server.path), f"{pull_only}:refs/pull/7/head")
    github = {"GITHUB_SERVER_URL": f"file://{tmp / 'srv'}", "GITHUB_REPOSITORY": "octo/models"}
    return Server(github, head, older, pull_only, link, big)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("campaign", "a b", "campaign:"),
        ("campaign", "-x", "campaign:"),
        ("trial", "c1;rm", "trial:"),
        ("trial", "", "trial:"),
        ("sha", "ABCDEF" + "0" * 34, "sha:"),
        ("sha", "main", "sha:"),
        ("recipe", "../etc/passwd", "recipe:"),  # not a path: a hostile input
        ("recipe", "recipes/../x.yaml", "recipe:"),
        ("recipe", "/etc/passwd", "recipe:"),
        ("recipe", "recipes/", "recipe:"),
        ("steps", "12; id", "steps:"),
        ("warmup", "-1", "warmup:"),
        ("profile", "yes", "profile:"),
    ],
)
def test_the_bench_refuses_bad_inputs_before_anything(
    tmp_path: Path, field: str, value: str, message: str
) -> None:
    runner = Runner(tmp_path, "bench")
    inputs = {**GOOD_BENCH, "sha": "a" * 40, field: value}
    ran = runner.run(runner.step("Validate the inputs"), inputs)
    assert ran.rc == 1
    assert f"::error title=attune-bench::{message}" in ran.stdout
    ran = runner.run(runner.step("Validate the inputs"), {**GOOD_BENCH, "sha": "a" * 40})
    assert ran.rc == 0, ran.stdout


def test_the_bench_refuses_a_commit_that_is_not_a_branch_head(tmp_path: Path) -> None:
    server = bench_server(tmp_path)
    runner = Runner(tmp_path, "bench", **server.github)
    for sha in (server.older, server.pull_only, "0" * 40):
        ran = runner.run_all({**GOOD_BENCH, "sha": sha})
        assert [r.rc for r in ran] == [0, 1], ran[-1].stdout
        assert f"{sha} is not the head of a branch of octo/models: refused" in ran[-1].stdout
        assert not (runner.temp / "attune-bench").exists()  # nothing fetched
    branch_step = runner.step("Refuse a commit that is not the head of a branch of this repository")
    head = runner.run(branch_step, {**GOOD_BENCH, "sha": server.head})
    assert head.rc == 0 and "refs/heads/main" in head.stdout


@pytest.mark.parametrize(
    ("which", "message"),
    [("link", "is not a regular file in"), ("big", "larger than 1 MiB")],
)
def test_the_bench_takes_only_a_regular_recipe_file(
    tmp_path: Path, which: str, message: str
) -> None:
    server = bench_server(tmp_path)
    runner = Runner(tmp_path, "bench", **server.github)
    ran = runner.run_all({**GOOD_BENCH, "sha": getattr(server, which)})
    assert [r.rc for r in ran] == [0, 0, 1], ran[-1].stdout
    assert message in ran[-1].stdout
    ran = runner.run_all({**GOOD_BENCH, "sha": server.head, "recipe": "recipes/none.yaml"})
    assert ran[-1].rc == 1 and "is not a regular file in" in ran[-1].stdout


@pytest.mark.slow  # real training runs
@needs_attune
def test_the_bench_action_runs_a_trial_of_the_commit_recipe(tmp_path: Path) -> None:
    server = bench_server(tmp_path)
    runner = Runner(tmp_path, "bench", **server.github)
    out = runner.workspace / "attune-out"
    out.mkdir()
    (out / "result.json").write_text("{}")  # an earlier job's, on a reused machine
    ran = runner.run_all({**GOOD_BENCH, "sha": server.head})
    assert [r.rc for r in ran] == [0, 0, 0, 0, 0], ran[-1].stdout
    assert "nothing to prepare" in ran[3].stdout  # an embedded recipe: attune's own venv
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "ok"
    assert (result["trial"], result["sha"]) == ("c3", server.head)
    assert result["recipe"] == "gpt"
    assert len(result["steps"]) == 3
    assert ran[-1].summary.startswith("## attune-bench octo-org-models-pr1-1 c3\n")
    assert "finished cleanly (exit code 0)" in ran[-1].summary

    # only the recipe was written out; no working tree, and the token is nowhere on disk
    bench_dir = runner.temp / "attune-bench"
    assert sorted(p.name for p in bench_dir.iterdir()) == ["data.git", "recipe", "run"]
    assert [p.name for p in (bench_dir / "recipe").iterdir()] == ["gpt.yaml"]
    for path in tmp_path.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert b"ghs_secret-token-value" not in path.read_bytes(), path


@pytest.mark.frameworks  # the refusal names the config torchtitan's own parser resolved
@needs_attune
def test_the_bench_step_stops_at_the_doctor_on_a_runner_without_a_gpu(tmp_path: Path) -> None:
    """A torchtitan recipe on this CPU machine: the Bench step runs attune doctor's checks
    first, exits 2 before anything is launched, and leaves the doctor's words in the result
    the workflow uploads and in the job summary."""
    import sys

    runner = Runner(tmp_path, "bench", ATTUNE_TRAIN_PYTHON=sys.executable)
    recipe_dir = runner.temp / "attune-bench" / "recipe"
    recipe_dir.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "examples" / "torchtitan" / "llama3-8b.yaml", recipe_dir)
    inputs = {**GOOD_BENCH, "sha": "a" * 40, "recipe": "recipes/llama3-8b.yaml"}
    ran = runner.run(runner.step("Bench"), {**inputs, "out": "attune-out"})
    assert ran.rc == 2, ran.stdout
    assert "attune: error: attune doctor: this machine cannot run" in ran.stdout
    assert "was refused before it ran" in ran.summary
    assert "attune doctor: this machine cannot run" in ran.summary
    result = json.loads((runner.workspace / "attune-out" / "result.json").read_text())
    assert result["status"] == "failed" and result["error"].startswith("attune doctor:")
    assert not list((runner.temp / "attune-bench" / "run").glob("*.log"))  # nothing launched
