"""``attune predict RECIPE``: the step-time model's prediction for one recipe, before any launch.

The recipe is resolved to its effective config by its framework's adapter (as the gate does),
then priced by ``perfmodel.predict_step`` on the hardware named by ``--hardware``, else the
recipe's ``hardware:`` key, else its ``gpu_arch`` and ``device_memory_gib`` (the embedded CPU
workload: the ``cpu`` part; a torchtitan recipe without ``gpu_arch``: an H100, as its
resolution assumes). ``--json`` prints one object.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bot.console import console
from gate.models import Recipe
from gate.recipe import load_recipe
from perfmodel import Part, StepPrediction, predict_step
from perfmodel.hardware import recipe_part
from runners.adapters import get_adapter


def hardware_of(recipe: Recipe, name: str | None) -> Part:
    """The part a prediction is for: ``--hardware``, else the recipe's ``hardware:``, else its
    ``gpu_arch`` with ``device_memory_gib`` (``perfmodel.hardware.recipe_part``)."""
    return recipe_part(recipe.framework, recipe.body, name)


def prediction_json(recipe: Recipe, prediction: StepPrediction) -> dict[str, Any]:
    return {
        "recipe": recipe.name,
        "framework": recipe.framework,
        "hardware": prediction.hardware,
        "model_version": prediction.model_version,
        "tokens_per_s_per_device": prediction.tokens_per_s_per_device,
        "step_time_s": prediction.step_time_s,
        "mfu": prediction.mfu,
        "peak_memory_bytes": prediction.peak_memory_bytes,
        "capacity_bytes": prediction.capacity_bytes,
        "fits": prediction.fits,
        "memory": prediction.memory_reason,
        "breakdown": prediction.breakdown,
        "world_size": prediction.world,
        "tokens_per_step": prediction.tokens_per_step,
        "notes": prediction.notes,
    }


def predict(recipe_path: Path, *, hardware: str | None, as_json: bool) -> int:
    recipe = load_recipe(recipe_path)
    effective = get_adapter(recipe.framework, path=recipe.path).resolve(recipe)
    hw = hardware_of(recipe, hardware)
    memory = recipe.body.get("device_memory_gib")
    prediction = predict_step(
        effective, hw, device_memory_gib=None if memory is None else float(memory)
    )
    out = prediction_json(recipe, prediction)
    if as_json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return 0
    console.print(f"{recipe.name} on {out['world_size']} x {hw.name} ({out['model_version']})")
    console.print(
        f"  {out['tokens_per_s_per_device']:,.0f} tokens/s/device, step {out['step_time_s']:.3f} s,"
        f" MFU {out['mfu']:.1%}"
    )
    total = prediction.step_time_s
    for name, seconds in prediction.breakdown.items():
        if seconds > 0:
            console.print(f"  {name:10} {seconds:9.4f} s  {seconds / total:6.1%}")
    console.print(f"  memory: {prediction.memory_reason or 'no memory model for this framework'}")
    for note in prediction.notes:
        console.print(f"  note: {note}")
    return 0
