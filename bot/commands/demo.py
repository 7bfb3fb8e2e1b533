"""``attune demo``: the embedded default end to end on this machine.

Benchmarks the example recipe five times and calibrates the noise model, then gates and
benchmarks a layout-only candidate and gates a semantic one (refused before launch), all
charged to a fresh ledger whose GPU-hours it prints.
"""

from __future__ import annotations

import time
from pathlib import Path

from bot.console import console
from bot.executor import LocalExecutor
from bot.render import cost_line, gate_table, noise_line, trial_line, verdict_line
from gate import noise
from gate.budget import campaign_summary
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.recipe import load_recipe
from gate.registry import load_registry
from runners.adapter import get_adapter

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASELINE = EXAMPLES / "ported-gpt.yaml"
LAYOUT_CANDIDATE = EXAMPLES / "candidates" / "no-recompute.yaml"
SEMANTIC_CANDIDATE = EXAMPLES / "candidates" / "grad-reduce-bf16.yaml"


def demo(*, workdir: Path | None, runs: int, steps: int, warmup: int, budget_hours: float) -> int:
    workdir = workdir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    if (workdir / "ledger.db").exists():
        raise AttuneError("already holds a ledger; pick a new --workdir", path=str(workdir))
    workdir.mkdir(parents=True, exist_ok=True)
    campaign = workdir.name
    baseline_recipe = load_recipe(BASELINE)
    baseline = get_adapter(baseline_recipe.framework).resolve(baseline_recipe)
    registry = load_registry(baseline.framework, baseline.framework_version)

    with Ledger(workdir / "ledger.db") as ledger:
        ledger.append(
            campaign,
            "campaign_opened",
            {"baseline": baseline_recipe.name, "budget_device_hours": budget_hours},
        )
        executor = LocalExecutor(
            ledger=ledger,
            campaign=campaign,
            registry=registry,
            workdir=workdir,
            budget_device_seconds=budget_hours * 3600,
            steps=steps,
            warmup=warmup,
        )
        console.rule(f"[bold]1. calibrate: {baseline_recipe.name} x {runs}")
        console.print(f"{steps} steps per run, the first {warmup} not scored")
        scores, step1 = [], None
        for i in range(1, runs + 1):
            out = executor.run(
                f"baseline-{i}", baseline_recipe, baseline=baseline, baseline_step1_loss=step1
            )
            if out.result is None or out.result.status != "ok" or out.result.score is None:
                why = out.refusal.message if out.refusal else (out.result and out.result.error)
                raise AttuneError(f"baseline run {i} did not finish: {why}", path=str(BASELINE))
            step1 = step1 if step1 is not None else out.result.step1_loss
            scores.append(out.result.score)
            console.print(f"  run {i}: {trial_line(out.result)}")
        model = noise.calibrate(scores)
        ledger.append(campaign, "noise_calibrated", model.model_dump())
        console.print(noise_line(model))

        for n, path in enumerate((LAYOUT_CANDIDATE, SEMANTIC_CANDIDATE), start=2):
            candidate = load_recipe(path)
            console.rule(f"[bold]{n}. candidate: {candidate.name}")
            out = executor.run(
                candidate.name, candidate, baseline=baseline, baseline_step1_loss=step1
            )
            console.print(gate_table(out.gate, title=f"pre-launch gate: {path.name}"))
            console.print(verdict_line(out.gate))
            if out.refusal:
                console.print(f"[red]launch refused:[/] {out.refusal.message}")
            if out.result is None:
                console.print("not launched: nothing was run or charged for it")
                continue
            console.print(f"  {trial_line(out.result)}")
            assert out.post is not None
            if not out.post.passed:
                console.print(f"[red]post-launch gate failed:[/] {'; '.join(out.post.reasons)}")
                continue
            delta = out.post.relative_loss_delta or 0.0
            console.print(f"post-launch gate: passed (step-1 loss within {delta:.2e} relative)")
            score = out.result.score or 0.0
            gain = noise.relative_gain(score, model.mean)
            verdict = "beats" if noise.beats(score, model.mean, model) else "does not beat"
            console.print(
                f"{gain:+.1%} vs the baseline mean: {verdict} the {model.threshold:.1%} threshold"
            )

        console.rule("[bold]ledger")
        report = ledger.verify()
        cost = campaign_summary(ledger.events(campaign))
        console.print(cost_line(cost))
        console.print(
            f"hash chain: {'intact' if report.ok else 'BROKEN'} ({report.checked} events)"
        )
        console.print(f"ledger: {workdir / 'ledger.db'}  (attune ledger show --ledger ...)")
    return 0
