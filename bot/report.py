"""The campaign report (Markdown and plot), rebuilt from one campaign's ledger events alone."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.campaign_state import fold
from bot.report_model import (
    NO_CHANGE,
    CampaignReport,
    CandidateRow,
    Hypothesis,
    IncumbentStep,
    RunRow,
)
from bot.report_plot import render_plot as render_plot  # re-exported: part of this API
from gate.budget import trial_charge
from gate.ledger import LedgerEvent
from gate.models import NoiseModel

_PROFILE_PARTS = ("compute", "communication", "cpu", "idle")


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _charge(event: LedgerEvent) -> float:
    try:
        return trial_charge(event)
    except (KeyError, TypeError, ValueError):
        return 0.0


def _role(trial: str, started: dict[str, str]) -> str:
    if trial in started:
        return started[trial]
    if trial.startswith("baseline-"):
        return "calibration"
    if trial.startswith("profile-"):
        return "profile"
    return "candidate" if trial[:1] == "c" and trial[1:].isdigit() else "other"


def build_report(events: list[LedgerEvent]) -> CampaignReport:
    """Fold the events of one campaign into its report; pure, and tolerant of a partial ledger."""
    report = CampaignReport(campaign=events[0].campaign if events else "")
    opened: dict[str, Any] = {}
    started: dict[str, str] = {}
    cands: dict[str, CandidateRow] = {}
    runs: dict[str, RunRow] = {}
    merged: list[str] = []
    for e in events:
        p = e.payload
        trial = str(p["trial"]) if "trial" in p else None
        if trial is not None and trial not in report.order and e.kind != "profile_requested":
            report.order.append(trial)
        if e.kind == "campaign_opened":
            opened = p
            report.baseline = p.get("baseline")
            report.recipe_path = p.get("recipe_path")
            report.budget_device_hours = _float(p.get("budget_device_hours"))
        elif e.kind == "noise_calibrated":
            try:
                report.noise = NoiseModel.model_validate(p)
            except ValidationError:
                report.noise = None
        elif e.kind == "campaign_stopped":
            report.stopped, report.stop_reason = True, p.get("reason")
            report.evidence = [str(x) for x in p.get("evidence") or []]
        if trial is None:
            continue
        if e.kind == "trial_started":
            started[trial] = str(p.get("role") or _role(trial, {}))
        if _role(trial, started) == "candidate" or e.kind == "candidate_proposed":
            _fold_candidate(cands.setdefault(trial, CandidateRow(trial=trial)), e)
            if e.kind == "pr_merged":
                merged.append(trial)
        elif e.kind in ("trial_started", "trial_finished"):
            run = runs.setdefault(trial, RunRow(trial=trial, role=_role(trial, started)))
            run.role = _role(trial, started)
            if e.kind == "trial_finished":
                run.status, run.score = p.get("status"), _float(p.get("score"))
                run.device_seconds += _charge(e)
                run.profile = p.get("profile") if isinstance(p.get("profile"), dict) else None
    state = fold(report.campaign, events)  # the numbers every other surface prints
    report.candidates = list(cands.values())
    report.runs = list(runs.values())
    report.device_seconds = state.spent_device_seconds
    report.device_hours = report.device_seconds / 3600
    if report.noise is not None:
        report.incumbent.append(IncumbentStep(trial="baseline", score=report.noise.mean))
    for trial in merged:
        score = state.winner_score(trial)  # the mean of its runs, as the judgement used
        if score is not None:
            report.incumbent.append(IncumbentStep(trial=trial, score=score))
    report.speedup = state.speedup
    if merged:
        report.final_trial = merged[-1]
        tuned = cands[merged[-1]].recipe_text
        base = opened.get("recipe_text")
        if tuned is not None and base is not None:
            path = opened.get("recipe_path") or "recipe.yaml"
            lines = difflib.unified_diff(
                str(base).splitlines(), tuned.splitlines(), f"baseline/{path}", f"tuned/{path}"
            )
            report.recipe_diff = "\n".join(line.rstrip("\n") for line in lines)
    return report


def _fold_candidate(row: CandidateRow, e: LedgerEvent) -> None:
    p = e.payload
    if e.kind == "candidate_proposed":
        row.lever = " + ".join(str(k) for k in p.get("lever") or [])
        row.changes = {str(k): list(v) for k, v in (p.get("changes") or {}).items()}
        row.hypothesis = Hypothesis(
            bottleneck=str(p.get("bottleneck") or ""),
            mechanism=str(p.get("mechanism") or ""),
            expected_gain_pct=_float(p.get("expected_gain_pct")),
            sources=[str(s) for s in p.get("sources") or []],
        )
        text = p.get("recipe_text")
        row.recipe_text = str(text) if text is not None else None
    elif e.kind == "pr_opened":
        row.pr = int(p["pr"]) if p.get("pr") is not None else None
    elif e.kind == "gate_checked":
        row.verdict = p.get("verdict")
        row.findings = [f for f in p.get("findings") or [] if isinstance(f, dict)]
    elif e.kind == "launch_refused":
        row.refusal_reason, row.refusal = p.get("reason"), str(p.get("message") or "")
    elif e.kind == "trial_finished":
        row.status, row.score = p.get("status"), _float(p.get("score"))
        row.device_seconds += _charge(e)
    elif e.kind == "trial_judged":
        row.decision, row.reason = p.get("decision"), p.get("reason")
        row.gain = _float(p.get("gain"))
        if row.score is None:
            row.score = _float(p.get("score"))
    elif e.kind == "pr_merged":
        row.merged = True
    elif e.kind == "pr_closed":
        row.closed = True


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _cell(value: str) -> str:
    return value.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ") or "-"


def _num(value: float | None, fmt: str = ",.0f") -> str:
    return "-" if value is None else format(value, fmt)


def _hypothesis(h: Hypothesis) -> str:
    text = f"{h.bottleneck}: {h.mechanism}" if h.bottleneck else h.mechanism
    if h.expected_gain_pct is not None:
        text += f", expected {h.expected_gain_pct:+g}%"
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
    return (
        f"**Outcome:** {speed} `{r.baseline or '-'}` ({threshold}); "
        f"{len(r.candidates)} candidate trial(s), {merged} merged; "
        f"{r.device_hours:.4f} GPU-hours; {state}."
    )


def render_markdown(report: CampaignReport) -> str:
    """The report as a deterministic Markdown document (no clock, no absolute paths)."""
    r = report
    out = [f"# attune campaign report: {r.campaign or '-'}", "", _outcome_line(r), ""]
    out += ["## Noise model", ""]
    if r.noise is None:
        out.append("Not calibrated yet.")
    else:
        n = r.noise
        out += [
            f"- runs: {n.runs}",
            f"- mean: {n.mean:,.0f} tokens/s/device (std {n.std:,.0f})",
            f"- cv: {n.cv:.2%}",
            f"- threshold = max(3%, 3 x cv) = {n.threshold:.2%}",
        ]
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
    out += ["", "## Calibration and profile runs", ""]
    out += ["| trial | role | status | score (tokens/s/device) | profile | device-s |"]
    out += ["|---|---|---|---:|---|---:|"]
    for run in r.runs:
        prof = run.profile or {}
        parts = [f"{k} {_float(prof.get(k)) or 0:.0%}" for k in _PROFILE_PARTS]
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
    md.write_text(render_markdown(report), encoding="utf-8")
    render_plot(report, workdir / "report.png")
    return md
