"""The campaign's calibration of the post-launch checks, after the noise calibration.

The layout-only variants of the baseline (``bot.campaign.layout_variants``) run once each as
``layout_check`` trials, charged like any run; the reference is calibrated from them and the
calibration runs (``gate.postlaunch_reference.calibrate``) and written to the ledger as
``checks_calibrated``, so a restarted bot folds it back instead of measuring again. A variant
the pre-launch gate does not allow, the budget refuses, or that fails is left out and named in
the reference's notes; without any, the band comes from the baseline's repeats and the floors.
"""

from __future__ import annotations

from bot.campaign.context import CampaignContext
from bot.campaign.layout_variants import layout_variants
from bot.campaign.recipe_edit import apply_changes
from bot.interfaces import Role
from bot.state.model import CampaignState
from gate import prelaunch
from gate.errors import AttuneError
from gate.events import TrialFinished
from gate.models import StepRecord, TrialResult
from gate.postlaunch_reference import calibrate

ROLE: Role = "layout_check"
RESERVE_RUNS = 3
"""Baseline-sized runs the budget must still cover after a layout variant; below that the
variant is skipped (the reference then has the wide floors): candidates come first."""


def calibrate_checks(ctx: CampaignContext) -> None:
    """Run the missing layout variants, then write ``checks_calibrated``; nothing once it is
    written, before the noise is calibrated, or once the campaign stopped."""
    state = ctx.state()
    if state.checks_reference is not None or state.noise is None or state.stopped is not None:
        return
    params = ctx.params(state)
    baseline = ctx.baseline_effective(state)
    variants = layout_variants(baseline, cores=ctx.cores)
    notes = [] if variants else [f"no layout variants for {baseline.framework}: baseline repeats"]
    measured: list[tuple[str, list[StepRecord]]] = []
    described: list[str] = []
    for i, variant in enumerate(variants, 1):
        trial = f"layout-{i}"
        recipe = ctx.recipe(apply_changes(params.recipe_text, variant.changes), trial)
        record = state.trials.get(trial)
        if record is not None and record.refused is not None:
            notes.append(f"{trial} ({variant.description}) not run: {record.refused.message}")
            continue
        if record is None or _needs_run(record.finished):
            try:
                effective = ctx.executor.resolve(recipe)
            except AttuneError as exc:
                notes.append(f"{trial} ({variant.description}) not run: {exc}")
                continue
            report = prelaunch.judge(baseline, effective, ctx.registry)
            if report.verdict != "allow":
                notes.append(
                    f"{trial} ({variant.description}) not run: the gate says {report.verdict}"
                )
                continue
            left = params.budget_device_hours * 3600 - state.spent_device_seconds
            cost = ctx.executor.forecast(effective)
            reserve = RESERVE_RUNS * ctx.executor.forecast(baseline)
            if not affordable(left, cost, reserve):
                notes.append(
                    f"{trial} ({variant.description}) not run: the {left:.0f} device-s left "
                    f"are kept for candidates (it needs {cost:.0f} + {reserve:.0f} in reserve)"
                )
                continue
            if ctx.stop_if_requested():
                return
            ctx.progress.update(state, "calibrate", f"{trial}: {variant.description}")
            refused = not ctx.bench(trial, ROLE, recipe)
            state = ctx.state()
            if refused:
                refusal = state.trials[trial].refused
                why = refusal.message if refusal else "refused"
                notes.append(f"{trial} ({variant.description}) not run: {why}")
                continue
        steps = _steps(ctx, state, trial)
        if steps is None:
            notes.append(f"{trial} ({variant.description}) left out: it did not finish ok")
            continue
        measured.append((trial, steps))
        described.append(variant.description)
    repeats = []
    for t in state.role_trials("calibration"):
        steps = _steps(ctx, state, t.trial)
        if steps is not None:
            repeats.append((t.trial, steps))
    try:
        reference = calibrate(repeats, measured, variants=described, notes=notes)
    except ValueError:  # no calibration run logged a loss: judge_finished has only the 5% rule
        return
    ctx.ledger.append(ctx.name, "checks_calibrated", reference.model_dump())


def affordable(left_s: float, cost_s: float, reserve_s: float) -> bool:
    """Whether a layout variant forecast to cost ``cost_s`` leaves ``reserve_s`` of the
    ``left_s`` device-seconds for candidates."""
    return left_s >= cost_s + reserve_s


def _needs_run(finished: TrialFinished | None) -> bool:
    return finished is None or finished.interrupted


def _steps(ctx: CampaignContext, state: CampaignState, trial: str) -> list[StepRecord] | None:
    """The step records of a trial that finished ok (from its ``result.json``)."""
    record = state.trials.get(trial)
    if record is None or not record.finished or record.finished.status != "ok":
        return None
    if record.finished.interrupted:
        return None
    path = ctx.executor.workdir / "trials" / trial / "result.json"
    if not path.exists():
        return None
    return TrialResult.model_validate_json(path.read_text()).steps
