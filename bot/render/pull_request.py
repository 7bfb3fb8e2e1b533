"""The text attune writes on pull requests: the candidate's body, the gate's check summary,
the cost and closing comments and the one campaign comment (the forge renders each marker as a
hidden comment); the terminal's text is ``text.py``."""

from __future__ import annotations

import math
from typing import Any

from bot.checks import GATE_CHECK
from bot.render.text import llm_line, shown_value
from bot.report.predictions import error_summary, prediction_rows
from bot.state.model import CampaignState
from gate.events import CandidateProposed
from gate.events_prediction import PredictionMade
from gate.models import GateReport

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

Campaign `{campaign}`, trial `{trial}`. The pre-launch gate runs as the `{gate_check}` check;
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

| trial | PR | lever | predicted | score (tokens/s/device) | vs incumbent | decision | device-s |
|---|---|---|---|---|---|---|---|
{rows}
{predictions}
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
    proposal: CandidateProposed,
    *,
    campaign: str,
    harness: list[str],
    overridden: list[str],
    simulation: dict[str, Any] | None = None,
) -> str:
    rows = "\n".join(
        f"| `{k}` | `{shown_value(a)}` | `{shown_value(b)}` |"
        for k, (a, b) in proposal.changes.items()
    )
    note = "\n\n".join(
        x for x in (simulated_note(simulation), harness_note(harness, overridden)) if x
    )
    return (note + "\n\n" if note else "") + CANDIDATE_BODY.format(
        bottleneck=proposal.bottleneck,
        mechanism=proposal.mechanism,
        expected_gain_pct=proposal.expected_gain_pct,
        lever=", ".join(f"`{k}`" for k in proposal.lever),
        coupled=" (coupled: they change together as one declared move)" if proposal.coupled else "",
        sources=", ".join(f"`{s}`" for s in proposal.sources),
        lessons=_lessons_used(proposal.lessons_used),
        rows=rows,
        campaign=campaign,
        trial=proposal.trial,
        gate_check=GATE_CHECK,
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
            f"| `{f.key}`{derived} | `{shown_value(f.baseline)}` | `{shown_value(f.candidate)}` "
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


def campaign_comment(state: CampaignState, *, budget_h: float) -> str:
    """The one campaign comment on the tuned pull request: trials, noise, budget."""
    rows = []
    for t in state.candidates:
        judged = t.judged
        score, gain = (judged.score, judged.gain) if judged else (None, None)
        cells = (
            t.trial,
            f"#{t.pr}" if t.pr else "-",
            t.proposal.title.removeprefix("attune: ") if t.proposal else "",
            _predicted(t.prediction),
            f"{score:,.0f}" if score else "-",
            f"{gain:+.1%}" if gain is not None else "-",
            judged.decision if judged else "pending",
            f"{t.device_seconds:.1f}",
        )
        rows.append("| " + " | ".join(cells) + " |")
    status = f"Stopped ({state.stopped.reason})." if state.stopped else "Running."
    simulated = simulated_note(state.params.simulation if state.params else None)
    if simulated:
        status = f"{simulated}\n\n{status}"
    noise = state.noise
    if state.speedup is not None:
        status += f" Incumbent `{state.incumbent}`: {state.speedup:.2f}x the baseline."
    spent_h = state.spent_device_seconds / 3600
    llm = f" LLM agent: {llm_line(state.llm)}." if state.llm else ""
    summary = error_summary(prediction_rows(state))
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
        rows="\n".join(rows) or "| - | | | | | | | |",
        predictions=f"\n{summary[0].upper()}{summary[1:]}.\n" if summary else "",
        spent_h=spent_h,
        budget_h=budget_h,
        left_h=max(0.0, budget_h - spent_h),
    )


def _predicted(prediction: PredictionMade | None) -> str:
    """The calibrated prediction with its band, or ``-`` without one."""
    if prediction is None:
        return "-"
    band = math.expm1(prediction.band)
    return f"{prediction.calibrated_tokens_per_s_per_device:,.0f} +-{band:.0%}"
