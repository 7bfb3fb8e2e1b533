"""Pre-launch gate on effective configs: layout allowed, semantic and side effects rejected."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from gate.env_allowlist import EnvRefused
from gate.models import EffectiveConfig, Recipe
from gate.prelaunch import diff, judge
from gate.registry import Registry, load_file, load_registry
from runners.embedded.adapter import EmbeddedAdapter
from runners.embedded.config import WORKLOAD_VERSION

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REGISTRY_DIR = Path(__file__).resolve().parent.parent / "registry"
BASE: dict[str, Any] = {"global_batch_size": 16, "micro_batch_size": 1, "threads": 1}


def resolve(config: dict[str, Any], env: dict[str, str] | None = None) -> EffectiveConfig:
    body = {"config": config, "env": env or {}}
    return EmbeddedAdapter().resolve(
        Recipe(framework="embedded", name="r", path="r.yaml", body=body)
    )


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry("embedded", WORKLOAD_VERSION)


def verdict(registry: Registry, base: dict[str, Any], **change: Any) -> tuple[str, dict[str, Any]]:
    report = judge(resolve(base), resolve({**base, **change}), registry)
    return report.verdict, {f.key: f for f in report.findings}


def test_identical_configs_have_no_findings(registry: Registry) -> None:
    report = judge(resolve(BASE), resolve(dict(BASE)), registry)
    assert report.verdict == "allow" and report.findings == []


@pytest.mark.parametrize(
    "change",
    [
        {"threads": 2},
        {"micro_batch_size": 4},
        {"data_parallel_size": 2},
        {"compile": True},
        {"attention": "math"},
        {"activation_checkpointing": True},
        {"optimizer_impl": "fused"},
    ],
)
def test_layout_changes_are_allowed(registry: Registry, change: dict[str, Any]) -> None:
    result, findings = verdict(registry, BASE, **change)
    assert result == "allow", findings
    assert all(f.key_class == "layout" for f in findings.values())


@pytest.mark.parametrize(
    "change",
    [
        {"lr": 0.001},
        {"seq_len": 64},
        {"global_batch_size": 32},
        {"precision": "bf16"},
        {"seed": 1},
        {"dropout": 0.1},
        {"optimizer": "sgd"},
        {"adam_beta2": 0.999},
    ],
)
def test_semantic_changes_are_rejected(registry: Registry, change: dict[str, Any]) -> None:
    result, findings = verdict(registry, BASE, **change)
    assert result == "reject"
    (key,) = change
    assert findings[key].key_class == "semantic" and not findings[key].derived


def test_micro_batch_moves_unpinned_global_batch(registry: Registry) -> None:
    unpinned = {"micro_batch_size": 2}
    result, findings = verdict(registry, unpinned, micro_batch_size=4)
    assert result == "reject"
    assert findings["global_batch_size"].derived
    assert (findings["global_batch_size"].baseline, findings["global_batch_size"].candidate) == (
        2,
        4,
    )
    assert findings["micro_batch_size"].key_class == "semantic"
    assert "does not pin global_batch_size" in findings["micro_batch_size"].reason


def test_data_parallel_size_moves_unpinned_global_batch(registry: Registry) -> None:
    result, findings = verdict(registry, {"micro_batch_size": 2}, data_parallel_size=2)
    assert result == "reject"
    assert findings["global_batch_size"].derived and findings["global_batch_size"].candidate == 4


def test_grad_reduce_in_bf16_side_effect_is_caught(registry: Registry) -> None:
    result, findings = verdict(registry, BASE, grad_reduce_in_bf16=True)
    assert result == "reject"
    side = findings["accumulate_grads_in_fp32"]
    assert side.derived and side.key_class == "semantic"
    assert (side.baseline, side.candidate) == (True, False)


def test_fast_moe_dispatch_side_effect_is_caught(registry: Registry) -> None:
    moe = {**BASE, "moe_num_experts": 4}
    result, findings = verdict(registry, moe, moe_fast_dispatch=True)
    assert result == "reject"
    assert findings["moe_fast_dispatch"].key_class == "layout"
    side = findings["moe_capacity_factor"]
    assert side.derived and side.key_class == "semantic"
    assert (side.baseline, side.candidate) == (None, 1.0)
    # with the capacity pinned, the same flag is only a kernel choice
    pinned = {**moe, "moe_capacity_factor": 1.0}
    assert verdict(registry, pinned, moe_fast_dispatch=True)[0] == "allow"


def test_micro_batch_changes_token_drops_once_capacity_is_set(registry: Registry) -> None:
    capped = {**BASE, "moe_num_experts": 4, "moe_capacity_factor": 1.25}
    result, findings = verdict(registry, capped, micro_batch_size=2)
    assert result == "reject"
    assert "which tokens are dropped" in findings["micro_batch_size"].reason


def test_an_environment_variable_off_the_allow_list_is_rejected_never_reviewed(
    registry: Registry,
) -> None:
    with pytest.raises(EnvRefused, match=r"env\.MALLOC_ARENA_MAX is never allowed"):
        resolve(BASE, {"MALLOC_ARENA_MAX": "2"})
    # an effective config that holds one anyway (not built by the adapter) is rejected
    base = resolve(BASE)
    cand = base.model_copy(
        update={"env": {"FOO_BAR": "2"}, "explicit": [*base.explicit, "env.FOO_BAR"]}
    )
    report = judge(base, cand, registry)
    assert report.verdict == "reject"
    (finding,) = report.findings
    assert finding.key == "env.FOO_BAR" and finding.key_class == "invalid"
    assert "not on the env allow-list" in finding.reason and "OMP_NUM_THREADS" in finding.reason


def test_environment_changes_are_diffed(registry: Registry) -> None:
    changes = diff(resolve({}, {"OMP_NUM_THREADS": "1"}), resolve({}, {"OMP_NUM_THREADS": "2"}))
    assert {c.key for c in changes} == {"env.OMP_NUM_THREADS", "threads"}
    report = judge(
        resolve({}, {"OMP_NUM_THREADS": "1"}), resolve({}, {"OMP_NUM_THREADS": "2"}), registry
    )
    assert report.verdict == "allow"


def test_known_bug_rejects(tmp_path: Path) -> None:
    data = yaml.safe_load((Path(__file__).parent.parent / "registry" / "embedded.yaml").read_text())
    data["keys"]["compile"]["when"] = [
        {
            "if": {"key": "activation_checkpointing", "in": [True]},
            "class": "known_bug",
            "reason": "test: recompute under compile mis-orders RNG",
        }
    ]
    (tmp_path / "embedded.yaml").write_text(yaml.safe_dump(data))
    reg = load_file(tmp_path / "embedded.yaml")
    base = {**BASE, "activation_checkpointing": True}
    result, findings = verdict(reg, base, compile=True)
    assert result == "reject" and findings["compile"].key_class == "known_bug"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_shape_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    base = str(EXAMPLES / "ported-gpt.yaml")
    code, out, _ = run_cli(
        capsys, "gate", "check", base, str(EXAMPLES / "candidates/threads-2.yaml"), "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["verdict"] == "allow"
    assert set(data["findings"][0]) >= {"key", "baseline", "candidate", "class", "reason", "source"}
    code, out, _ = run_cli(
        capsys, "gate", "check", base, str(EXAMPLES / "candidates/grad-reduce-bf16.yaml"), "--json"
    )
    assert code == 1
    assert json.loads(out)["verdict"] == "reject"
    code, out, _ = run_cli(
        capsys, "gate", "check", base, str(EXAMPLES / "candidates/threads-2.yaml")
    )
    assert code == 0 and "threads" in out and "allow" in out


def test_cli_review_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key the registry does not classify (here: removed from a copy) asks for review."""
    registry_dir = tmp_path / "registry"
    registry_dir.mkdir()
    data = yaml.safe_load((REGISTRY_DIR / "embedded.yaml").read_text())
    del data["keys"]["compile"]
    (registry_dir / "embedded.yaml").write_text(yaml.safe_dump(data))
    base = yaml.safe_load((EXAMPLES / "ported-gpt.yaml").read_text())
    base["config"]["compile"] = not base["config"].get("compile", False)
    cand = tmp_path / "cand.yaml"
    cand.write_text(yaml.safe_dump(base))
    baseline = str(EXAMPLES / "ported-gpt.yaml")
    code, out, _ = run_cli(
        capsys, "gate", "check", baseline, str(cand), "--json", "--registry", str(registry_dir)
    )
    assert code == 0 and json.loads(out)["verdict"] == "review"


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        ("framework: jax\nconfig: {}\n", r"cand\.yaml: framework: unknown framework 'jax'"),
        ("framework: embedded\nconfig: {threads: [1\n", r"cand\.yaml: malformed YAML at line"),
        ("- a list\n", r"cand\.yaml: a recipe must be a YAML mapping"),
        ("config: {}\n", r"cand\.yaml: framework: missing 'framework'"),
        ("framework: embedded\nconfg: {}\n", r"cand\.yaml: confg: extra inputs are not permitted"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], candidate: str, message: str
) -> None:
    cand = tmp_path / "cand.yaml"
    cand.write_text(candidate)
    code, out, err = run_cli(capsys, "gate", "check", str(EXAMPLES / "ported-gpt.yaml"), str(cand))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(message, lines[0]), lines[0]


def test_cli_missing_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(
        capsys, "gate", "check", str(tmp_path / "nope.yaml"), str(tmp_path / "x.yaml")
    )
    assert code == 2 and "nope.yaml: cannot read recipe" in err
