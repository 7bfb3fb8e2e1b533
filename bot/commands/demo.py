"""``attune demo``: the embedded default end to end, a whole tuning campaign on this machine.

Tunes ``examples/ported-gpt.yaml`` with the rules agent, the local forge and the local
runner (calibrate, profile, propose, gate, bench, judge, merge or close, cost comments), writes
the report, then shows the pre-launch gate refusing a semantic change before any launch.

Two plans: the short one (the default, about 3 minutes on 2 idle cores) and ``--long`` (about
11 minutes: longer runs, more candidates, A/B re-measurement and a confirmation).
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel

from bot.commands.gate_check import judge_pair
from bot.commands.tune import holds_campaign, open_new, run_campaign
from bot.console import console
from bot.render import gate_table, verdict_line
from gate.errors import AttuneError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASELINE = EXAMPLES / "ported-gpt.yaml"
SEMANTIC_CANDIDATE = EXAMPLES / "candidates" / "grad-reduce-bf16.yaml"


class DemoPlan(BaseModel):
    """A demo campaign's run length, caps and budget (device-hours)."""

    steps: int
    warmup: int
    budget_hours: float
    max_trials: int
    max_pairs: int
    confirm_pairs: int


SHORT = DemoPlan(steps=6, warmup=2, budget_hours=0.15, max_trials=3, max_pairs=0, confirm_pairs=0)
"""The default: runs of 6 steps (4 scored), 3 candidates, decisions by the one-run bar alone
(a first run within it closes). The big layout gains of the example recipe (recompute off, a
second thread: tens of percent) still clear the bar on an idle 2-core machine; small ones do
not, which is the honest outcome at this length. The budget buys calibration (5 runs), the
layout checks, a profile and the candidates at the pre-launch forecast of 60 device-s a run."""

LONG = DemoPlan(steps=12, warmup=3, budget_hours=0.25, max_trials=12, max_pairs=3, confirm_pairs=1)
"""``--long``: ``attune tune``'s run length, 12 candidates, every phase of the judgement at half
``attune tune``'s extra runs (A/B cap 3 instead of 6, one confirmation pair instead of 3)."""


def demo(
    *,
    workdir: Path | None,
    long: bool = False,
    steps: int | None = None,
    warmup: int | None = None,
    budget_hours: float | None = None,
    max_trials: int | None = None,
    pairs: tuple[int | None, int | None] = (None, None),
) -> int:
    """Run the demo plan (``long``: the long one), any value given overriding the plan's."""
    plan = (LONG if long else SHORT).model_copy()
    given = {
        "steps": steps,
        "warmup": warmup,
        "budget_hours": budget_hours,
        "max_trials": max_trials,
        "max_pairs": pairs[0],
        "confirm_pairs": pairs[1],
    }
    plan = plan.model_copy(update={k: v for k, v in given.items() if v is not None})
    workdir = workdir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    if (workdir / "ledger.db").exists() and holds_campaign(workdir / "ledger.db"):
        raise AttuneError(
            "already holds a ledger with a campaign; pick a new --workdir", path=str(workdir)
        )
    began = time.monotonic()
    console.rule(f"[bold]attune tune {BASELINE.relative_to(EXAMPLES.parent)}")
    open_new(
        workdir,
        recipe_path=BASELINE,
        budget_hours=plan.budget_hours,
        agent="rules",
        steps=plan.steps,
        warmup=plan.warmup,
        max_trials=plan.max_trials,
        calibration_runs=5,
        pairs=(plan.max_pairs, plan.confirm_pairs),
    )
    console.print(
        f"work directory {workdir}: ledger.db, forge/ (git + pull requests), trials/; "
        f"{plan.steps} steps a run ({plan.warmup} not scored), {plan.max_trials} candidates at "
        f"most, budget {plan.budget_hours:g} device-hours"
        + ("" if long else "; `attune demo --long` for the whole judgement"),
        soft_wrap=True,
    )
    report = run_campaign(workdir)

    console.rule("[bold]the gate on a change that looks like layout")
    _, verdict = judge_pair(BASELINE, SEMANTIC_CANDIDATE)
    console.print(gate_table(verdict, title=f"attune gate check: {SEMANTIC_CANDIDATE.name}"))
    console.print(verdict_line(verdict) + ": never launched, nothing charged")
    console.print(f"\nreport: {report}\npull requests: attune pr list --workdir {workdir}")
    console.print(f"ledger: attune ledger show --ledger {workdir / 'ledger.db'}")
    console.print(f"demo took {time.monotonic() - began:.0f} s")
    return 0
