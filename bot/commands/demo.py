"""``attune demo``: the embedded default end to end, a whole tuning campaign on this machine.

Tunes ``examples/ported-gpt.yaml`` with the rules agent, the local forge and the local
runner (calibrate, profile, propose, gate, bench, judge, merge or close, cost comments), writes
the report, then shows the pre-launch gate refusing a semantic change before any launch.
"""

from __future__ import annotations

import time
from pathlib import Path

from bot.commands.gate_check import judge_pair
from bot.commands.tune import holds_campaign, open_new, run_campaign
from bot.console import console
from bot.render import gate_table, verdict_line
from gate.errors import AttuneError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASELINE = EXAMPLES / "ported-gpt.yaml"
SEMANTIC_CANDIDATE = EXAMPLES / "candidates" / "grad-reduce-bf16.yaml"


DEMO_PAIRS = (3, 1)
"""The demo's A/B cap and confirmation pairs: every phase of the judgement, at half the extra
runs of `attune tune`'s defaults (6 and 3), so the first run stays short on a noisy machine."""


def demo(
    *,
    workdir: Path | None,
    steps: int,
    warmup: int,
    budget_hours: float,
    max_trials: int,
    pairs: tuple[int | None, int | None] = (None, None),
) -> int:
    workdir = workdir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    if (workdir / "ledger.db").exists() and holds_campaign(workdir / "ledger.db"):
        raise AttuneError(
            "already holds a ledger with a campaign; pick a new --workdir", path=str(workdir)
        )
    console.rule(f"[bold]attune tune {BASELINE.relative_to(EXAMPLES.parent)}")
    open_new(
        workdir,
        recipe_path=BASELINE,
        budget_hours=budget_hours,
        agent="rules",
        steps=steps,
        warmup=warmup,
        max_trials=max_trials,
        calibration_runs=5,
        pairs=(
            DEMO_PAIRS[0] if pairs[0] is None else pairs[0],
            DEMO_PAIRS[1] if pairs[1] is None else pairs[1],
        ),
    )
    console.print(f"work directory {workdir}: ledger.db, forge/ (git + pull requests), trials/")
    report = run_campaign(workdir)

    console.rule("[bold]the gate on a change that looks like layout")
    _, verdict = judge_pair(BASELINE, SEMANTIC_CANDIDATE)
    console.print(gate_table(verdict, title=f"attune gate check: {SEMANTIC_CANDIDATE.name}"))
    console.print(verdict_line(verdict) + ": never launched, nothing charged")
    console.print(f"\nreport: {report}\npull requests: attune pr list --workdir {workdir}")
    return 0
