"""The tuner benchmark on realistic GPU layout spaces, on the SIMULATED cluster
(``--backend sim``, ``runners/sim/``): whole campaigns through the real campaign (gate, memory
model and its calibration, budget, judgement, forge, ledger), whose runs are simulated.

    python -m benchmarks.tuner_sim [--spaces llama3-8b,llama3-70b,mixtral-8x7b]
        [--agents rules,model,random,tpe] [--seeds 10] [--trials 24] [--spreads 0.05,0.15,0.30]
        [--spread-space llama3-8b] [--out DIR]

1. Per space (``benchmarks/sim_space.py``: a ported recipe and the levers its space varies),
   the exhaustive optimum of the simulated TRUTH (``runners.sim.truth``, one cluster seed per
   space), computed once over every layout Megatron-LM accepts.
2. Per agent (``--agents``; a factory per name in ``AGENTS``, so more agents plug in) and per
   seed, one campaign at an equal budget: ``--trials`` times the baseline's true cost of one run
   (calibration and profiles are paid from it). The seed changes the runs' noise (and the
   search agents' draws); the cluster stays the same.
3. Per agent, medians over seeds: final TRUE speedup of the incumbent (truth of its layout over
   the baseline's), fraction of the optimum, device-hours until the incumbent truly reached
   90% / 95% of the optimum; and the refusals before launch (gate rejects, predicted OOM,
   other refusals) and OOMs paid, summed over the campaigns. A plot per space.
4. ``--spreads``: the same on one space with the truth's deviation spread changed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.sim_agents import SpaceRandomAgent, SpaceTPEAgent
from benchmarks.sim_space import SPACES, Space, Truth, TruthTable
from benchmarks.tuner_metrics import CampaignResult, Curve, agent_row, table
from benchmarks.tuner_plot import plot
from bot.agents.model_guided import ModelGuidedAgent
from bot.agents.rules import RulesAgent
from bot.campaign.executor import LocalExecutor
from bot.campaign.setup import build_campaign, open_campaign
from bot.forges.local import LocalForge
from bot.interfaces import Agent
from gate.events_campaign import CampaignOpened as CampaignParams
from gate.ledger import Ledger, LedgerEvent
from gate.registry import Registry
from runners.sim.backend import SimBackend
from runners.sim.truth import STARTUP_S, SimParams

AgentFactory = Callable[[Space, int], Agent]
AGENTS: dict[str, AgentFactory] = {
    "rules": lambda space, seed: RulesAgent(),
    "random": lambda space, seed: SpaceRandomAgent(space, seed),
    "tpe": lambda space, seed: SpaceTPEAgent(space, seed),
    "model": lambda space, seed: ModelGuidedAgent(),
}
"""Agents by name; another agent joins the benchmark by adding its factory here."""
CLUSTER_SEED = 2026
"""The simulated cluster of every space (its truth's seed): one fixed cluster, many campaigns."""


@dataclass
class SimResult:
    result: CampaignResult
    gate_rejected: int
    predicted_oom: int
    refused_other: int
    ooms: int


def _count(events: list[LedgerEvent]) -> tuple[int, int, int, int]:
    gate = sum(e.kind == "gate_checked" and e.payload.get("verdict") == "reject" for e in events)
    refusals = [e.payload.get("reason") for e in events if e.kind == "launch_refused"]
    refused = sum(e.kind == "proposal_refused" for e in events)
    ooms = sum(e.kind == "trial_finished" and e.payload.get("status") == "oom" for e in events)
    oom_refused = sum(r == "predicted_oom" for r in refusals)
    return gate, oom_refused, refused + len(refusals) - oom_refused, ooms


def curve_of(events: list[LedgerEvent], truth: Truth, base: float) -> Curve:
    """The incumbent's TRUE speedup after every charge and every merge."""
    texts = {
        e.payload["trial"]: e.payload["recipe_text"]
        for e in events
        if e.kind == "candidate_proposed"
    }
    spent, speedup, curve = 0.0, 1.0, []
    for e in events:
        if e.kind == "trial_finished":
            p = (
                e.payload
            )  # the one formula of spend (gate.budget): (release - allocation) x devices
            spent += max(0.0, p["released_at"] - p["allocated_at"]) * p["devices"] / 3600
            curve.append((spent, speedup))
        elif e.kind == "pr_merged":
            found = truth.of_text(texts[e.payload["trial"]])
            speedup = found.tokens_per_s_per_device / base if found else speedup
            curve.append((spent, speedup))
    return curve


def run_one(
    agent: str,
    seed: int,
    *,
    space: Space,
    truth: Truth,
    tab: TruthTable,
    budget_h: float,
    workdir: Path,
) -> SimResult:
    name = f"{agent}-{seed}"
    params = truth.params.model_copy(update={"noise_seed": seed})
    workdir.mkdir(parents=True, exist_ok=True)
    with Ledger(workdir / "ledger.db") as ledger:
        open_campaign(
            ledger,
            name,
            recipe_text=space.recipe.read_text(),
            recipe_path=f"recipes/{space.recipe.name}",
            budget_hours=budget_h,
            steps=space.steps,
            warmup=space.warmup,
            agent=agent if agent in ("rules", "model", "random", "tpe") else "rules",
            max_trials=60,
            max_pairs=3,
            confirm_pairs=1,
            backend="sim",
            origin={"simulation": params.model_dump()},
        )
        backend = SimBackend(params)

        def executor(registry: Registry, p: CampaignParams) -> LocalExecutor:
            return LocalExecutor(
                ledger=ledger,
                campaign=name,
                registry=registry,
                workdir=workdir,
                budget_device_seconds=p.budget_device_hours * 3600,
                steps=p.steps,
                warmup=p.warmup,
                backend=backend,
            )

        with LocalForge(workdir / "forge") as forge:
            campaign = build_campaign(
                ledger, name, forge=forge, executor=executor, agent=AGENTS[agent](space, seed)
            )
            state = campaign.run()
        events = ledger.events(name)
    result = CampaignResult(
        agent=agent,
        seed=seed,
        curve=curve_of(events, truth, tab.baseline.tokens_per_s_per_device),
        reported_speedup=state.speedup,
        trials=len(state.candidates),
    )
    return SimResult(result, *_count(events))


def run_space(
    space: Space,
    *,
    agents: list[str],
    seeds: int,
    trials: float,
    spread: float,
    out: Path,
    say: Callable[[str], None] = print,
    memory_factor: float = SimParams().memory_factor,
) -> tuple[TruthTable, dict[str, list[SimResult]], float]:
    params = SimParams(seed=CLUSTER_SEED, spread=spread, memory_factor=memory_factor)
    truth = Truth(space, params)
    started = time.monotonic()
    tab = truth.table()
    best_layout, _ = tab.best()
    say(
        f"{space.name} (spread {spread}): {len(tab.rows)} layouts accepted, {tab.refused} "
        f"refused by Megatron-LM, {sum(r[1].fits for r in tab.rows)} fit; optimum "
        f"{tab.optimum_speedup:.2f}x at {best_layout} ({time.monotonic() - started:.0f} s)"
    )
    run_s = STARTUP_S + space.steps * tab.baseline.step_time_s
    budget_h = trials * run_s * tab.baseline.world / 3600
    results: dict[str, list[SimResult]] = {a: [] for a in agents}
    for seed in range(seeds):
        for agent in agents:
            began = time.monotonic()
            r = run_one(
                agent,
                seed,
                space=space,
                truth=truth,
                tab=tab,
                budget_h=budget_h,
                workdir=out / f"{space.name}-s{spread}" / f"{agent}-{seed}",
            )
            results[agent].append(r)
            say(
                f"  {agent}-{seed}: {r.result.final:.2f}x true after {r.result.hours:.1f} "
                f"device-h, {r.result.trials} candidates, {r.ooms} OOMs "
                f"({time.monotonic() - began:.0f} s)"
            )
    return tab, results, budget_h


def space_report(tab: TruthTable, results: dict[str, list[SimResult]], budget_h: float) -> str:
    optimum = tab.optimum_speedup
    rows = [agent_row(a, [r.result for r in rs], optimum) for a, rs in results.items() if rs]
    text = table(rows, optimum=optimum, budget_h=budget_h)
    lines = [
        text,
        "",
        "| agent | gate rejects | predicted OOM refused | other refusals | OOMs paid | median "
        "candidates |",
        "|---|---|---|---|---|---|",
    ]
    for agent, rs in results.items():
        if rs:
            lines.append(
                f"| {agent} | {sum(r.gate_rejected for r in rs)} | "
                f"{sum(r.predicted_oom for r in rs)} | {sum(r.refused_other for r in rs)} | "
                f"{sum(r.ooms for r in rs)} | {statistics.median(r.result.trials for r in rs):g} |"
            )
    pred_layout, pred = tab.predicted_best()
    lines.append("")
    lines.append(
        f"attune's own step-time model ranks {pred_layout} first: "
        f"{pred.tokens_per_s_per_device / tab.baseline.tokens_per_s_per_device:.2f}x in truth "
        f"({pred.tokens_per_s_per_device / tab.best()[1].tokens_per_s_per_device:.1%} of the "
        "optimum)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spaces", default=",".join(SPACES))
    p.add_argument("--agents", default="rules,model,random,tpe")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--trials", type=float, default=24.0, help="budget in baseline runs")
    p.add_argument("--spread", type=float, default=0.15)
    p.add_argument("--spreads", default="0.05,0.15,0.30", help="'' for none")
    p.add_argument("--spread-space", default="llama3-8b")
    p.add_argument(
        "--memory-factor",
        type=float,
        default=SimParams().memory_factor,
        help="true peak memory over the gate's memory model's (above 1: the model is "
        "optimistic and some layouts it passes die of out-of-memory)",
    )
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    agents = [a for a in args.agents.split(",") if a]
    spaces = [s for s in args.spaces.split(",") if s]
    for a in agents:
        if a not in AGENTS:
            p.error(f"--agents: unknown agent {a!r} (known: {', '.join(AGENTS)})")
    for s in [*spaces, args.spread_space]:
        if s not in SPACES:
            p.error(f"unknown space {s!r} (known: {', '.join(SPACES)})")
    out = args.out or Path("runs") / time.strftime("tuner-sim-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)

    def say(line: str) -> None:
        print(line, flush=True)

    sections: list[str] = []
    summary: dict[str, Any] = {}
    runs = [(s, args.spread) for s in spaces]
    runs += [(args.spread_space, float(x)) for x in args.spreads.split(",") if x.strip()]
    done: set[tuple[str, float]] = set()
    for name, spread in runs:
        if (name, spread) in done:
            continue
        done.add((name, spread))
        space = SPACES[name]
        tab, results, budget_h = run_space(
            space,
            agents=agents,
            seeds=args.seeds,
            trials=args.trials,
            spread=spread,
            out=out,
            say=say,
            memory_factor=args.memory_factor,
        )
        text = space_report(tab, results, budget_h)
        title = f"SIMULATED: {name}, spread {spread}, {args.seeds} seeds"
        if args.memory_factor != SimParams().memory_factor:
            title += f", true memory {args.memory_factor:g}x the model's"
        sections.append(f"### {title}\n\n{text}\n")
        plot(
            {a: [r.result for r in rs] for a, rs in results.items()},
            optimum=tab.optimum_speedup,
            path=out / f"tuner-sim-{name}-{spread}.png",
            title=title,
            scored_by="SIMULATED truth",
        )
        summary[f"{name}@{spread}"] = {
            a: [[r.result.final, r.result.hours, r.ooms] for r in rs] for a, rs in results.items()
        }
        say(text)
        (out / "tuner-sim.md").write_text("\n".join(sections))  # after every space
        (out / "tuner-sim.json").write_text(json.dumps(summary, indent=1))
    print(f"report: {out / 'tuner-sim.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
