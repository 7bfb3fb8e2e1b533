"""The campaign report (Markdown and plot), rebuilt from one campaign's ledger events alone,
through the one fold (``CampaignState``)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from bot.campaign.context import anchor_line
from bot.render.pull_request import harness_note, simulated_note
from bot.render.text import llm_line
from bot.report.judgement import confirmation_of, judgement_section
from bot.report.lessons import lessons_section
from bot.report.model import (
    NO_CHANGE,
    CampaignReport,
    CandidateRow,
    Hypothesis,
    IncumbentStep,
    RunRow,
)
from bot.report.plot import render_plot as render_plot  # re-exported: part of this API
from bot.report.predictions import predictions_section
from bot.state.fold import fold
from bot.state.model import CampaignState, TrialRecord
from gate.event_codec import to_payload
from gate.ledger import LedgerEvent
from gate.noise import RULE as NOISE_RULE
from gate.postlaunch_reference import summary

_PROFILE_PARTS = ("compute", "communication", "memory_copy", "cpu", "idle")


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def build_report(events: list[LedgerEvent]) -> CampaignReport:
    """The report of one campaign's events (a partial campaign too): ``report_of`` its fold."""
    return report_of(fold(events[0].campaign if events else "", events))


def report_of(state: CampaignState) -> CampaignReport:
    """Every row and number of the report, read from ``CampaignState``: the same fold, and so
    the same speedup and spend, as the console, the campaign comment and ``/attune status``."""
    params, stopped = state.params, state.stopped
    report = CampaignReport(
        campaign=state.campaign,
        baseline=params.baseline if params else None,
        recipe_path=params.recipe_path if params else None,
        budget_device_hours=params.budget_device_hours if params else None,
        simulation=params.simulation if params else None,
        noise=state.noise,
        checks=state.checks_reference,
        order=list(state.trials),
        speedup=state.speedup,
        device_seconds=state.spent_device_seconds,
        device_hours=state.spent_device_seconds / 3600,
        stopped=state.stopped is not None,
        stop_reason=stopped.reason if stopped else None,
        evidence=list(stopped.evidence) if stopped else [],
        harness=state.harness[0],
        overridden=state.harness[1],
        lessons_read=params.lessons if params else True,
        lessons_proposed=to_payload(state.lessons_proposed) if state.lessons_proposed else None,
        llm=state.llm,
        assumptions=state.assumptions,
        confirmation=confirmation_of(state),
        judgement=judgement_section(state),
        predictions=predictions_section(state),
    )
    for record in state.trials.values():
        if record.role == "candidate":
            report.candidates.append(_candidate_row(record))
        elif record.started or record.finished is not None:
            finished = record.finished
            profile = finished.profile if finished else None
            report.runs.append(
                RunRow(
                    trial=record.trial,
                    role=record.role or "other",
                    status=finished.status if finished else None,
                    score=finished.score if finished else None,
                    device_seconds=record.device_seconds,
                    profile=profile.model_dump(mode="json") if profile else None,
                )
            )
    if state.noise is not None:
        report.incumbent.append(IncumbentStep(trial="baseline", score=state.noise.mean))
    merged = [t for t in state.candidates if t.merged_sha is not None]
    for record in merged:
        score = state.winner_score(record.trial)  # the mean of its runs, as judged
        if score is not None:
            report.incumbent.append(IncumbentStep(trial=record.trial, score=score))
    if merged and params is not None:
        report.final_trial = merged[-1].trial
        path = params.recipe_path
        lines = difflib.unified_diff(
            params.recipe_text.splitlines(),
            state.incumbent_recipe_text.splitlines(),
            f"baseline/{path}",
            f"tuned/{path}",
        )
        report.recipe_diff = "\n".join(line.rstrip("\n") for line in lines)
    return report


def _candidate_row(record: TrialRecord) -> CandidateRow:
    p, finished, judged, refused = record.proposal, record.finished, record.judged, record.refused
    scores = (finished.score if finished else None, judged.score if judged else None)
    return CandidateRow(
        trial=record.trial,
        pr=record.pr,
        lever=" + ".join(p.lever) if p else "",
        changes={k: list(v) for k, v in p.changes.items()} if p else {},
        hypothesis=Hypothesis(
            bottleneck=p.bottleneck if p else "",
            mechanism=p.mechanism if p else "",
            expected_gain_pct=p.expected_gain_pct if p else None,
            sources=list(p.sources) if p else [],
            lessons=list(p.lessons_used) if p else [],
        ),
        recipe_text=p.recipe_text if p else None,
        verdict=record.gate_verdict,
        findings=[f.model_dump(mode="json", by_alias=True) for f in record.gate_findings],
        refusal_reason=refused.reason if refused else None,
        refusal=refused.message if refused else None,
        status=finished.status if finished else None,
        score=next((v for v in scores if v is not None), None),
        gain=judged.gain if judged else None,
        decision=judged.decision if judged else None,
        reason=judged.reason if judged else None,
        merged=record.merged_sha is not None,
        closed=record.closed,
        device_seconds=record.device_seconds,
    )


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _cell(value: str) -> str:
    return value.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") or "-"


def _num(value: float | None, fmt: str = ",.0f") -> str:
    return "-" if value is None else format(value, fmt)


def _hypothesis(h: Hypothesis) -> str:
    """The table's hypothesis cell: the mechanism's first sentence (what the later sentences
    add, the model's prediction and a backing lesson's whole claim, stays in the candidate's
    pull request; the cell names the lessons by id)."""
    mechanism = h.mechanism.split(". ", 1)[0]
    text = f"{h.bottleneck}: {mechanism}" if h.bottleneck else mechanism
    if h.expected_gain_pct is not None:
        text += f", expected {h.expected_gain_pct:+g}%"
    if h.lessons:
        text += f" (lessons: {', '.join(h.lessons)})"
    return text


def _gate(row: CandidateRow) -> str:
    flagged = [f for f in row.findings if f.get("class") not in ("layout", None)]
    keys = ", ".join(f"{f.get('key')} ({f.get('class')})" for f in flagged)
    return f"{row.verdict}: {keys}" if row.verdict and keys else row.verdict or "-"


def _decision(row: CandidateRow) -> str:
    why = f": {row.reason}" if row.reason else ""
    outcome = row.outcome
    if outcome == "rejected":
        return "rejected by gate, not run"
    if outcome == "refused":
        return f"refused ({row.refusal_reason}): {row.refusal}"
    if outcome == "failed":
        return f"failed ({row.status}){why}"
    labels = {"merge_pending": "merge (pending)", "merged": "merged", "closed": "closed"}
    return labels.get(outcome, "pending") + (why if outcome != "pending" else "")


def _outcome_line(r: CampaignReport) -> str:
    merged = sum(c.merged for c in r.candidates)
    speed = f"{r.speedup:.2f}x over baseline" if r.speedup is not None else "speedup unknown"
    threshold = f"threshold {r.noise.threshold:.2%}" if r.noise else "no noise model yet"
    state = f"stopped: {r.stop_reason}" if r.stopped else "in progress"
    if r.stopped and not r.candidates:  # no speedup to report: the baseline was never challenged
        return (
            f"**Outcome:** no candidate was tried: the baseline `{r.baseline or '-'}` stays "
            f"({threshold}); {r.device_hours:.4f} GPU-hours; {state}."
        )
    n = len(r.candidates)
    return (
        f"**Outcome:** {speed} `{r.baseline or '-'}` ({threshold}); "
        f"{n} candidate trial{'s' * (n != 1)}, {merged} merged; "
        f"{r.device_hours:.4f} GPU-hours; {state}."
    )


def render_markdown(report: CampaignReport) -> str:
    """The report as a deterministic Markdown document (no clock, no absolute paths)."""
    r = report
    out = [f"# attune campaign report: {r.campaign or '-'}", ""]
    if r.simulation:
        out += [simulated_note(r.simulation), ""]
    out += [_outcome_line(r), ""]
    out += ["## Noise model", ""]
    if r.noise is None:
        out.append("Not calibrated yet.")
    else:
        n = r.noise
        out += [
            f"- runs: {n.runs}",
            f"- mean: {n.mean:,.0f} tokens/s/device (std {n.std:,.0f})",
            f"- cv: {n.cv:.2%}",
            f"- threshold = {NOISE_RULE} = {n.threshold:.2%}",
        ]
    out += summary(r.checks)
    out += r.judgement
    if r.harness:
        out += ["", "## Benchmark harness", "", harness_note(r.harness, r.overridden)]
    out += ["", "## Trials", ""]
    out += [
        "| trial | PR | lever | hypothesis | gate | score (tokens/s/device) "
        "| delta vs incumbent | decision | device-s |",
        "|---|---|---|---|---|---:|---:|---|---:|",
    ]
    for c in r.candidates:
        changes = "; ".join(f"{k}: " + " -> ".join(map(_value, v)) for k, v in c.changes.items())
        lever = changes if c.lever == " + ".join(c.changes) else f"{c.lever} ({changes})"
        score = _num(c.score) if c.score is not None else (c.status or "-")
        cells = [c.trial, f"#{c.pr}" if c.pr is not None else "-", lever, _hypothesis(c.hypothesis)]
        cells += [_gate(c), score, _num(c.gain, "+.2%"), _decision(c)]
        out.append("| " + " | ".join(_cell(x) for x in [*cells, f"{c.device_seconds:.1f}"]) + " |")
    sourced = [c for c in r.candidates if c.hypothesis.sources]
    if sourced:
        out += ["", "Sources:", ""]
        out += [f"- {c.trial}: " + "; ".join(c.hypothesis.sources) for c in sourced]
    out += r.predictions
    out += lessons_section(r)
    out += ["", "## Calibration and profile runs", ""]
    out += ["| trial | role | status | score (tokens/s/device) | profile | device-s |"]
    out += ["|---|---|---|---:|---|---:|"]
    for run in r.runs:
        prof = run.profile or {}
        parts = [f"{k} {_float(prof.get(k)) or 0:.0%}" for k in _PROFILE_PARTS if k in prof]
        cells = [run.trial, run.role, run.status or "running", _num(run.score)]
        cells += [", ".join(parts) if prof else "-", f"{run.device_seconds:.1f}"]
        out.append("| " + " | ".join(_cell(x) for x in cells) + " |")
    run_cost = sum(run.device_seconds for run in r.runs)
    out += ["", f"Calibration and profile runs cost {run_cost:.1f} device-seconds.", ""]
    out += ["## Final recipe", ""]
    if r.recipe_diff:
        out += [f"Incumbent: {r.final_trial}.", "", "```diff", r.recipe_diff, "```"]
    else:
        out.append(f"{NO_CHANGE.capitalize()}: the tuned recipe is the baseline.")
    out += ["", "## Cost", ""]
    out += [f"- total: {r.device_seconds:.1f} device-seconds = {r.device_hours:.4f} GPU-hours"]
    if r.budget_device_hours is not None:
        left = r.budget_device_hours - r.device_hours
        out += [f"- budget: {r.budget_device_hours:.4f} GPU-hours", f"- left: {left:.4f} GPU-hours"]
    if r.llm:
        out += [f"- LLM agent: {llm_line(r.llm)}"]
    if r.assumptions:
        out += ["", "## Assumptions the agent made", ""]
        out += [f"- {' '.join(q.split())[:300]}: took the default" for q in r.assumptions]
    out += ["", "## Stopped", ""]
    if r.stopped:
        out += [f"Reason: {r.stop_reason or '-'}", ""] + [f"- {x}" for x in r.evidence]
    else:
        out.append("Not stopped: the campaign is still in progress.")
    out += ["", "## Plot", "", "![trials, incumbent and cost](report.png)", ""]
    return "\n".join(out)


def write_report(events: list[LedgerEvent], workdir: Path) -> Path:
    """Write ``workdir/report.md`` and ``workdir/report.png``; returns the Markdown path."""
    workdir.mkdir(parents=True, exist_ok=True)
    report = build_report(events)
    md = workdir / "report.md"
    ledger = ["## Ledger", "", anchor_line(events), ""]
    md.write_text(render_markdown(report) + "\n".join(["", *ledger]), encoding="utf-8")
    render_plot(report, workdir / "report.png")
    return md
