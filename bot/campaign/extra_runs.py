"""The judgement's extra runs, one step per call: A/B re-measurement of a candidate, the noise
recalibration of a new incumbent whose layout changes the variance, and the final confirmation
of the winner against the baseline (``docs/judgement.md``).

Each run is requested in the ledger (``run_requested``) before it starts, then admitted,
launched and charged like any trial; a resumed campaign finds the requested run that has not
finished and runs it (``reconcile`` already waited for one that was launched). The decisions
are ``bot/campaign/judgement.py``'s and ``gate/sequential.py``'s.
"""

from __future__ import annotations

from typing import cast

from bot.campaign.context import CampaignContext
from bot.campaign.judgement import PairedOutcome, incumbent_runs, paired_outcome, pairs_of
from bot.state.model import CampaignState, TrialRecord
from gate import budget, noise, sequential
from gate.events import StopReason
from gate.events_judgement import Arm, ConfirmationRequested, Phase, RunRequested


def remeasure(
    ctx: CampaignContext,
    state: CampaignState,
    record: TrialRecord,
    confirm_bar: float | None = None,
) -> PairedOutcome | None:
    """One step of a candidate's A/B re-measurement; its verdict once decided, else None.
    ``confirm_bar``: its first run beat that one-run bar (``paired_outcome``)."""
    trial = record.trial
    runs = state.judgement.requested(trial, "remeasure")
    refused = _next_run(ctx, state, runs)
    if refused is not None:
        return PairedOutcome("close", f"not decided: {refused}")
    if any(state.trials.get(r.trial) is None or not _finished(state, r) for r in runs):
        return None  # a run just finished: decide on the next call
    verdict = paired_outcome(state, runs, confirm_bar)
    if verdict is not None:
        return verdict
    arm: Arm = "incumbent" if len(runs) % 2 == 0 else "candidate"
    pair = len(runs) // 2 + 1
    _request(
        ctx,
        f"{trial}-{'a' if arm == 'incumbent' else 'b'}{pair}",
        phase="remeasure",
        of=trial,
        arm=arm,
        recipe_of=state.incumbent if arm == "incumbent" else trial,
        pair=pair,
    )
    return None


def recalibrate(ctx: CampaignContext, state: CampaignState) -> bool:
    """One step of a new incumbent's recalibration when its merge moved a variance key;
    False when there is nothing to do."""
    incumbent = state.incumbent
    if incumbent == "baseline" or incumbent in state.judgement.recalibrations:
        return False
    proposal = state.trials[incumbent].proposal
    keys = noise.variance_keys(proposal.changes if proposal else {})
    if not keys:
        return False
    runs = state.judgement.requested(incumbent, "recalibration")
    if any(state.trials.get(r.trial, TrialRecord(trial="")).refused for r in runs):
        return False  # the budget cannot: it is judged with the noise it has
    if _next_run(ctx, state, runs) is not None:
        return True
    if any(not _finished(state, r) for r in runs):
        return True
    if any(_failed(state, r) for r in runs):
        return False  # a run of it failed: the failed-rerun rule would refuse the next
    own = incumbent_runs(state)
    if len(own) >= noise.MIN_RUNS:
        scores = [s for _, s in own]
        model = noise.calibrate(scores)
        ctx.ledger.append(
            ctx.name,
            "noise_recalibrated",
            {
                "incumbent": incumbent,
                "keys": keys,
                **model.model_dump(),
                "scores": scores,
                "trials": [t for t, _ in own],
            },
        )
        return True
    _request(
        ctx,
        f"recal-{incumbent}-{len(runs) + 1}",
        phase="recalibration",
        of=incumbent,
        arm="incumbent",
        recipe_of=incumbent,
    )
    return True


def end(ctx: CampaignContext, reason: StopReason, evidence: list[str]) -> None:
    """Stop the campaign; with a winner not yet confirmed, confirm it against the baseline
    first (``confirm`` then stops with this reason)."""
    state = ctx.state()
    done = state.judgement.confirmation
    pairs = state.params.confirm_pairs if state.params else sequential.CONFIRM_PAIRS
    confirmed = done is not None and done.winner == state.incumbent
    if state.incumbent == "baseline" or confirmed or pairs == 0:
        ctx.stop(reason, evidence)
        return
    ctx.ledger.append(
        ctx.name,
        "confirmation_requested",
        {
            "winner": state.incumbent,
            "pairs": pairs,
            "reason": reason,
            "evidence": evidence,
        },
    )


def confirm(ctx: CampaignContext, state: CampaignState) -> bool:
    """One step of the final confirmation; False when none is under way."""
    request = state.judgement.confirmation
    if request is None or state.judgement.confirmed is not None or state.stopped:
        return False
    winner = request.winner
    runs = state.judgement.requested(winner, "confirmation")
    refused = _next_run(ctx, state, runs)
    if refused is None and any(not _finished(state, r) for r in runs):
        return True
    pairs, problem = pairs_of(state, runs)
    note = refused or problem or ""
    if note or len(pairs) >= request.pairs:
        _confirmed(ctx, request, pairs, runs, note)
        return True
    arm: Arm = "baseline" if len(runs) % 2 == 0 else "winner"
    pair = len(runs) // 2 + 1
    _request(
        ctx,
        f"confirm-{winner}-{'a' if arm == 'baseline' else 'b'}{pair}",
        phase="confirmation",
        of=winner,
        arm=arm,
        recipe_of="baseline" if arm == "baseline" else winner,
        pair=pair,
    )
    return True


def _confirmed(
    ctx: CampaignContext,
    request: ConfirmationRequested,
    pairs: list[tuple[float, float]],
    runs: list[RunRequested],
    note: str,
) -> None:
    interval = sequential.confidence_interval(pairs) if pairs else None
    ctx.ledger.append(
        ctx.name,
        "confirmation_finished",
        {
            "winner": request.winner,
            "pairs": len(pairs),
            "speedup": interval.speedup if interval else None,
            "low": interval.low if interval else None,
            "high": interval.high if interval else None,
            "level": sequential.CONFIDENCE,
            "trials": [r.trial for r in runs],
            "note": note,
        },
    )
    ctx.stop(cast(StopReason, request.reason), list(request.evidence))


def _request(
    ctx: CampaignContext,
    run: str,
    *,
    phase: Phase,
    of: str,
    arm: Arm,
    recipe_of: str,
    pair: int | None = None,
) -> None:
    """``run_requested`` first, then the run (the next call finds it finished)."""
    payload = {"trial": run, "phase": phase, "of": of, "arm": arm, "recipe_of": recipe_of}
    ctx.ledger.append(ctx.name, "run_requested", {**payload, "pair": pair})
    ctx.progress.update(ctx.state(), phase, f"{run}: {arm} ({recipe_of})")
    _next_run(ctx, ctx.state(), [RunRequested.model_validate(payload | {"pair": pair})])


def _next_run(ctx: CampaignContext, state: CampaignState, runs: list[RunRequested]) -> str | None:
    """Run the first requested run that has not finished; the refusal's message when the
    launch checks refuse it (now or earlier), else None."""
    for request in runs:
        record = state.trials.get(request.trial)
        if record is not None and record.refused is not None:
            return f"{request.trial} was refused: {record.refused.message}"
        if record is not None and record.finished is not None:
            continue
        params = ctx.params(state)
        if request.recipe_of == "baseline":
            text = params.recipe_text
        else:
            proposal = state.trials[request.recipe_of].proposal
            assert proposal is not None, request.recipe_of
            text = proposal.recipe_text
        recipe = ctx.recipe(text, request.trial)
        if not ctx.bench(request.trial, request.phase, recipe):
            refused = ctx.state().trials[request.trial].refused
            return f"{request.trial} was refused: {refused.message if refused else 'by the budget'}"
        return None
    return None


def _finished(state: CampaignState, request: RunRequested) -> bool:
    record = state.trials.get(request.trial)
    return record is not None and record.finished is not None


def _failed(state: CampaignState, request: RunRequested) -> bool:
    """Failed on its own (an interrupted run says nothing and is replaced)."""
    record = state.trials.get(request.trial)
    finished = record.finished if record is not None else None
    return finished is not None and budget.failed_on_its_own(finished)
