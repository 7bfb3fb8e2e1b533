"""A recipe's ``env`` is data: names off its framework's allow-list are refused when the recipe
is read (baseline included), by ``gate check`` (exit 1, reject), by ``tune`` and ``bench``
(exit 2, nothing launched), by the Slurm job builder; torchtitan recipes import no code; and
no secret of the runner reaches a real launch."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.campaign.setup import open_campaign
from bot.cli import main
from gate.env_allowlist import MAX_VALUE_CHARS, EnvRefused
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.models import Recipe
from gate.recipe import parse_recipe
from gate.registry import load_file, recipe_allowlist
from runners.adapter import LaunchSpec
from runners.embedded.adapter import EmbeddedAdapter
from runners.launch_env import launch_environment
from runners.local import LocalBackend
from runners.slurm.script import job_environment, job_request
from runners.torchtitan.adapter import TorchtitanAdapter
from runners.torchtitan.recipe import TorchtitanRecipe, model_module
from tests.conftest import ROOT
from tests.github_harness import (
    RECIPE_PATH,
    comment,
    github_mode,
    ledger_events,
    replies,
    wait_for,
)
from tests.github_harness import recipe_text as github_recipe_text

EXAMPLES = ROOT / "examples"
BASELINE = EXAMPLES / "ported-gpt.yaml"

HOSTILE: dict[str, dict[str, str]] = {
    "browser-perl": {
        "PYTHONWARNINGS": "ignore::antigravity.Foo",
        "BROWSER": "perl -e 'system(\"id\")'",
        "PERL5OPT": "-Mstrict",
    },
    "bash-env": {"BASH_ENV": "/tmp/evil.sh"},
    "ld-preload": {"LD_PRELOAD": "/tmp/evil.so"},
    "path": {"PATH": "/tmp/evil-bin"},
    "pythonpath": {"PYTHONPATH": "/tmp/evil"},
    "home": {"HOME": "/tmp/evil-home"},
    "pet": {"PET_NPROC_PER_NODE": "64"},
    "nccl-plugin": {"NCCL_NET_PLUGIN": "/tmp/evil.so"},
    "off-list": {"MALLOC_ARENA_MAX": "2", "SOME_KNOB": "1"},
}
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-secret",
    "GITHUB_TOKEN": "ghs_secret",
    "ATTUNE_SLURM_TOKEN": "slurm-secret",
    "AWS_ACCESS_KEY_ID": "AKIA-secret",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "HF_TOKEN": "hf_secret",
    "DEPLOY_KEY": "k",
    "DB_PASSWORD": "p",
    "APP_SECRET": "s",
}
NO_SECRET = pytest.mark.parametrize("case", sorted(HOSTILE), ids=str)


def recipe_text(env: dict[str, Any], base: Path = BASELINE) -> str:
    data = yaml.safe_load(base.read_text())
    data["env"] = env
    return yaml.safe_dump(data)


def write(tmp_path: Path, name: str, env: dict[str, Any], base: Path = BASELINE) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(recipe_text(env, base))
    return path


@NO_SECRET
@pytest.mark.parametrize(
    "base",
    [
        BASELINE,
        EXAMPLES / "megatron" / "llama3-8b.yaml",
        EXAMPLES / "torchtitan" / "llama3-8b.yaml",
    ],
    ids=lambda p: p.parent.name,
)
def test_each_hostile_env_is_refused_when_the_recipe_is_read(case: str, base: Path) -> None:
    env = HOSTILE[case]
    with pytest.raises(EnvRefused) as caught:
        parse_recipe(recipe_text(env, base), path="r.yaml")
    message = str(caught.value)
    assert message.startswith("r.yaml: ")
    for name in env:
        assert f"env.{name} " in message  # each variable is named
    assert "A recipe may set " in message and "OMP_NUM_THREADS" in message  # the list
    assert {key for key, _ in caught.value.problems} == {f"env.{n}" for n in env}


@NO_SECRET
def test_gate_check_rejects_a_hostile_env_in_either_recipe(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "bad", HOSTILE[case])
    for baseline, candidate in ((BASELINE, bad), (bad, BASELINE)):
        code = main(["gate", "check", str(baseline), str(candidate), "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 1 and report["verdict"] == "reject"  # never review
        assert {f["key"] for f in report["findings"]} == {f"env.{n}" for n in HOSTILE[case]}
        assert {f["class"] for f in report["findings"]} == {"invalid"}
        assert all(str(bad) in f["reason"] for f in report["findings"])


def test_gate_check_lists_both_recipes_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = write(tmp_path, "base", {"LD_PRELOAD": "/x.so"})
    cand = write(tmp_path, "cand", {"BASH_ENV": "/x.sh"})
    assert main(["gate", "check", str(base), str(cand)]) == 1
    out = capsys.readouterr().out
    assert "LD_PRELOAD" in out and "BASH_ENV" in out and "reject" in out


@NO_SECRET
def test_tune_refuses_before_anything_is_created(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "bad", HOSTILE[case])
    workdir = tmp_path / "campaign"
    code = main(["tune", str(bad), "--budget", "0.1", "--workdir", str(workdir)])
    err = capsys.readouterr().err
    assert code == 2 and f"env.{next(iter(HOSTILE[case]))}" in err
    assert not workdir.exists()  # no ledger, so no allocation and no launch


@NO_SECRET
def test_bench_refuses_before_anything_launches(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "bad", HOSTILE[case])
    workdir, out = tmp_path / "bench", tmp_path / "result.json"
    code = main(["bench", str(bad), "--workdir", str(workdir), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and f"env.{next(iter(HOSTILE[case]))}" in err
    assert not workdir.exists() and not out.exists()


def test_github_mode_refuses_the_tuned_pull_requests_recipe(tmp_path: Path) -> None:
    """GitHub mode opens a campaign on the pull request's recipe text with ``open_campaign``
    (its reply on refusal: ``replies.not_a_recipe``); a refused baseline writes nothing."""
    with Ledger(tmp_path / "ledger.db") as ledger:
        with pytest.raises(AttuneError, match=r"env\.LD_PRELOAD is never allowed"):
            open_campaign(
                ledger,
                "pr-1",
                recipe_text=recipe_text({"LD_PRELOAD": "/x.so"}),
                recipe_path="recipes/gpt.yaml",
                budget_hours=0.1,
                steps=4,
                warmup=1,
            )
        assert ledger.events("pr-1") == []


def test_a_tune_comment_on_a_pull_request_with_a_refused_env_starts_nothing(
    tmp_path: Path,
) -> None:
    """GitHub mode over real HTTP: the tuned pull request's recipe is as untrusted as a
    candidate; its refusal is the reply, and nothing is opened or dispatched."""
    with github_mode(tmp_path) as (fake, app, number):
        data = yaml.safe_load(github_recipe_text(activation_checkpointing=True))
        data["env"] = {"BASH_ENV": "/tmp/x.sh"}
        fake.commit("tune-ported", {RECIPE_PATH: yaml.safe_dump(data)}, author="maintainer")
        comment(fake, app, number, "maintainer", "/attune tune")
        wait_for(lambda: replies(fake, number), timeout=20, what="the refusal")
        (reply,) = replies(fake, number)
        assert "is not a recipe attune can tune" in reply and "env.BASH_ENV" in reply
        assert fake.dispatches() == [] and ledger_events(app) == []


@NO_SECRET
def test_the_slurm_job_builder_never_gets_a_refused_name(case: str, tmp_path: Path) -> None:
    spec = LaunchSpec(argv=["true"], devices=1, env=HOSTILE[case], framework="embedded")
    with pytest.raises(EnvRefused):
        job_environment(spec, {"PATH": "/usr/bin"})
    with pytest.raises(EnvRefused):
        job_request(
            spec,
            workdir=tmp_path,
            timeout_s=60,
            partition=None,
            account=None,
            margin_min=0,
            exclude=[],
        )


def test_a_launch_that_names_no_framework_sets_no_variable() -> None:
    spec = LaunchSpec(argv=["true"], devices=1, env={"OMP_NUM_THREADS": "2"})
    with pytest.raises(EnvRefused, match="names no framework"):
        launch_environment(spec, {})
    allowed = spec.model_copy(update={"framework": "embedded"})
    assert launch_environment(allowed, {})["OMP_NUM_THREADS"] == "2"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1\x002", "NUL"),
        ("1\n2", "line break"),
        ("1\r2", "line break"),
        ("1" * (MAX_VALUE_CHARS + 1), f"at most {MAX_VALUE_CHARS}"),
        (4, "must be a string"),
    ],
    ids=["nul", "newline", "carriage-return", "too-long", "not-text"],
)
def test_values_are_one_line_of_bounded_text(value: object, problem: str, tmp_path: Path) -> None:
    with pytest.raises(EnvRefused, match=rf"env\.OMP_NUM_THREADS: .*{problem}"):
        parse_recipe(recipe_text({"OMP_NUM_THREADS": value}), path="r.yaml")
    spec = LaunchSpec(argv=["true"], devices=1, env={"OMP_NUM_THREADS": "x"}, framework="embedded")
    if isinstance(value, str):
        with pytest.raises(EnvRefused, match=problem):
            job_environment(spec.model_copy(update={"env": {"OMP_NUM_THREADS": value}}), {})


def test_an_allowed_env_still_reads_and_launches() -> None:
    recipe = parse_recipe(recipe_text({"OMP_NUM_THREADS": "2"}), path="r.yaml")
    assert recipe.body["env"] == {"OMP_NUM_THREADS": "2"}
    nccl = {"NCCL_PROTO": "Simple", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}
    megatron = EXAMPLES / "megatron" / "llama3-8b.yaml"
    assert parse_recipe(recipe_text(nccl, megatron), path="m.yaml").body["env"] == nccl
    titan = EXAMPLES / "torchtitan" / "llama3-8b.yaml"
    assert parse_recipe(recipe_text(nccl, titan), path="t.yaml").body["env"] == nccl


def test_the_adapter_refuses_a_recipe_that_was_never_parsed() -> None:
    body = {"config": {}, "env": {"LD_PRELOAD": "/x.so"}}
    with pytest.raises(EnvRefused, match=r"env\.LD_PRELOAD"):
        EmbeddedAdapter().resolve(Recipe(framework="embedded", name="r", path="r.yaml", body=body))


# --- torchtitan: no code is imported ---


def titan_body(**over: Any) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / "torchtitan" / "llama3-8b.yaml").read_text())
    data.pop("framework", None)
    data.pop("name", None)
    data.update(over)
    return dict(data)


@pytest.mark.parametrize(
    "module", ["evil.config_registry", "torchtitan.experiments.flux", "os.path", "Llama3", ""]
)
def test_torchtitan_module_is_a_model_of_torchtitan(module: str) -> None:
    with pytest.raises(ValueError, match="module"):
        TorchtitanRecipe.model_validate(titan_body(module=module))


def test_a_bare_module_name_is_looked_up_in_torchtitans_models_only() -> None:
    """torchtitan imports a name it does not list as a top-level module (``os``,
    ``antigravity``); attune always hands it ``torchtitan.models.<name>``."""
    assert model_module("llama3") == "torchtitan.models.llama3"
    assert model_module("antigravity") == "torchtitan.models.antigravity"
    assert model_module("torchtitan.models.qwen3") == "torchtitan.models.qwen3"
    recipe = parse_recipe(
        yaml.safe_dump({"framework": "torchtitan", **titan_body(module="antigravity")}),
        path="t.yaml",
    )
    with pytest.raises(AttuneError, match="antigravity"):  # resolved inside the package only
        TorchtitanAdapter().resolve(recipe)
    assert "antigravity" not in sys.modules


def test_torchtitan_module_forms_that_pass() -> None:
    for module in ("llama3", "torchtitan.models.llama3"):
        assert TorchtitanRecipe.model_validate(titan_body(module=module)).module == module
    with pytest.raises(ValueError, match="function name"):
        TorchtitanRecipe.model_validate(titan_body(config="llama3_8b; import os"))


@pytest.mark.parametrize(
    "tokens",
    [
        ["--override.imports", "my_overrides.fused_rope"],
        ["--override.imports=my_overrides.fused_rope"],
        ["--override-imports", "x.y"],
        ["--model.converters.imports", "x.y"],
        ["--job.custom-module", "x"],
        ["--job.custom_module_path", "x"],
    ],
    ids=lambda t: t[0],
)
def test_torchtitan_overrides_that_import_code_are_refused(tokens: list[str]) -> None:
    base = titan_body()
    with pytest.raises(ValueError, match="names code to import"):
        TorchtitanRecipe.model_validate(dict(base, overrides=[*base["overrides"], *tokens]))
    text = yaml.safe_dump({"framework": "torchtitan", **dict(base, overrides=tokens)})
    recipe = parse_recipe(text, path="t.yaml")
    with pytest.raises(AttuneError, match=r"t\.yaml: overrides: .*names code to import"):
        TorchtitanAdapter().resolve(recipe)  # refused before any worker starts


def test_torchtitan_model_part_names_are_not_code() -> None:
    base = titan_body()
    tokens = ["--parallelism.module_fqns_per_model_part", "[]"]
    TorchtitanRecipe.model_validate(dict(base, overrides=[*base["overrides"], *tokens]))


# --- the registry's allow-lists ---


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("env.LD_PRELOAD", "never allowed"),
        ("env.PYTHONPATH", "never allowed"),
        ("env.BASH_ENV", "never allowed"),
        ("env.LD_*", "overlaps LD_*"),
        ("env.PYTHON_*", "overlaps PYTHON*"),
        ("env.MASTER_*", "would allow MASTER_ADDR"),
        ("env.N*", "nothing wider"),
        ("env.*_THREADS", "nothing wider"),
        ("env.NCCL_*_X", "nothing wider"),
        ("env.nccl_proto", "upper-case variable name"),
    ],
)
def test_a_registry_cannot_allow_what_is_dangerous_or_too_wide(
    entry: str, problem: str, tmp_path: Path
) -> None:
    path = tmp_path / "embedded.yaml"
    path.write_text(
        "framework: embedded\nversions: '==1'\nkeys:\n"
        f"  '{entry}': {{class: layout, reason: r, source: runners/embedded/config.py:1}}\n"
    )
    with pytest.raises(AttuneError, match="invalid registry entry") as caught:
        load_file(path)
    assert str(path) in str(caught.value) and problem in str(caught.value)


def test_each_framework_has_its_allow_list() -> None:
    assert recipe_allowlist("embedded").entries == ["OMP_NUM_THREADS"]
    for framework in ("megatron", "torchtitan"):
        entries = recipe_allowlist(framework).entries
        assert {"NCCL_*", "TORCH_NCCL_*", "OMP_NUM_THREADS"} <= set(entries)
    assert recipe_allowlist("jax").entries == []


# --- no secret of the runner reaches a run ---


def test_no_secret_of_the_runner_reaches_an_embedded_launch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded workload's own launch, run by the local backend, with a probe in the
    workload's place: the child sees the named safe variables and the recipe's env only."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    monkeypatch.setenv("ATTUNE_LAUNCH_PASS_ENV", "NCCL_SOCKET_IFNAME")
    recipe = parse_recipe(recipe_text({"OMP_NUM_THREADS": "2"}), path="r.yaml")
    adapter = EmbeddedAdapter()
    effective = adapter.resolve(recipe)
    spec = adapter.launch(recipe, effective, steps=2, workdir=tmp_path, profile=False)
    probe = "import json, os; print(json.dumps(dict(os.environ)))"
    spec = spec.model_copy(update={"argv": [sys.executable, "-c", probe]})
    backend = LocalBackend()
    outcome = backend.wait(backend.start(spec, workdir=tmp_path, timeout_s=60))
    seen = json.loads(Path(outcome.stdout_path).read_text())
    assert not set(SECRETS) & set(seen), sorted(seen)
    assert not any(v in SECRETS.values() for v in seen.values())
    assert seen["OMP_NUM_THREADS"] == "2" and seen["NCCL_SOCKET_IFNAME"] == "eth0"
    assert "ATTUNE_LAUNCH_PASS_ENV" not in seen
    # the Slurm job is built from the same allow-list
    job = job_environment(spec)
    assert not set(SECRETS) & set(job) and job["OMP_NUM_THREADS"] == "2"


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "ANTHROPIC_API_KEY", "ATTUNE_SLURM_TOKEN"])
def test_an_operator_cannot_pass_a_secret_into_launches(name: str) -> None:
    spec = LaunchSpec(argv=["true"], devices=1, framework="embedded")
    with pytest.raises(AttuneError, match=f"ATTUNE_LAUNCH_PASS_ENV names {name}"):
        launch_environment(spec, {"ATTUNE_LAUNCH_PASS_ENV": f"NCCL_IB_HCA,{name}", name: "s"})
