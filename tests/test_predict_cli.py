"""``attune predict RECIPE``: the step-time model's prediction for the example recipes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from tests.conftest import ROOT

KEYS = {
    "tokens_per_s_per_device",
    "step_time_s",
    "mfu",
    "peak_memory_bytes",
    "fits",
    "breakdown",
    "hardware",
    "model_version",
}


def _predict(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["predict", *argv, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert set(out) >= KEYS
    assert sum(out["breakdown"].values()) == pytest.approx(out["step_time_s"])
    return out


def test_embedded_recipe_on_the_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    out = _predict(capsys, str(ROOT / "examples/ported-gpt.yaml"))
    assert out["hardware"] == "cpu" and out["fits"] is None and out["peak_memory_bytes"] is None
    assert out["tokens_per_s_per_device"] == pytest.approx(
        out["tokens_per_step"] / out["step_time_s"]
    )
    # the candidate without recompute is predicted faster, as measured in the README's demo
    faster = _predict(capsys, str(ROOT / "examples/candidates/no-recompute.yaml"))
    assert faster["tokens_per_s_per_device"] > out["tokens_per_s_per_device"]


def test_megatron_llama3_8b_fits_an_h200_not_an_h100(capsys: pytest.CaptureFixture[str]) -> None:
    recipe = str(ROOT / "examples/megatron/llama3-8b.yaml")
    h100 = _predict(capsys, recipe)  # gpu_arch sm90 stands for the H100
    h200 = _predict(capsys, recipe, "--hardware", "h200")
    assert (h100["hardware"], h200["hardware"]) == ("h100-sxm", "h200")
    assert h100["peak_memory_bytes"] == h200["peak_memory_bytes"] > 60 * 2**30
    assert (h100["fits"], h200["fits"]) == (False, True)
    assert h100["breakdown"]["compute"] > 0.9 * h100["step_time_s"]


def test_the_recipes_hardware_key_names_the_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = yaml.safe_load((ROOT / "examples/torchtitan/llama3-8b.yaml").read_text())
    recipe = tmp_path / "llama3-8b-b200.yaml"
    recipe.write_text(yaml.safe_dump({**body, "hardware": "b200"}))
    b200 = _predict(capsys, str(recipe))
    h100 = _predict(capsys, str(ROOT / "examples/torchtitan/llama3-8b.yaml"))
    assert (b200["hardware"], h100["hardware"]) == ("b200", "h100-sxm")
    assert b200["tokens_per_s_per_device"] > 1.5 * h100["tokens_per_s_per_device"]
    assert b200["peak_memory_bytes"] == h100["peak_memory_bytes"]


def test_unknown_hardware_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["predict", str(ROOT / "examples/ported-gpt.yaml"), "--hardware", "tpu-v5"])
    assert code == 2
    err = capsys.readouterr().err
    assert "unknown hardware 'tpu-v5'" in err and "h100-sxm" in err


def test_plain_output_names_the_components(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["predict", str(ROOT / "examples/ported-gpt.yaml")]) == 0
    out = capsys.readouterr().out
    assert "tokens/s/device" in out and "compute" in out and "perfmodel-1" in out
