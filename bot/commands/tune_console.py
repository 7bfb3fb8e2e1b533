"""What ``attune tune`` shows while and after a campaign runs: the live display of its phase,
incumbent and spend, and the summary at its end (both from the one fold)."""

from __future__ import annotations

import re
from pathlib import Path

from rich.live import Live
from rich.table import Table

from bot.console import console, log_line
from bot.render import llm_line, noise_line, simulated_note
from bot.state.model import CampaignState


class LiveProgress:
    """The live display: phase, trial, hypothesis, incumbent, speedup, budget."""

    def __init__(self, live: Live | None) -> None:
        self.live = live
        self.last = ""

    def update(self, state: CampaignState, phase: str, detail: str = "") -> None:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        budget = state.params.budget_device_hours * 3600 if state.params else 0.0
        spent = state.spent_device_seconds
        table.add_row("campaign", state.campaign)
        table.add_row("phase", phase)
        table.add_row("now", detail or "-")
        table.add_row("trials", f"{len(state.candidates)} candidates, {len(state.trials)} runs")
        score, speedup = state.incumbent_score, state.speedup
        if score is not None and speedup is not None and state.noise:
            table.add_row(
                "incumbent", f"{state.incumbent}: {score:,.0f} tokens/s/device ({speedup:.2f}x)"
            )
            table.add_row("threshold", f"{state.noise.threshold:.1%}")
        table.add_row("budget", f"{spent:.0f} of {budget:.0f} device-seconds spent")
        if self.live is not None:
            self.live.update(table, refresh=True)
        line = f"[{phase}] {detail}"
        if line != self.last:  # a log line per change, for logs and non-terminals
            log_line(line)
            self.last = line


def summarize(state: CampaignState, report: Path) -> None:
    stopped = state.stopped
    console.rule("[bold]campaign finished")
    simulated = simulated_note(state.params.simulation if state.params else None)
    if simulated:
        console.print(simulated.removeprefix("> "), markup=False)
    spent = f"{state.spent_device_seconds / 3600:.4f} GPU-hours spent"
    if state.params is not None:
        spent += f" of {state.params.budget_device_hours:g}"
    if not state.candidates:  # no speedup to speak of: the baseline was never challenged
        console.print(f"no candidate was tried: the baseline stays; {spent}")
    elif state.noise and state.speedup is not None:
        speedup = state.speedup
        console.print(
            f"incumbent [bold]{state.incumbent}[/]: {speedup:.2f}x the baseline "
            f"(threshold {state.noise.threshold:.1%}), {spent}"
        )
    if state.noise:
        console.print(noise_line(state.noise))
    if state.llm:
        console.print(f"LLM agent: {llm_line(state.llm)}")
    for line in failure_lines(state):
        console.print(line, markup=False, soft_wrap=True)
    console.print(f"stopped: {stopped.reason if stopped else '?'}")
    for line in (stopped.evidence if stopped else [])[:12]:
        console.print(f"  - {line}")
    console.print(f"report: {report}")
    console.print(f"plot:   {report.with_suffix('.png')}")


def failure_lines(state: CampaignState) -> list[str]:
    """One line per run that failed on its own (crashed, out of memory, hung, NaN...): what it
    was charged and the exception it died with (else its error's first line). A run the budget
    or a stop cut short is no verdict on its recipe, and is not listed."""
    lines = []
    for t in state.trials.values():
        end = t.finished
        if end is None or end.status == "ok" or end.interrupted:
            continue
        text = [line.strip() for line in (end.error or "").splitlines() if line.strip()]
        raised = [line for line in text if RAISED.match(line)]
        shown = raised[-1] if raised else text[0] if text else ""
        lines.append(
            f"charged failure: {t.trial} ended {end.status} after {end.device_seconds:.1f} "
            f"device-s" + (f": {shown[:200]}" if shown else "")
        )
    return lines


RAISED = re.compile(r"[\w.]*(Error|Exception)\b")
"""A traceback's last line: the exception a run died with (``RuntimeError: ...``)."""
