"""Warnings raised by the framework's validation: which ones a candidate introduces, which of
those count (numerical stability or correctness), and how the registry can name them."""

from __future__ import annotations

from pathlib import Path

import yaml

from gate.models import EffectiveConfig, ValidationWarning
from gate.prelaunch import judge
from gate.registry import load_registry
from gate.validation_warnings import counts, warning_id

REGISTRY = Path(__file__).resolve().parents[1] / "registry"
SCALE = ValidationWarning(
    message="Setting args.check_for_nan_in_loss_and_grad to False since dynamic loss scaling "
    "is being used",
    source="megatron/training/arguments.py:1179",
)
INFO = ValidationWarning(
    message="Disabling sequence parallelism because tensor model parallelism is disabled",
    source="megatron/training/arguments.py:1395",
)


def config(*warnings: ValidationWarning, threads: int = 1) -> EffectiveConfig:
    return EffectiveConfig(
        framework="embedded",
        framework_version="1",
        values={"threads": threads},
        devices=1,
        warnings=list(warnings),
    )


def test_the_rule_keeps_numerical_and_correctness_warnings() -> None:
    assert counts(SCALE)
    assert counts(ValidationWarning(message="Consider moe_router_dtype for numerical stability"))
    assert counts(ValidationWarning(message="results may be incorrect with this fusion"))
    assert not counts(INFO)
    assert not counts(
        ValidationWarning(message="NaN check is deprecated", category="FutureWarning")
    )
    assert not counts(ValidationWarning(message="moe_ffn_hidden_size is not set, using default"))
    assert warning_id(SCALE.message) == (
        "setting-args-check_for_nan_in_loss_and_grad-to-false-since-dynamic-loss"
    )


def test_a_candidate_that_introduces_a_numerical_warning_goes_to_review() -> None:
    registry = load_registry("embedded", "1")
    report = judge(config(INFO), config(INFO, SCALE, threads=2), registry)
    assert report.verdict == "review"
    (warning,) = [f for f in report.findings if f.key.startswith("warning:")]
    assert warning.key == f"warning:{warning_id(SCALE.message)}"
    assert warning.key_class == "unknown" and SCALE.message in warning.reason
    assert warning.source == "megatron/training/arguments.py:1179@1"
    # present in the baseline too, or informational: nothing to review
    assert judge(config(SCALE), config(SCALE, threads=2), registry).verdict == "allow"
    assert judge(config(), config(INFO, threads=2), registry).verdict == "allow"


def test_the_known_bugs_data_can_name_a_warning(tmp_path: Path) -> None:
    (tmp_path / "embedded.yaml").write_text((REGISTRY / "embedded.yaml").read_text())
    bug = {
        "versions": ">=1",
        "keys": ["warning:*dynamic-loss"],
        "reason": "the NaN check is off: a diverging run is not stopped",
        "source": "megatron/training/arguments.py:1179@0.19.2",
    }
    (tmp_path / "embedded-known-bugs.yaml").write_text(
        yaml.safe_dump({"framework": "embedded", "known_bugs": {"nan-check-off": bug}})
    )
    report = judge(config(), config(SCALE), load_registry("embedded", "1", tmp_path))
    assert report.verdict == "reject"
    (finding,) = report.findings
    assert finding.key_class == "known_bug" and finding.reason.startswith("nan-check-off: ")
    assert SCALE.message in finding.reason
