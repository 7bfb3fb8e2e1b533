"""A Megatron recipe's declared Transformer Engine version answers every probe Megatron makes
while resolving it: ``validate_args`` (``--fp4-format`` asks for TE >= 2.7.0.dev0 there), the
transformer config and the other model checks.

The recipe is Llama 3.1 405B in NVFP4 on 256 GB200 (``gpu_arch: sm100``,
``transformer_engine: "2.9"``), the layout of Megatron-Bridge's GB200 NVFP4 performance recipe.
All variants resolve in one worker process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.errors import FrameworkRefusal
from gate.models import EffectiveConfig, Recipe
from gate.prelaunch import judge, refused
from gate.recipe import load_recipe
from gate.registry import load_registry
from runners.megatron.adapter import MegatronAdapter
from runners.megatron.model_checks import ASSUMED_TE

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

pytest.importorskip("megatron.core")

NVFP4 = Path(__file__).resolve().parent / "fixtures" / "megatron" / "llama31-405b-nvfp4.yaml"
FP4_FLAGS = ("--fp4-format", "--fp4-recipe")
PRECISION_AWARE = ["--use-precision-aware-optimizer", "--main-grads-dtype", "bf16"]
"""Imports TE's FusedAdam, reads its signature (megatron/core/optimizer/optimizer_config.py:450)."""


def _variant(recipe: Recipe, name: str, **body: object) -> Recipe:
    new = {**recipe.body, **body}
    return recipe.model_copy(update={"name": name, "path": f"{name}.yaml", "body": new})


def _without_fp4(args: list[str]) -> list[str]:
    out = list(args)
    for flag in FP4_FLAGS:
        i = out.index(flag)
        del out[i : i + 2]
    return out


@pytest.fixture(scope="module")
def resolved() -> dict[str, EffectiveConfig | Exception]:
    nvfp4 = load_recipe(NVFP4)
    body = dict(nvfp4.body)
    unset = {k: v for k, v in body.items() if k != "transformer_engine"}
    recipes = {
        "nvfp4": nvfp4,
        "bf16": _variant(nvfp4, "bf16", args=_without_fp4(body["args"])),
        "te-2.6": _variant(nvfp4, "te-2.6", transformer_engine="2.6"),
        "te-unset": nvfp4.model_copy(
            update={"name": "te-unset", "path": "te-unset.yaml", "body": unset}
        ),
        "te-none": _variant(nvfp4, "te-none", transformer_engine="none"),
        "adam-te-2.9": _variant(nvfp4, "adam-te-2.9", args=[*body["args"], *PRECISION_AWARE]),
        "adam-te-2.0": _variant(
            nvfp4,
            "adam-te-2.0",
            args=[*_without_fp4(body["args"]), *PRECISION_AWARE],
            transformer_engine="2.0",
        ),
    }
    outcomes = MegatronAdapter().resolve_each(list(recipes.values()))
    return dict(zip(recipes, outcomes, strict=True))


def test_an_nvfp4_recipe_is_allowed_against_itself(
    resolved: dict[str, EffectiveConfig | Exception], capsys: pytest.CaptureFixture[str]
) -> None:
    nvfp4 = resolved["nvfp4"]
    assert isinstance(nvfp4, EffectiveConfig), nvfp4
    assert nvfp4.values["fp4"] == "e2m1" and nvfp4.values["fp4_recipe"] == "nvfp4"
    assert nvfp4.values["data_parallel_size"] == 4  # 256 / (TP4 x PP16)
    assert judge(nvfp4, nvfp4, load_registry("megatron", nvfp4.framework_version)).verdict == (
        "allow"
    )
    from bot.cli import main

    assert main(["gate", "check", str(NVFP4), str(NVFP4), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "allow"


def test_an_undeclared_te_is_the_documented_default(
    resolved: dict[str, EffectiveConfig | Exception],
) -> None:
    """``transformer_engine`` unset is checked as 2.14.0: NVFP4 is allowed, the same effective
    configuration as the recipe that declares 2.9."""
    unset, nvfp4 = resolved["te-unset"], resolved["nvfp4"]
    assert ASSUMED_TE == "2.14.0"
    assert isinstance(unset, EffectiveConfig), unset
    assert isinstance(nvfp4, EffectiveConfig)
    assert unset.values == nvfp4.values


def test_bf16_to_nvfp4_is_rejected_as_semantic_with_its_source(
    resolved: dict[str, EffectiveConfig | Exception],
) -> None:
    base, cand = resolved["bf16"], resolved["nvfp4"]
    assert isinstance(base, EffectiveConfig), base
    assert isinstance(cand, EffectiveConfig), cand
    report = judge(base, cand, load_registry("megatron", base.framework_version))
    assert report.verdict == "reject"
    (fp4,) = [f for f in report.findings if f.key == "fp4"]
    assert fp4.key_class == "semantic"
    assert (fp4.baseline, fp4.candidate) == (None, "e2m1")
    assert fp4.source == "megatron/core/transformer/transformer_config.py:652@0.19.2"


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("te-2.6", "the recipe declares transformer_engine 2.6"),
        ("te-none", "the recipe declares transformer_engine: none"),
    ],
)
def test_a_te_below_the_options_minimum_is_invalid_naming_the_version(
    resolved: dict[str, EffectiveConfig | Exception], name: str, said: str
) -> None:
    refusal = resolved[name]
    assert isinstance(refusal, FrameworkRefusal), refusal
    assert str(refusal).startswith(f"{name}.yaml: args: ")
    (finding,) = refused(refusal).findings
    assert finding.key_class == "invalid" and finding.key == "args"
    assert "--fp4-format requires Transformer Engine >= 2.7.0.dev0" in finding.reason
    assert said in finding.reason
    assert finding.source.startswith("megatron/training/arguments.py:1074@")


def test_the_precision_aware_optimizer_asks_the_declared_te(
    resolved: dict[str, EffectiveConfig | Exception],
) -> None:
    """OptimizerConfig imports TE's FusedAdam: the resolving machine has no TE, the declared
    2.9 has the optimizer, a declared 2.0 is refused as Megatron refuses an old TE."""
    allowed = resolved["adam-te-2.9"]
    assert isinstance(allowed, EffectiveConfig), allowed
    assert allowed.values["use_precision_aware_optimizer"] is True
    old = resolved["adam-te-2.0"]
    assert isinstance(old, FrameworkRefusal), old
    assert "Current FusedAdam of TE doesn't support" in old.message
    assert "the recipe declares transformer_engine 2.0" in old.message
