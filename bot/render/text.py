"""All user-facing text: tables and summaries for the terminal."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from bot.render.words import count
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


def with_article(word: str) -> str:
    """``an embedded``, ``a megatron``: the indefinite article a word takes in running text."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def shown_value(v: Any) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def gate_table(report: GateReport, title: str = "") -> GateTable:
    """The gate's findings as a table that fits the width it is printed at."""
    return GateTable(report, title)


class GateTable:
    """The gate's findings, laid out for the width rich gives it when printed: five columns
    when they fit, else two (key, values and class | reason and source). Every cell wraps;
    nothing is cropped, and the source ``file:line`` keeps a line of its own, whole whenever
    the width allows it (80 columns for every framework's sources)."""

    KEY_MAX = 40
    VALUE_MAX = 24
    REASON_MIN = 30
    NARROW_KEY_MIN = 12

    def __init__(self, report: GateReport, title: str = "") -> None:
        self.report = report
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.title:  # a line of its own: a table's title is padded to the table's width
            yield Text(self.title, style="italic")
        yield self.table(options.max_width)

    def table(self, width: int) -> Table:
        findings = self.report.findings
        keys = [f"{f.key} (derived)" if f.derived else f.key for f in findings]
        values = [shown_value(v) for f in findings for v in (f.baseline, f.candidate)]
        source_w = max((len(f.source) for f in findings), default=0)
        key_w = min(max((len(k) for k in keys), default=3), self.KEY_MAX)
        value_w = min(max((len(v) for v in values), default=8), self.VALUE_MAX)
        value_w = max(value_w, len("candidate"))
        class_w = max((len(f.key_class) for f in findings), default=5)
        reason_min = max(source_w, self.REASON_MIN)
        fixed = key_w + 2 * value_w + class_w
        table = Table()
        if fixed + reason_min + 16 <= width:  # 5 columns: 1 border + 2 padding each, + 1
            table.add_column("key", overflow="fold", width=key_w)
            for col in ("baseline", "candidate"):
                table.add_column(col, overflow="fold", width=value_w)
            table.add_column("class", overflow="fold", width=class_w)
            table.add_column("reason and source", overflow="fold", width=width - 16 - fixed)
            for key, f in zip(keys, findings, strict=True):
                table.add_row(
                    escape(key),
                    escape(shown_value(f.baseline)),
                    escape(shown_value(f.candidate)),
                    _styled_class(f.key_class),
                    _reason_and_source(f.reason, f.source),
                )
            return table
        reason_w = max(reason_min, (width - 7) * 11 // 20)  # a little over half
        reason_w = max(1, min(reason_w, width - 7 - self.NARROW_KEY_MIN))
        table.add_column("key: baseline -> candidate", overflow="fold", width=width - 7 - reason_w)
        table.add_column("reason and source", overflow="fold", width=reason_w)
        for key, f in zip(keys, findings, strict=True):
            change = f"{shown_value(f.baseline)} -> {shown_value(f.candidate)}"
            table.add_row(
                f"{escape(key)}\n{escape(change)}\n{_styled_class(f.key_class)}",
                _reason_and_source(f.reason, f.source),
            )
        return table


def _styled_class(key_class: str) -> str:
    return f"[{CLASS_STYLE[key_class]}]{key_class}[/]"


def _reason_and_source(reason: str, source: str) -> str:
    return f"{escape(reason)}\n[dim]{escape(source)}[/]"


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
        f"{result.device_seconds:.1f} device-s on {count(result.devices, 'device')}"
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
        f"{count(runs, 'trial')} ({statuses}): {spent:.1f} device-seconds = "
        f"{spent / 3600:.4f} GPU-hours"
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
