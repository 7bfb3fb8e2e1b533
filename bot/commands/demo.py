"""``attune demo``: the embedded default end to end, a whole tuning campaign on this machine.

Tunes an example recipe with the rules agent, the local forge and the local runner (calibrate,
profile, propose, gate, bench, judge, merge or close, cost comments), writes the report, then
shows the pre-launch gate refusing a semantic change before any launch.

Two plans: the short one (the default, 2.5 minutes on 2 cores at load 4) tunes
``examples/ported-gpt-small-device.yaml``, whose small device memory makes its first candidate
(recompute off) run out of memory: a failure, charged; ``--long`` (about 11 minutes: longer
runs, more candidates, A/B re-measurement and a confirmation) tunes ``examples/ported-gpt.yaml``.
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
SMALL_DEVICE = EXAMPLES / "ported-gpt-small-device.yaml"
SEMANTIC_CANDIDATE = EXAMPLES / "candidates" / "grad-reduce-bf16.yaml"


class DemoPlan(BaseModel):
    """A demo campaign's run length, caps and budget (device-hours)."""

    recipe: Path
    steps: int
    warmup: int
    budget_hours: float
    max_trials: int
    max_pairs: int
    confirm_pairs: int


SHORT = DemoPlan(
    recipe=SMALL_DEVICE,
    steps=6,
    warmup=2,
    budget_hours=0.15,
    max_trials=3,
    max_pairs=0,
    confirm_pairs=0,
)
"""The default: runs of 6 steps (4 scored), 3 candidates, decisions by the one-run bar alone
(a first run within it closes), on the small-device recipe: micro-batch 16 with recompute on,
each rank held to 360 MiB beyond its start-up. The experience bank's lesson puts recompute off
first; without recompute micro-batch 16 needs about 390 MiB, so it runs out of memory in its
second step and is charged; a second thread (about 325 MiB) fits, and its gain of tens of
percent clears the bar where the machine is quiet (on a busy one its noise raises the bar past
it); compile at micro-batch 16 sits at the limit and may run out of memory too, charged alike.
The budget buys calibration (5 runs), the layout checks, a profile and the candidates at the
pre-launch forecast of 60 device-s a run."""

LONG = DemoPlan(
    recipe=BASELINE,
    steps=12,
    warmup=3,
    budget_hours=0.25,
    max_trials=12,
    max_pairs=3,
    confirm_pairs=1,
)
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
    console.rule(f"[bold]attune tune {plan.recipe.relative_to(EXAMPLES.parent)}")
    open_new(
        workdir,
        recipe_path=plan.recipe,
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
    _, verdict = judge_pair(BASELINE, SEMANTIC_CANDIDATE)  # the candidate is ported-gpt's
    console.print(gate_table(verdict, title=f"attune gate check: {SEMANTIC_CANDIDATE.name}"))
    console.print(verdict_line(verdict) + ": never launched, nothing charged")
    console.print(f"\nreport: {report}\npull requests: attune pr list --workdir {workdir}")
    console.print(f"ledger: attune ledger show --ledger {workdir / 'ledger.db'}")
    console.print(f"demo took {time.monotonic() - began:.0f} s")
    return 0
