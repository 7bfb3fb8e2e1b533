"""All user-facing text: tables and summaries for the terminal."""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape
from rich.table import Table

from bot.state.model import CampaignState
from gate.ledger import LedgerEvent
from gate.models import GateReport, NoiseModel, TrialResult
from gate.noise import RULE as NOISE_RULE

VERDICT_STYLE = {"allow": "green", "review": "yellow", "reject": "red"}
CLASS_STYLE = {
    "layout": "green",
    "unknown": "yellow",
    "semantic": "red",
    "known_bug": "red",
    "invalid": "red",
}


def shown_value(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def gate_table(report: GateReport, title: str = "") -> Table:
    table = Table(title=title or None, title_justify="left")
    table.add_column("key", no_wrap=True)
    for col in ("baseline", "candidate"):
        table.add_column(col, overflow="fold", max_width=24)
    table.add_column("class", no_wrap=True)
    table.add_column("reason and source", overflow="fold", ratio=1, min_width=30)
    for f in report.findings:
        style = CLASS_STYLE[f.key_class]
        key = f"{f.key} (derived)" if f.derived else f.key
        table.add_row(
            key,
            shown_value(f.baseline),
            shown_value(f.candidate),
            f"[{style}]{f.key_class}[/]",
            f"{escape(f.reason)}\n[dim]{escape(f.source)}[/]",
        )
    return table


def verdict_line(report: GateReport) -> str:
    style = VERDICT_STYLE[report.verdict]
    changed = len(report.findings)
    return (
        f"verdict: [bold {style}]{report.verdict}[/] ({changed} changed key{'s' * (changed != 1)})"
    )


def trial_line(result: TrialResult) -> str:
    score = f"{result.score:,.0f} tokens/s/device" if result.score is not None else "no score"
    loss = f"{result.step1_loss:.6f}" if result.step1_loss is not None else "-"
    return (
        f"{result.status:<7} {score}, step-1 loss {loss}, "
        f"{result.device_seconds:.1f} device-s on {result.devices} device(s)"
    )


def noise_line(noise: NoiseModel) -> str:
    return (
        f"noise model: {noise.runs} runs, mean {noise.mean:,.0f} tokens/s/device, "
        f"cv {noise.cv:.2%}, promotion threshold {noise.threshold:.2%} "
        f"({NOISE_RULE})"
    )


def ledger_table(events: list[LedgerEvent]) -> Table:
    table = Table()
    for col in ("seq", "campaign", "kind", "trial", "detail", "device-s"):
        table.add_column(col, overflow="fold")
    for e in events:
        p = e.payload
        detail = ""
        if e.kind == "gate_checked":
            detail = f"{p.get('recipe')}: {p.get('verdict')}"
        elif e.kind == "trial_finished":
            score = p.get("score")
            detail = f"{p.get('status')}" + (f", {score:,.0f} tok/s/dev" if score else "")
        elif e.kind == "launch_refused":
            detail = str(p.get("message", ""))
        elif e.kind == "noise_calibrated":
            detail = f"threshold {p.get('threshold', 0):.2%}"
        elif e.kind == "campaign_opened":
            detail = f"budget {p.get('budget_device_hours')} device-h"
        charge = p.get("device_seconds") if e.kind == "trial_finished" else None
        table.add_row(
            str(e.seq),
            e.campaign,
            e.kind,
            str(p.get("trial", "")),
            detail,
            f"{charge:.1f}" if charge is not None else "",
        )
    return table


def cost_line(state: CampaignState) -> str:
    """Runs, their statuses, spend against the budget and the speedup: ``attune ledger show``'s
    summary of one campaign, from the one fold."""
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(state.runs_by_status.items())) or "none"
    runs = sum(state.runs_by_status.values())
    spent = state.spent_device_seconds
    line = (
        f"{runs} trial(s) ({statuses}): {spent:.1f} device-seconds = {spent / 3600:.4f} GPU-hours"
    )
    if state.params is not None:
        line += f" of {state.params.budget_device_hours:.4f} budgeted"
    if state.speedup is not None:
        line += f"; incumbent {state.incumbent}, {state.speedup:.2f}x the baseline"
    if state.llm:
        line += f"; LLM agent: {llm_line(state.llm)}"
    return line


def llm_line(llm: dict[str, float]) -> str:
    """The LLM agent's use: calls, tokens and dollars (``CampaignState.llm``)."""
    return (
        f"{llm.get('calls', 0):.0f} model calls, {llm.get('input_tokens', 0):,.0f} input + "
        f"{llm.get('output_tokens', 0):,.0f} output tokens, ${llm.get('cost_usd', 0):.4f}"
    )
