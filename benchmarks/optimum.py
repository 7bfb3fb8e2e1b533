"""Measure the embedded workload's whole layout space on this machine, once, and cache it.

    python -m benchmarks.optimum [--recipe benchmarks/recipes/tuner-gpt.yaml]
        [--steps 6 --warmup 2] [--top 3 --repeats 3] [--compile top|all] [--compile-top 2]

Every layout of the space (``bot/agents/levers/layout_space.py``: threads x ranks within the cores,
micro-batch sizes, recompute, attention, compile, optimizer implementation) is benchmarked
with the real harness (``runners.bench.run_bench``), ``--passes`` times, each pass in its own
seeded shuffled order so that a drift of the machine's load does not line up with the levers;
a layout's score is its fastest run. Then the top layouts (and the
baseline's) are run again, ``--repeats`` runs each: their spread is the table's noise and their
median its optimum. torch.compile costs ~40 s a run on 2 cores, so by default
(``--compile top``) compile=true is measured once on the ``--compile-top`` leaders and the
baseline's layout only, and every other compile=true layout is estimated from its
compile=false twin by the median ratio measured (``OptimumTable.lookup``); ``--compile all``
measures all of them.

The table is saved after every run under ``$ATTUNE_CACHE_DIR/optimum`` (default
``~/.cache/attune/optimum``), keyed by the machine's fingerprint: running again resumes an
unfinished sweep and costs nothing once it is complete.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.optimum_table import Machine, Measurement, OptimumTable, cpu_model, load, save
from bot.agents.levers.layout_space import Layout, embedded_layouts, layout_of
from gate.models import Recipe
from gate.recipe import load_recipe
from runners.adapters import get_adapter
from runners.bench import run_bench
from runners.embedded.config import WORKLOAD_VERSION

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "benchmarks" / "recipes" / "tuner-gpt.yaml"
STEPS, WARMUP = 6, 2
"""Shorter than a campaign's default: the sweep runs a few hundred layouts."""


def layout_recipe(base: Recipe, layout: Layout) -> Recipe:
    body = dict(base.body)
    body["config"] = {**body.get("config", {}), **layout}
    return base.model_copy(update={"name": f"{base.name}[sweep]", "body": body})


def machine_of(base: Recipe, *, steps: int, warmup: int, cores: int) -> Machine:
    effective = get_adapter(base.framework, path=base.path).resolve(base)
    return Machine(
        cpu_model=cpu_model(),
        cores=cores,
        torch=torch.__version__,
        workload_version=WORKLOAD_VERSION,
        recipe=effective.fingerprint(),
        steps=steps,
        warmup=warmup,
    )


def run_layout(
    base: Recipe, layout: Layout, *, steps: int, warmup: int, profile: bool = False
) -> Measurement:
    """One real benchmark run of ``layout``, as a one-run measurement."""
    with tempfile.TemporaryDirectory(prefix="attune-optimum-") as tmp:
        result = run_bench(
            layout_recipe(base, layout),
            steps=steps,
            warmup=warmup,
            workdir=Path(tmp) / "run",
            profile=profile,
        )
    return Measurement(
        layout=dict(layout),
        scores=[result.score] if result.score is not None else [],
        device_seconds=[result.device_seconds],
        step1_loss=result.step1_loss,
        steps=result.steps,
        status=result.status,
        error=(result.error or "")[-500:] or None,
        profile=result.profile,
        profile_seconds=result.device_seconds if profile else None,
    )


Runner = Callable[[Layout], Measurement]


def measure(
    table: OptimumTable,
    layouts: list[Layout],
    runs: int,
    run: Runner,
    root: Path | None,
    say: Callable[[str], None],
) -> None:
    """Bring each of ``layouts`` to ``runs`` runs (a failed layout is not retried)."""
    for i, layout in enumerate(layouts, 1):
        entry = table.get(layout)
        while entry is None or (entry.ok and len(entry.scores) < runs):
            one = run(layout)
            if entry is None:
                entry = one
            elif one.ok:
                entry.scores += one.scores
                entry.device_seconds += one.device_seconds
                entry.steps = entry.steps or one.steps
            else:
                entry.status, entry.error = one.status, one.error
            table.put(entry)
            save(table, root)
            score = f"{entry.scores[-1]:9,.0f}" if entry.scores else f"{entry.status:>9}"
            say(f"[{i}/{len(layouts)}] {score} tokens/s/device  {layout}")


def sweep(
    base: Recipe,
    *,
    steps: int = STEPS,
    warmup: int = WARMUP,
    cores: int,
    top: int = 3,
    repeats: int = 3,
    compile_top: int = 2,
    compile_all: bool = False,
    passes: int = 1,
    root: Path | None = None,
    run: Runner | None = None,
    say: Callable[[str], None] = print,
) -> OptimumTable:
    """The cached table of this machine, measuring whatever it still lacks."""
    machine = machine_of(base, steps=steps, warmup=warmup, cores=cores)
    values = get_adapter(base.framework, path=base.path).resolve(base).values
    table = load(machine, root) or OptimumTable(machine=machine, baseline=layout_of(values))
    runner = run or (lambda layout: run_layout(base, layout, steps=steps, warmup=warmup))
    space = embedded_layouts(values, cores)
    first = [lay for lay in space if compile_all or not lay["compile"]]
    for k in range(passes):  # whole passes, each in its own order: load drifts hit them apart
        random.Random(k).shuffle(first)
        measure(table, first, k + 1, runner, root, say)
    leaders = [m.layout for m in table.ranked()[:top]]
    again = [*leaders, table.baseline] if table.baseline not in leaders else leaders
    measure(table, again, repeats, runner, root, say)
    if not compile_all:
        twins = [*leaders[:compile_top], table.baseline]
        twins = [{**lay, "compile": True} for lay in twins if not lay["compile"]]
        measure(table, twins, 1, runner, root, say)
    return table


def summary(table: OptimumTable, rows: int = 10) -> str:
    """The optimum, the baseline, the noise and the fastest layouts, as text."""
    best, base = table.best(), table.baseline_score()
    factor = table.compile_factor()
    runs = sum(len(m.scores) for m in table.entries.values())
    lines = [
        f"machine: {table.machine.cpu_model}, {table.machine.cores} cores, torch "
        f"{table.machine.torch}; {table.machine.steps} steps ({table.machine.warmup} warm-up)",
        f"{len(table.entries)} layouts measured, {runs} runs; noise cv "
        f"{table.noise_cv():.1%} (pooled over the repeated layouts)",
        f"baseline {base:,.0f} tokens/s/device; optimum {best.score or 0:,.0f} "
        f"({(best.score or 0) / base:.2f}x): {best.layout}",
    ]
    if factor is not None:
        lines.append(f"compile=true: x{factor[0]:.2f} score, x{factor[1]:.2f} cost (median)")
    for m in table.ranked()[:rows]:
        lines.append(f"  {m.score or 0:9,.0f} ({len(m.scores)} runs)  {m.layout}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--recipe", type=Path, default=RECIPE)
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--warmup", type=int, default=WARMUP)
    p.add_argument("--top", type=int, default=3, help="layouts run again for the noise")
    p.add_argument("--repeats", type=int, default=3, help="runs of each top layout")
    p.add_argument("--compile", choices=["top", "all"], default="top")
    p.add_argument("--compile-top", type=int, default=2, help="leaders measured compiled")
    p.add_argument("--cores", type=int, default=None, help="default: this machine's")
    p.add_argument("--passes", type=int, default=1, help="runs of every layout (default 1)")
    args = p.parse_args(argv)
    base = load_recipe(args.recipe)
    table = sweep(
        base,
        steps=args.steps,
        warmup=args.warmup,
        cores=args.cores or os.cpu_count() or 1,
        top=args.top,
        repeats=args.repeats,
        compile_top=args.compile_top,
        passes=args.passes,
        compile_all=args.compile == "all",
        say=lambda line: print(line, flush=True),
    )
    print(summary(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
