"""How good is attune's tuning? The rules and model-guided agents against random search and
Optuna TPE, at equal budget, measured against the exhaustive optimum of the embedded
workload's layout space.

    python -m benchmarks.tuner [--campaigns 3] [--budget 0.25] [--agents rules,model,random,tpe]
        [--cores N] [--quick] [--live] [--table FILE] [--out DIR] [--plot FILE]

1. The machine's table (``benchmarks/optimum.py``): every layout of the space (for ``--cores``
   cores) measured with the real harness, cached per machine; measured now if the cache misses
   (25 minutes for 1 core, well over an hour for 2 on a busy 2-core machine), resumed if it is
   incomplete.
2. ``--campaigns`` campaigns per agent, each in its own directory with its own ledger and local
   forge, through the real campaign (calibration, pre-launch gate, budget, judgement, merges).
   The runs are replayed from the table (``table_executor.py``: measured median score times a
   seeded draw of the measured noise, charged the measured device-seconds); ``--live`` runs
   them for real instead. Random search and TPE get seeds 0, 1, 2, ...; the rules agent is
   deterministic, so its campaigns differ by their noise draws.
3. Per agent, medians over its campaigns: final speedup (the table's score of the final
   incumbent's layout over the baseline's), fraction of the optimum, device-hours until the
   incumbent reached 90% and 95% of the optimum; printed as a markdown table, with the ratios
   of device-hours to 95% (the compass: rules <= 1/3 of random's and TPE's), and a plot of
   speedup against device-hours, one line (the median) per agent.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import optimum
from benchmarks.optimum_table import OptimumTable, save
from benchmarks.table_executor import TableExecutor
from benchmarks.tuner_metrics import CampaignResult, Curve, agent_row, table
from benchmarks.tuner_plot import plot
from bot.agents.levers.layout_space import Layout, layout_of
from bot.agents.model_guided import ModelGuidedAgent
from bot.agents.random_search import RandomSearchAgent
from bot.agents.rules import RulesAgent
from bot.agents.tpe import TPEAgent
from bot.campaign.executor import LocalExecutor, campaign_executor
from bot.campaign.setup import build_campaign, open_campaign
from bot.forges.local import LocalForge
from bot.interfaces import Agent
from bot.state.model import CampaignParams
from gate import budget, sequential
from gate.ledger import Ledger, LedgerEvent
from gate.recipe import load_recipe, parse_recipe
from gate.registry import Registry
from runners.adapters import get_adapter

AGENT_NAMES = ("rules", "model", "random", "tpe")


def make_agent(name: str, seed: int) -> Agent:
    if name == "random":
        return RandomSearchAgent(seed=seed)
    if name == "tpe":
        return TPEAgent(seed=seed)
    if name == "rules":
        return RulesAgent()
    if name == "model":
        return ModelGuidedAgent()
    raise ValueError(f"no baseline benchmark for agent {name!r} (known: {AGENT_NAMES})")


def candidate_layouts(events: list[LedgerEvent]) -> dict[str, Layout]:
    """Each proposed candidate's layout, from the recipe text the ledger recorded."""
    out = {}
    for e in events:
        if e.kind == "candidate_proposed":
            recipe = parse_recipe(e.payload["recipe_text"], path="candidate.yaml")
            out[e.payload["trial"]] = layout_of(
                get_adapter(recipe.framework).resolve(recipe).values
            )
    return out


def curve_of(events: list[LedgerEvent], tab: OptimumTable) -> Curve:
    """The incumbent's true speedup (from the table) after every charge and every merge."""
    layouts = candidate_layouts(events)
    base = tab.baseline_score()
    spent, speedup, curve = 0.0, 1.0, []
    for e in events:
        if e.kind == "trial_finished":
            spent += budget.trial_charge(e) / 3600
            curve.append((spent, speedup))
        elif e.kind == "pr_merged":
            found = tab.lookup(layouts[e.payload["trial"]])
            speedup = (found[0].score or 0.0) / base if found else speedup
            curve.append((spent, speedup))
    return curve


def run_one(
    agent: str,
    seed: int,
    *,
    tab: OptimumTable,
    recipe_path: Path,
    workdir: Path,
    budget_h: float,
    max_trials: int,
    live: bool,
    noise_cv: float | None = None,
    pairs: tuple[int, int] = (sequential.MAX_PAIRS, sequential.CONFIRM_PAIRS),
) -> CampaignResult:
    """One campaign of ``agent`` in ``workdir``; its result from its own ledger."""
    base = load_recipe(recipe_path)
    steps, warmup = tab.machine.steps, tab.machine.warmup
    name = f"{agent}-{seed}"
    workdir.mkdir(parents=True, exist_ok=True)
    executors: list[LocalExecutor] = []
    with Ledger(workdir / "ledger.db") as ledger:
        open_campaign(
            ledger,
            name,
            recipe_text=recipe_path.read_text(),
            recipe_path=f"recipes/{recipe_path.name}",
            budget_hours=budget_h,
            steps=steps,
            warmup=warmup,
            agent=agent,
            max_trials=max_trials,
            max_pairs=pairs[0],
            confirm_pairs=pairs[1],
        )

        make = (
            campaign_executor(ledger, name, workdir)
            if live
            else campaign_executor(
                ledger,
                name,
                workdir,
                make=TableExecutor,
                table=tab,
                noise_cv=tab.noise_cv() if noise_cv is None else noise_cv,
                seed=f"campaign-{seed}",  # common draws: agents differ by choices
                live=lambda layout, profile: optimum.run_layout(
                    base, layout, steps=steps, warmup=warmup, profile=profile
                ),
                on_change=save,
            )
        )

        def executor(registry: Registry, params: CampaignParams) -> LocalExecutor:
            made = make(registry, params)
            executors.append(made)
            return made

        with LocalForge(workdir / "forge") as forge:
            campaign = build_campaign(
                ledger, name, forge=forge, executor=executor, agent=make_agent(agent, seed)
            )
            campaign.ctx.cores = tab.machine.cores
            state = campaign.run()
        events = ledger.events(name)
    estimated = executors[0].estimated if isinstance(executors[0], TableExecutor) else []
    return CampaignResult(
        agent=agent,
        seed=seed,
        curve=curve_of(events, tab),
        reported_speedup=state.speedup,
        trials=len(state.candidates),
        estimated=len(estimated),
    )


def bench(
    tab: OptimumTable,
    *,
    agents: list[str],
    campaigns: int,
    budget_h: float,
    max_trials: int,
    recipe_path: Path,
    out: Path,
    live: bool = False,
    noise_cv: float | None = None,
    pairs: tuple[int, int] = (sequential.MAX_PAIRS, sequential.CONFIRM_PAIRS),
    say: Any = print,
) -> dict[str, list[CampaignResult]]:
    results: dict[str, list[CampaignResult]] = {a: [] for a in agents}
    for seed in range(campaigns):  # interleaved, so a drift of the machine hits all agents
        for agent in agents:
            started = time.monotonic()
            result = run_one(
                agent,
                seed,
                tab=tab,
                recipe_path=recipe_path,
                workdir=out / f"{agent}-{seed}",
                budget_h=budget_h,
                max_trials=max_trials,
                live=live,
                noise_cv=noise_cv,
                pairs=pairs,
            )
            results[agent].append(result)
            say(
                f"{agent}-{seed}: {result.final:.2f}x after {result.hours:.4f} device-h, "
                f"{result.trials} candidates ({time.monotonic() - started:.0f} s)"
            )
    return results


def report(results: dict[str, list[CampaignResult]], tab: OptimumTable, budget_h: float) -> str:
    best = tab.best().score or 0.0
    optimum_speedup = best / tab.baseline_score()
    rows = [agent_row(a, rs, optimum_speedup) for a, rs in results.items() if rs]
    return table(rows, optimum=optimum_speedup, budget_h=budget_h)


def machine_line(tab: OptimumTable) -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return (
        f"machine: {tab.machine.cpu_model}, nproc {os.cpu_count()}, torch {tab.machine.torch}; "
        f"load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (1/5/15 min) at the end; "
        f"table noise cv {tab.noise_cv():.1%}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--campaigns", type=int, default=3, help="campaigns per agent (default 3)")
    p.add_argument("--budget", type=float, default=0.25, help="device-hours per campaign")
    p.add_argument("--agents", default=",".join(AGENT_NAMES))
    p.add_argument("--max-trials", type=int, default=40)
    p.add_argument("--quick", action="store_true", help="1 campaign each, 3 candidates at most")
    p.add_argument("--live", action="store_true", help="run every trial for real")
    p.add_argument("--table", type=Path, help="a table JSON instead of this machine's cache")
    p.add_argument(
        "--noise-cv",
        type=float,
        default=None,
        help="replayed run-to-run noise (default: the table's measured noise)",
    )
    p.add_argument("--cores", type=int, default=None, help="cores a trial may use (default: all)")
    p.add_argument("--recipe", type=Path, default=optimum.RECIPE)
    p.add_argument("--steps", type=int, default=optimum.STEPS, help="the table's run length")
    p.add_argument("--max-pairs", type=int, default=sequential.MAX_PAIRS, help="A/B cap")
    p.add_argument("--confirm-pairs", type=int, default=sequential.CONFIRM_PAIRS)
    p.add_argument("--warmup", type=int, default=optimum.WARMUP)
    p.add_argument("--passes", type=int, default=1, help="the sweep's runs of every layout")
    p.add_argument("--out", type=Path, default=None, help="default: runs/tuner-bench-<time>")
    p.add_argument("--plot", type=Path, default=None, help="default: OUT/tuner-bench.png")
    args = p.parse_args(argv)
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    for a in agents:
        if a not in AGENT_NAMES:
            p.error(f"--agents: unknown agent {a!r} (known: {', '.join(AGENT_NAMES)})")
    if args.campaigns < 1 or args.budget <= 0:
        p.error("--campaigns must be >= 1 and --budget positive")
    campaigns, max_trials = (1, 3) if args.quick else (args.campaigns, args.max_trials)
    if args.table is not None:
        tab = OptimumTable.model_validate_json(args.table.read_text())
    else:
        cores = args.cores or os.cpu_count() or 1
        tab = optimum.sweep(
            load_recipe(args.recipe),
            steps=args.steps,
            warmup=args.warmup,
            cores=cores,
            passes=args.passes,
            say=lambda x: print(x, flush=True),
        )
    out = args.out or Path("runs") / time.strftime("tuner-bench-%Y%m%d-%H%M%S")
    results = bench(
        tab,
        agents=agents,
        campaigns=campaigns,
        budget_h=args.budget,
        max_trials=max_trials,
        recipe_path=args.recipe,
        out=out,
        live=args.live,
        noise_cv=args.noise_cv,
        pairs=(args.max_pairs, args.confirm_pairs),
    )
    text = report(results, tab, args.budget)
    mode = "live runs" if args.live else "runs replayed from the measured table"
    if not args.live and args.noise_cv is not None:
        mode += f" with an assumed noise cv of {args.noise_cv:.1%}"
    mode += f"; A/B cap {args.max_pairs} pairs, {args.confirm_pairs} confirmation pairs"
    text += f"\n{mode}; {machine_line(tab)}"
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuner-bench.md").write_text(text + "\n")
    target = args.plot or out / "tuner-bench.png"
    best = (tab.best().score or 0.0) / tab.baseline_score()
    plot(results, optimum=best, path=target, title=f"{mode}; budget {args.budget:g} device-h")
    print(f"plot: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
