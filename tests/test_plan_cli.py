"""``attune plan RECIPE``: no launch; the predicted best layouts, the one-lever sequence toward
them, the forecast cost and the least budget that buys calibration and one candidate, on every
example recipe."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from gate.budget import minimum_budget_hours, new_campaign_floor
from tests.conftest import ROOT

EXAMPLES = sorted(
    str(p.relative_to(ROOT))
    for p in [ROOT / "examples/ported-gpt.yaml", *(ROOT / "examples").glob("*/*.yaml")]
    if p.parent.name in ("examples", "megatron", "torchtitan")
)


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", *argv, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_the_embedded_plan_walks_toward_the_predicted_optimum(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = _plan(capsys, str(ROOT / "examples/ported-gpt.yaml"), "--budget", "0.1", "--top", "3")
    assert out["hardware"].startswith("the embedded") or out["framework"] == "embedded"
    assert len(out["best"]) == 3 and out["layouts_priced"] > 100
    gains = [b["predicted_gain_pct"] for b in out["best"]]
    assert gains == sorted(gains, reverse=True) and gains[0] > 0
    # one lever at a time, each predicted to beat the noise floor by more than the band
    assert out["sequence"] and all(
        s["predicted_gain_pct"] > out["threshold_pct"] + out["band_pct"] for s in out["sequence"]
    )
    assert out["sequence"][0]["lever"] == "threads"
    levels = [s["tokens_per_s_per_device"] for s in out["sequence"]]
    assert levels == sorted(levels) and levels[-1] <= out["best"][0]["tokens_per_s_per_device"]
    # the least budget is the campaign's own floor: calibration, a profile and one candidate
    floor = new_campaign_floor(devices=1, calibration_runs=5)
    assert out["calibration_device_hours"] == pytest.approx(floor.calibration_s / 3600)
    assert out["minimum_budget_device_hours"] == minimum_budget_hours(floor) == 0.117
    assert out["forecast_device_hours"] > out["calibration_device_hours"]
    assert out["budget_covers"] is False  # 0.1 device-hours does not buy the forecast
    assert not (tmp_path / "ledger.db").exists()  # nothing launched, nothing written


@pytest.mark.parametrize("calibration_runs", ["5", "7"])
def test_plan_prints_the_least_budget_tune_and_demo_refuse_below(
    calibration_runs: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One floor: ``attune plan``'s least budget is the number ``attune tune`` (and ``attune
    demo``) name when they refuse a budget below it, for the same recipe and calibration."""
    recipe = str(ROOT / "examples/ported-gpt.yaml")
    runs = ["--calibration-runs", calibration_runs]
    assert main(["plan", recipe, *runs]) == 0
    text = " ".join(capsys.readouterr().out.split())
    planned = re.search(r"accepts \(calibration and one candidate\): ([0-9.]+) device-hours", text)
    assert planned is not None, text
    commands = [["tune", recipe, *runs]]
    if calibration_runs == "5":  # the demo calibrates on 5 runs
        commands.append(["demo"])
    for i, command in enumerate(commands):
        workdir = tmp_path / str(i)
        assert main([*command, "--budget", "0.01", "--workdir", str(workdir)]) == 2
        refused = re.search(r"give --budget ([0-9.]+) or more", capsys.readouterr().err)
        assert refused is not None and refused.group(1) == planned.group(1), command
        assert not workdir.exists()
    floor = new_campaign_floor(devices=1, calibration_runs=int(calibration_runs))
    assert float(planned.group(1)) == minimum_budget_hours(floor)


@pytest.mark.slow  # resolves each GPU example through its framework: seconds each
@pytest.mark.parametrize("recipe", EXAMPLES)
def test_every_example_recipe_has_a_plan(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    out = _plan(capsys, str(ROOT / recipe))
    assert out["layouts_priced"] > 0 and out["best"]
    assert all(b["fits"] is not False for b in out["best"])
    assert out["minimum_budget_device_hours"] > out["calibration_device_hours"] > 0
