"""Measure what each layout lever of the embedded workload is worth on this machine.

    python benchmarks/levers.py [--repeats 3] [--steps 12] [--warmup 3] [--no-compile]

Benchmarks the ported example recipe and one single-lever variant per lever, interleaved
(baseline, variant 1, variant 2, ..., repeated) so that machine noise hits all alike. Prints
the median score of each and its ratio to the baseline's median measured in the same run, and
the step-1 loss relative difference (layout levers must not change it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from gate.models import Recipe
from gate.recipe import load_recipe
from runners.bench import DEFAULT_STEPS, DEFAULT_WARMUP, run_bench

ROOT = Path(__file__).resolve().parent.parent
LEVERS: dict[str, dict[str, Any]] = {
    "threads=2": {"threads": 2},
    "activation_checkpointing=false": {"activation_checkpointing": False},
    "attention=sdpa": {"attention": "sdpa"},
    "micro_batch_size=4": {"micro_batch_size": 4},
    "optimizer_impl=foreach": {"optimizer_impl": "foreach"},
    "optimizer_impl=fused": {"optimizer_impl": "fused"},
    "data_parallel_size=2": {"data_parallel_size": 2},
    "compile=true": {"compile": True},
}


def variant(base: Recipe, name: str, change: dict[str, Any]) -> Recipe:
    body = dict(base.body)
    body["config"] = {**body.get("config", {}), **change}
    return base.model_copy(update={"name": f"{base.name}[{name}]", "body": body})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recipe", type=Path, default=ROOT / "examples" / "ported-gpt.yaml")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile (~40 s each)")
    args = p.parse_args()

    base = load_recipe(args.recipe)
    recipes = {"baseline": base}
    for name, change in LEVERS.items():
        if name == "compile=true" and args.no_compile:
            continue
        recipes[name] = variant(base, name, change)
    scores: dict[str, list[float]] = {name: [] for name in recipes}
    loss: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="attune-bench-") as tmp:
        for rep in range(args.repeats):
            for name, recipe in recipes.items():
                result = run_bench(
                    recipe,
                    steps=args.steps,
                    warmup=args.warmup,
                    workdir=Path(tmp) / f"{rep}-{len(scores[name])}-{name}",
                )
                if result.status != "ok" or result.score is None:
                    print(f"{name}: {result.status}: {result.error}", file=sys.stderr)
                    return 1
                scores[name].append(result.score)
                loss.setdefault(name, result.step1_loss or float("nan"))
                print(
                    f"  rep {rep + 1} {name:<32} {result.score:10,.0f} tokens/s/device", flush=True
                )

    base_median = statistics.median(scores["baseline"])
    base_loss = loss["baseline"]
    print(
        f"\n{'lever':<32} {'median tok/s/dev':>16} {'ratio':>7} {'spread':>7} {'step-1 loss d':>13}"
    )
    for name, values in scores.items():
        med = statistics.median(values)
        spread = (max(values) - min(values)) / med
        dloss = abs(loss[name] - base_loss) / base_loss
        print(f"{name:<32} {med:16,.0f} {med / base_median:7.2f} {spread:7.1%} {dloss:13.1e}")
    print(
        f"\n{args.repeats} repeats, {args.steps} steps ({args.warmup} warm-up), medians; "
        "ratio = median / baseline median from this run"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
