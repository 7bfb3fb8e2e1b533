"""``attune plan RECIPE``: what a campaign on this recipe would do, before anything launches.

The recipe is resolved as the gate resolves it; its layout space (the levers the registry
classifies as layout, with what the framework derives) is priced by the step-time model
(``perfmodel/plan.py``); the plan shows the predicted best layouts that fit, the sequence of
one-lever moves the model-guided search would propose toward them (each with its predicted
gain and memory), the campaign's forecast cost and the least budget ``attune tune`` accepts
(calibration plus one candidate: ``gate.budget.new_campaign_floor``, the one floor the campaign
checks a budget against). Predictions are the prior's: a campaign calibrates them on its own
runs (``docs/perf-model.md``), so the sequence is a forecast, not a promise.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from bot.commands.predict import hardware_of
from bot.console import console
from gate.budget import minimum_budget_hours, new_campaign_floor
from gate.noise import FLOOR
from gate.recipe import load_recipe
from gate.registry import load_registry
from perfmodel import predict_step
from perfmodel.calibration import expected_band
from perfmodel.plan import Layout, layouts, lever_values, path_to
from runners.adapters import get_adapter
from runners.bench import DEFAULT_STEPS

STARTUP_S = 60.0
"""Seconds of a run before its first step (launch, initialisation), charged per device."""


def build_plan(
    recipe_path: Path,
    *,
    budget_h: float | None,
    top: int,
    steps: int,
    calibration_runs: int,
    hardware: str | None = None,
) -> dict[str, Any]:
    recipe = load_recipe(recipe_path)
    effective = get_adapter(recipe.framework, path=recipe.path).resolve(recipe)
    registry = load_registry(recipe.framework, effective.framework_version)
    keys = set(registry.layout_sources())
    hw = hardware_of(recipe, hardware)
    memory = recipe.body.get("device_memory_gib")
    memory_gib = None if memory is None else float(memory)
    cores = os.cpu_count() or 1
    space = list(
        layouts(effective, hw, layout_keys=keys, device_memory_gib=memory_gib, cores=cores)
    )
    base = predict_step(effective, hw, device_memory_gib=memory_gib)

    def run_s(layout_step_s: float, world: int) -> float:
        return (STARTUP_S + layout_step_s * steps) * world

    fitting = [x for x in space if x.fits is not False]
    best = sorted(fitting, key=lambda x: -x.tokens_per_s_per_device)[:top]
    # the band once the calibration and profile runs have finished (their residuals: noise)
    band_pct = 100 * math.expm1(expected_band(calibration_runs + 1))
    sequence = path_to(
        lever_values(effective, space),
        space,
        steps=steps,
        threshold_pct=100 * FLOOR,
        band_pct=band_pct,
        cost=lambda x: run_s(x.step_time_s, x.world),
    )
    # calibration as the campaign forecasts it before a run is measured, and its floor: the
    # very numbers `attune tune` checks a budget against
    floor = new_campaign_floor(devices=effective.devices, calibration_runs=calibration_runs)
    candidates_s = sum(s.trial_device_s for s in sequence)
    forecast_s = floor.calibration_s + candidates_s

    def layout_json(x: Layout) -> dict[str, Any]:
        gain = x.tokens_per_s_per_device / base.tokens_per_s_per_device - 1
        return {
            "changes": x.changes,
            "tokens_per_s_per_device": x.tokens_per_s_per_device,
            "predicted_gain_pct": 100 * gain,
            "peak_memory_bytes": x.peak_memory_bytes,
            "fits": x.fits,
        }

    return {
        "recipe": recipe.name,
        "framework": recipe.framework,
        "hardware": hw.name,
        "model_version": base.model_version,
        "baseline": {
            "tokens_per_s_per_device": base.tokens_per_s_per_device,
            "peak_memory_bytes": base.peak_memory_bytes,
            "fits": base.fits,
            "memory": base.memory_reason,
        },
        "layouts_priced": len(space),
        "layouts_fitting": len(fitting),
        "levers": sorted(space[0].levers) if space else [],
        "best": [layout_json(x) for x in best],
        "sequence": [
            {
                "lever": s.lever,
                "from": s.old,
                "to": s.new,
                "predicted_gain_pct": s.gain_pct,
                "tokens_per_s_per_device": s.layout.tokens_per_s_per_device,
                "peak_memory_bytes": s.layout.peak_memory_bytes,
                "trial_device_hours": s.trial_device_s / 3600,
            }
            for s in sequence
        ],
        "agent": "model",
        "band_pct": band_pct,
        "threshold_pct": 100 * FLOOR,
        "forecast_device_hours": forecast_s / 3600,
        "calibration_device_hours": floor.calibration_s / 3600,
        "minimum_budget_device_hours": minimum_budget_hours(floor),
        "budget_device_hours": budget_h,
        "budget_covers": None if budget_h is None else budget_h * 3600 >= forecast_s,
    }


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**30:.1f} GiB"


def plan(
    recipe_path: Path,
    *,
    budget_h: float | None,
    as_json: bool,
    top: int = 5,
    steps: int = DEFAULT_STEPS,
    calibration_runs: int = 5,
    hardware: str | None = None,
) -> int:
    out = build_plan(
        recipe_path,
        budget_h=budget_h,
        top=top,
        steps=steps,
        calibration_runs=calibration_runs,
        hardware=hardware,
    )
    if as_json:
        sys.stdout.write(json.dumps(out, indent=2, default=str) + "\n")
        return 0
    b = out["baseline"]
    console.print(
        f"{out['recipe']} on {out['hardware']} ({out['model_version']}): nothing launched"
    )
    console.print(
        f"  baseline: {b['tokens_per_s_per_device']:,.0f} tokens/s/device predicted; "
        f"memory: {b['memory'] or 'no memory model'}",
        soft_wrap=True,
    )
    console.print(
        f"  layout space: {out['layouts_priced']} layouts of {', '.join(out['levers']) or '-'}"
        f" priced, {out['layouts_fitting']} predicted to fit"
    )
    console.print(f"best predicted layouts (top {len(out['best'])}, predicted to fit):")
    for i, x in enumerate(out["best"], 1):
        changes = ", ".join(f"{k}={v}" for k, v in x["changes"].items()) or "(the baseline)"
        console.print(
            f"  {i}. {x['tokens_per_s_per_device']:,.0f} tokens/s/device "
            f"({x['predicted_gain_pct']:+.1f}%), peak {_gib(x['peak_memory_bytes'])}: {changes}",
            soft_wrap=True,
        )
    console.print(
        f"what the model-guided search would propose (one lever at a time, each predicted to "
        f"beat the {out['threshold_pct']:.0f}% noise floor by more than the model's "
        f"+-{out['band_pct']:.1f}% band after calibration):"
    )
    if not out["sequence"]:
        console.print("  nothing: no one-lever move is predicted to beat the noise by the band")
    for i, s in enumerate(out["sequence"], 1):
        console.print(
            f"  {i}. {s['lever']}: {s['from']} -> {s['to']}: {s['predicted_gain_pct']:+.1f}%, "
            f"{s['tokens_per_s_per_device']:,.0f} tokens/s/device, peak "
            f"{_gib(s['peak_memory_bytes'])}, {s['trial_device_hours']:.3g} device-hours",
            soft_wrap=True,
        )
    console.print(
        f"forecast: {out['forecast_device_hours']:.3g} device-hours (calibration and profile "
        f"{out['calibration_device_hours']:.3g}, as the campaign forecasts them before a run is "
        f"measured); the least budget `attune tune` accepts (calibration and one candidate): "
        f"{out['minimum_budget_device_hours']:g} device-hours",
        soft_wrap=True,
    )
    if budget_h is not None:
        covered = "covers" if out["budget_covers"] else "does not cover"
        console.print(f"--budget {budget_h:g} {covered} the forecast")
    return 0
