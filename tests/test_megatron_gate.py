"""The gate on real Megatron-LM recipes: labelled candidates judged after Megatron's validation.

Every baseline and candidate of ``megatron_cases.CASES`` is resolved by megatron-core's own
``parse_args`` + ``validate_args`` in ONE worker process, then judged against
``registry/megatron-core-0.19.yaml``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gate.errors import AttuneError, FrameworkRefusal
from gate.models import EffectiveConfig
from gate.prelaunch import judge, refused
from gate.recipe import load_recipe
from gate.registry import Registry, load_file, load_registry
from runners.megatron.adapter import MegatronAdapter
from tests.megatron_cases import CASES, EXAMPLES, Case, baseline_of, candidate_of

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

pytest.importorskip("megatron.core")

REPO = Path(__file__).resolve().parents[1]
Outcome = EffectiveConfig | AttuneError


def assert_megatron_line(source: str, path: str = "") -> None:
    """``source`` is ``megatron/...py:N@<version>`` naming a real line of the installed
    package (in file ``path`` when given) that raises or asserts."""
    import megatron  # type: ignore[import-untyped]  # megatron-core ships no type information

    location, _, version = source.partition("@")
    file, _, line = location.rpartition(":")
    assert version and file.startswith("megatron/") and (not path or file == path), source
    text = (Path(megatron.__path__[0]).parent / file).read_text().splitlines()[int(line) - 1]
    assert "raise" in text or "assert" in text or "exit(" in text, (source, text)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Every baseline and candidate, resolved in one worker call."""
    recipes = {}
    for case in CASES:
        base = baseline_of(case)
        recipes[base.name] = base
        recipes[case.name] = candidate_of(case)
    resolved = MegatronAdapter().resolve_each(list(recipes.values()))
    return dict(zip(recipes, resolved, strict=True))


@pytest.fixture(scope="module")
def registry(outcomes: dict[str, Outcome]) -> Registry:
    version = next(o for o in outcomes.values() if isinstance(o, EffectiveConfig))
    return load_registry("megatron", version.framework_version)


def test_at_least_forty_labelled_cases() -> None:
    assert len(CASES) >= 40
    assert len({c.name for c in CASES}) == len(CASES)
    assert {c.recipe for c in CASES} == {"llama3-8b", "mixtral-8x7b", "gpt3-175b"}
    assert {c.verdict for c in CASES} == {"allow", "review", "reject", "invalid"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_labelled_candidate(case: Case, outcomes: dict[str, Outcome], registry: Registry) -> None:
    base, cand = outcomes[baseline_of(case).name], outcomes[case.name]
    assert isinstance(base, EffectiveConfig), base
    if case.verdict == "invalid":
        assert isinstance(cand, FrameworkRefusal), "Megatron's validation should refuse this"
        assert case.error in cand.message
        assert str(cand).startswith(f"{case.name}.yaml: {case.stage}: ")
        (finding,) = refused(cand).findings
        assert finding.key_class == "invalid" and case.error in finding.reason
        assert_megatron_line(finding.source, case.source)
        return
    assert isinstance(cand, EffectiveConfig), cand
    report = judge(base, cand, registry)
    classes = {f.key: f.key_class for f in report.findings}
    summary = ", ".join(f"{k}={v}" for k, v in sorted(classes.items()))
    assert report.verdict == case.verdict, summary
    for key, expected in case.drivers.items():
        assert classes.get(key) == expected, f"{key}: {summary}"


def test_validation_can_erase_a_layout_flag(outcomes: dict[str, Outcome]) -> None:
    """--sequence-parallel is turned off by validate_args at TP1: dropping it changes nothing."""
    base = outcomes["llama3-8b"]
    cand = outcomes["drop-sequence-parallel-at-tp1"]
    assert isinstance(base, EffectiveConfig) and isinstance(cand, EffectiveConfig)
    assert base.values["sequence_parallel"] is False
    assert base.fingerprint() == cand.fingerprint()


def test_known_bug_rejects_uneven_stages_before_core_0_16(
    outcomes: dict[str, Outcome], tmp_path: Path
) -> None:
    """A team on megatron-core 0.15 copies the 0.19 registry for its version; the known-bugs
    file then rejects uneven first/last pipeline stages (mis-loaded layer weights)."""
    (tmp_path / "megatron-known-bugs.yaml").write_text(
        (REPO / "registry" / "megatron-known-bugs.yaml").read_text()
    )
    text = (REPO / "registry" / "megatron-core-0.19.yaml").read_text()
    (tmp_path / "megatron-core-0.15.yaml").write_text(
        text.replace("versions: '>=0.19,<0.20'", "versions: '>=0.15,<0.16'", 1)
    )
    base, cand = outcomes["llama3-8b"], outcomes["pp4-uneven-first-stage"]
    assert isinstance(base, EffectiveConfig) and isinstance(cand, EffectiveConfig)
    old = [c.model_copy(update={"framework_version": "0.15.3"}) for c in (base, cand)]
    report = judge(old[0], old[1], load_registry("megatron", "0.15.3", tmp_path))
    bugs = {f.key: f for f in report.findings if f.key_class == "known_bug"}
    assert report.verdict == "reject"
    assert set(bugs) == {"decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"}
    assert "uneven-pipeline-layer-offset" in bugs["decoder_first_pipeline_num_layers"].reason
    # on 0.19 the same change is layout
    now = judge(base, cand, load_registry("megatron", base.framework_version))
    assert now.verdict == "allow"


def test_registry_classifies_every_parser_argument() -> None:
    keys = MegatronAdapter().keys()
    assert len(keys.keys) > 800
    registry = load_file(REPO / "registry" / "megatron-core-0.19.yaml")
    from gate.coverage import coverage

    report = coverage(registry, keys.keys)
    assert report.missing == []
    assert report.not_in_parser == []
    assert report.derived_in_parser == []


def test_gate_check_cli_on_a_megatron_pair(tmp_path: Path) -> None:
    """attune gate check BASE CAND --json: exit 1 and the capacity factor named for the trap."""
    case = next(c for c in CASES if c.name == "capacity-factor")
    cand = candidate_of(case)
    path = tmp_path / "cand.yaml"
    path.write_text(
        json.dumps({"framework": "megatron", "name": "cand", **cand.body})  # JSON is YAML
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bot.cli",
            "gate",
            "check",
            str(EXAMPLES / "mixtral-8x7b.yaml"),
            str(path),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["verdict"] == "reject"
    (finding,) = [f for f in payload["findings"] if f["key"] == "moe_expert_capacity_factor"]
    assert finding["class"] == "semantic"
    assert finding["source"].startswith("megatron/core/transformer/transformer_config.py:")


def test_each_class_of_the_whole_validation_is_labelled() -> None:
    """Refusals at both stages, a warning that asks for review, derived batches both ways, and
    the options that make a parallel degree semantic; every cited line exists."""
    stages = {c.stage for c in CASES if c.verdict == "invalid"}
    assert stages == {"args", "model"}
    assert any(k.startswith("warning:") for c in CASES for k in c.drivers)
    unpinned = {c.verdict for c in CASES if "--global-batch-size" in c.base_drop}
    assert unpinned == {"allow", "reject"}
    import megatron

    root = Path(megatron.__path__[0]).parent
    for case in CASES:
        if "@" not in case.source:
            continue
        location, _, version = case.source.partition("@")
        file, _, line = location.rpartition(":")
        assert version == "0.19.2", case.name
        lines = (root / file).read_text().splitlines()
        assert 0 < int(line) <= len(lines), case.name


def test_gate_check_names_megatrons_refusal(
    outcomes: dict[str, Outcome], capsys: pytest.CaptureFixture[str]
) -> None:
    """attune gate check on a candidate TransformerConfig refuses: exit 1, a reject whose
    invalid finding quotes Megatron's message and the line that raised it, in every format."""
    from bot.cli import main

    path = EXAMPLES / "candidates" / "llama3-8b-pp4-first-stage-6.yaml"
    assert (
        load_recipe(path).body["args"]
        == candidate_of(next(c for c in CASES if c.name == "pp4-first-stage-6")).body["args"]
    )  # the labelled case, so its resolution is the one already made
    base = str(EXAMPLES / "llama3-8b.yaml")
    assert main(["gate", "check", base, str(path), "--json"]) == 1
    (finding,) = json.loads(capsys.readouterr().out)["findings"]
    assert finding["class"] == "invalid" and finding["key"] == "model"
    assert "number of layers at middle stage: 26 must be divisible" in finding["reason"]
    assert_megatron_line(finding["source"], "megatron/core/transformer/transformer_config.py")
    assert main(["gate", "check", base, str(path), "--markdown"]) == 1
    assert (
        "| `model` | `null` | `null` | invalid | megatron 0.19.2 refuses" in capsys.readouterr().out
    )
    assert main(["gate", "check", base, str(path)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "verdict: reject" in out and "invalid" in out and "refuses" in out
    # the same file as the baseline: nothing to compare against, attune's bad input (exit 2)
    assert main(["gate", "check", str(path), base]) == 2
    assert "invalid baseline" in capsys.readouterr().err
