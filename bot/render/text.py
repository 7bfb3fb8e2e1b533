"""All user-facing text: tables and summaries for the terminal."""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape
from rich.table import Table

from bot.state.fold import CampaignState
from gate.ledger import LedgerEvent
from gate.models import GateReport, NoiseModel, TrialResult

VERDICT_STYLE = {"allow": "green", "review": "yellow", "reject": "red"}
CLASS_STYLE = {
    "layout": "green",
    "unknown": "yellow",
    "semantic": "red",
    "known_bug": "red",
    "invalid": "red",
}


def _value(v: Any) -> str:
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
            _value(f.baseline),
            _value(f.candidate),
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
        f"(max of 3% and 3 x cv)"
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


# --- pull request and comment text (the forge renders the marker as a hidden comment) ---

COST_MARKER = "attune:cost"
CAMPAIGN_MARKER = "attune:campaign"
CLOSING_MARKER = "attune:closing"

CANDIDATE_BODY = """\
## Hypothesis

- **Bottleneck:** {bottleneck}
- **Mechanism:** {mechanism}
- **Expected gain:** +{expected_gain_pct:.0f}% tokens/s/device
- **Lever:** {lever}{coupled}
- **Source read:** {sources}{lessons}

## Change

| key | incumbent | candidate |
|---|---|---|
{rows}

Campaign `{campaign}`, trial `{trial}`. The pre-launch gate runs as the `attune/gate` check;
the benchmark and the post-launch gate follow only if it passes.
"""

COST_COMMENT = """\
**Cost of this trial:** {trial_s:.1f} device-seconds ({trial_h:.4f} GPU-hours), status `{status}`.
**Campaign so far:** {spent_h:.4f} of {budget_h:.4f} GPU-hours spent, {left_h:.4f} left.
"""

CAMPAIGN_COMMENT = """\
## attune campaign `{campaign}`

{status_line}

**Noise model:** {noise}

| trial | PR | lever | score (tokens/s/device) | vs incumbent | decision | device-s |
|---|---|---|---|---|---|---|
{rows}

**Budget:** {spent_h:.4f} of {budget_h:.4f} GPU-hours spent, {left_h:.4f} left.{llm}
"""


def harness_note(harness: list[str], overridden: list[str]) -> str:
    """The benchmark harness's arguments (the same for the baseline and every candidate) and
    the recipe's own arguments they replace; empty for a workload without a harness."""
    if not harness:
        return ""
    note = f"Benchmark harness (every trial, baseline included): `{' '.join(harness)}`."
    if overridden:
        note += " It replaces the recipe's own " + ", ".join(f"`{o}`" for o in overridden) + "."
    return note


def simulated_note(simulation: dict[str, Any] | None) -> str:
    """The label every surface of a simulated campaign carries (``--backend sim``); empty for
    a real one."""
    if not simulation:
        return ""
    return (
        "> **SIMULATED**: these trials ran on attune's simulated GPU cluster (`--backend sim`, "
        f"seed {simulation.get('seed')}, spread {simulation.get('spread')}, cv "
        f"{simulation.get('cv')}); no GPU ran them and their numbers are not measurements."
    )


def candidate_body(
    proposal: dict[str, Any],
    *,
    campaign: str,
    harness: list[str],
    overridden: list[str],
    simulation: dict[str, Any] | None = None,
) -> str:
    rows = "\n".join(
        f"| `{k}` | `{_value(a)}` | `{_value(b)}` |" for k, (a, b) in proposal["changes"].items()
    )
    note = "\n\n".join(
        x for x in (simulated_note(simulation), harness_note(harness, overridden)) if x
    )
    return (note + "\n\n" if note else "") + CANDIDATE_BODY.format(
        bottleneck=proposal["bottleneck"],
        mechanism=proposal["mechanism"],
        expected_gain_pct=proposal["expected_gain_pct"],
        lever=", ".join(f"`{k}`" for k in proposal["lever"]),
        coupled=" (coupled: they change together as one declared move)"
        if proposal["coupled"]
        else "",
        sources=", ".join(f"`{s}`" for s in proposal["sources"]),
        lessons=_lessons_used(proposal.get("lessons_used") or []),
        rows=rows,
        campaign=campaign,
        trial=proposal["trial"],
    )


def _lessons_used(ids: list[str]) -> str:
    """The hypothesis line naming the experience bank's lessons it relies on (docs/lessons.md)."""
    if not ids:
        return ""
    return "\n- **Lessons used:** " + ", ".join(f"`{i}`" for i in ids) + " (`registry/lessons/`)"


def gate_summary(report: GateReport) -> str:
    lines = [
        f"Verdict: **{report.verdict}**",
        "",
        "| key | baseline | candidate | class | reason | source |",
    ]
    lines.append("|---|---|---|---|---|---|")
    for f in report.findings:
        derived = " (derived)" if f.derived else ""
        reason = " ".join(f.reason.split()).replace("|", "\\|")
        lines.append(
            f"| `{f.key}`{derived} | `{_value(f.baseline)}` | `{_value(f.candidate)}` "
            f"| {f.key_class} | {reason} | `{f.source}` |"
        )
    return "\n".join(lines)


def cost_comment(*, trial_s: float, status: str, spent_s: float, budget_h: float) -> str:
    spent_h = spent_s / 3600
    return COST_COMMENT.format(
        trial_s=trial_s,
        trial_h=trial_s / 3600,
        status=status,
        spent_h=spent_h,
        budget_h=budget_h,
        left_h=max(0.0, budget_h - spent_h),
    )


def llm_line(llm: dict[str, float]) -> str:
    """The LLM agent's use: calls, tokens and dollars (``CampaignState.llm``)."""
    return (
        f"{llm.get('calls', 0):.0f} model calls, {llm.get('input_tokens', 0):,.0f} input + "
        f"{llm.get('output_tokens', 0):,.0f} output tokens, ${llm.get('cost_usd', 0):.4f}"
    )


def campaign_comment(state: CampaignState, *, budget_h: float) -> str:
    """The one campaign comment on the tuned pull request: trials, noise, budget."""
    rows = []
    for t in state.candidates:
        judged, finished = t.judged or {}, t.finished or {}
        score, gain = judged.get("score"), judged.get("gain")
        cells = (
            t.trial,
            f"#{t.pr}" if t.pr else "-",
            (t.proposal or {}).get("title", "").removeprefix("attune: "),
            f"{score:,.0f}" if score else "-",
            f"{gain:+.1%}" if gain is not None else "-",
            judged.get("decision", "pending"),
            f"{finished.get('device_seconds', 0.0):.1f}",
        )
        rows.append("| " + " | ".join(cells) + " |")
    status = f"Stopped ({state.stopped['reason']})." if state.stopped else "Running."
    simulated = simulated_note(state.params.simulation if state.params else None)
    if simulated:
        status = f"{simulated}\n\n{status}"
    noise = state.noise
    if state.speedup is not None:
        status += f" Incumbent `{state.incumbent}`: {state.speedup:.2f}x the baseline."
    spent_h = state.spent_device_seconds / 3600
    llm = f" LLM agent: {llm_line(state.llm)}." if state.llm else ""
    return CAMPAIGN_COMMENT.format(
        llm=llm,
        campaign=state.campaign,
        status_line=status,
        noise=(
            f"{noise.runs} runs, mean {noise.mean:,.0f} tokens/s/device, cv {noise.cv:.2%}, "
            f"threshold {noise.threshold:.2%}"
            if noise
            else "calibrating"
        ),
        rows="\n".join(rows) or "| - | | | | | | |",
        spent_h=spent_h,
        budget_h=budget_h,
        left_h=max(0.0, budget_h - spent_h),
    )
