"""How close did a campaign get to the optimum of its layout space? A finished campaign (the
demo's, or any embedded-workload `attune tune`) against the exhaustive table of this machine.

    python -m benchmarks.optimum --recipe examples/ported-gpt.yaml --steps 12 --warmup 3
    python -m benchmarks.demo_optimum runs/demo-<time> [--pairs 5]

The table (``benchmarks/optimum.py``) must have been measured for the campaign's baseline
recipe, run length and cores; this says which command builds it when it is missing. Two
measures, because the table's score of a layout is its fastest run and the campaign's noise
threshold is about means:

- **from the table**: the winner's layout's score over the optimum's;
- **side by side** (``--pairs N``, default 5; 0 skips it): the winner's layout and the optimum's
  run alternately, N pairs, and the mean paired ratio winner / optimum with its 95% interval.

The campaign reached the optimum "within one noise threshold" when winner / optimum >=
1 - threshold, the threshold being the one the campaign judged its last candidates with.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks import optimum
from benchmarks.optimum_table import OptimumTable, load
from bot.agents.levers.layout_space import Layout, layout_of
from bot.campaign.judgement import judging_noise
from bot.state.fold import fold
from bot.state.model import CampaignState
from gate import sequential
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.models import Recipe
from gate.recipe import parse_recipe
from runners.adapters import get_adapter


def campaign_of(workdir: Path) -> CampaignState:
    ledger_path = workdir / "ledger.db"
    if not ledger_path.exists():
        raise AttuneError("no ledger here: pass a campaign's work directory", path=str(workdir))
    with Ledger(ledger_path) as ledger:
        events = ledger.events()
    if not events or events[0].kind != "campaign_opened":
        raise AttuneError("the ledger holds no campaign", path=str(ledger_path))
    return fold(events[0].campaign, events)


def layout_from_text(text: str) -> Layout:
    recipe = parse_recipe(text, path="recipe.yaml")
    return layout_of(get_adapter(recipe.framework).resolve(recipe).values)


def table_for(state: CampaignState, base: Recipe, cores: int) -> OptimumTable:
    assert state.params is not None
    steps, warmup = state.params.steps, state.params.warmup
    table = load(optimum.machine_of(base, steps=steps, warmup=warmup, cores=cores))
    if table is None:
        raise AttuneError(
            "this machine has no optimum table for the campaign's recipe and run length: "
            f"python -m benchmarks.optimum --recipe RECIPE --steps {steps} --warmup {warmup} "
            f"--cores {cores}"
        )
    return table


def side_by_side(
    base: Recipe, winner: Layout, best: Layout, pairs: int, steps: int, warmup: int
) -> sequential.Interval:
    """``pairs`` interleaved (optimum, winner) runs: the winner's ratio to the optimum."""
    runs: list[tuple[float, float]] = []
    for i in range(pairs):
        a = optimum.run_layout(base, best, steps=steps, warmup=warmup)
        b = optimum.run_layout(base, winner, steps=steps, warmup=warmup)
        if not (a.scores and b.scores):
            raise AttuneError(f"pair {i + 1} did not run: {a.status} / {b.status}")
        runs.append((a.scores[0], b.scores[0]))
        print(f"  pair {i + 1}: optimum {a.scores[0]:,.0f}, winner {b.scores[0]:,.0f}", flush=True)
    return sequential.confidence_interval(runs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workdir", type=Path, help="a finished campaign's work directory")
    p.add_argument("--pairs", type=int, default=5, help="side-by-side pairs (0: none)")
    p.add_argument("--cores", type=int, default=None, help="the table's cores (default: all)")
    p.add_argument("--table", type=Path, default=None, help="a table JSON, not this machine's")
    args = p.parse_args(argv)
    try:
        state = campaign_of(args.workdir)
        assert state.params is not None
        base = parse_recipe(state.params.recipe_text, path=state.params.recipe_path)
        if args.table is not None:
            table = OptimumTable.model_validate_json(args.table.read_text())
        else:
            table = table_for(state, base, args.cores or os.cpu_count() or 1)
        winner = layout_from_text(state.incumbent_recipe_text)
        found = table.lookup(winner)
        best = table.best()
        threshold = judging_noise(state).threshold
        if found is None or found[0].score is None:
            raise AttuneError(f"the table has no score for the winner's layout {winner}")
        ratio = found[0].score / (best.score or 1.0)
        base_score = table.baseline_score()
        print(f"campaign {state.campaign}: winner {state.incumbent}, threshold {threshold:.1%}")
        print(f"  winner  {found[0].score:9,.0f} ({found[0].score / base_score:.2f}x)  {winner}")
        print(
            f"  optimum {best.score or 0:9,.0f} ({(best.score or 0) / base_score:.2f}x)  "
            f"{best.layout}"
        )
        verdict = "within" if ratio >= 1 - threshold else "NOT within"
        print(f"from the table: {ratio:.1%} of the optimum, {verdict} one noise threshold")
        if args.pairs > 0 and winner != best.layout:
            interval = side_by_side(
                base, winner, best.layout, args.pairs, state.params.steps, state.params.warmup
            )
            verdict = "within" if interval.speedup >= 1 - threshold else "NOT within"
            low = f"{interval.low:.1%}" if interval.low is not None else "-"
            high = f"{interval.high:.1%}" if interval.high is not None else "-"
            print(
                f"side by side: {interval.speedup:.1%} of the optimum (95% CI {low} to {high}, "
                f"{interval.pairs} pairs), {verdict} one noise threshold"
            )
    except AttuneError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
