"""A candidate's life, one step per call: ``propose`` makes it, ``advance`` does its next
missing step (pull request, gate check, benchmark, judgement, merge or close with its cost
comment). Each step is a ledger event first, so a resumed campaign does the next missing one."""

from __future__ import annotations

from bot import render
from bot.campaign.context import CampaignContext
from bot.campaign.extra_runs import remeasure
from bot.campaign.judgement import judge_finished
from bot.campaign.recipe_edit import apply_changes
from bot.checks import BASELINE_GATE_CHECK, GATE_CHECK
from bot.interfaces import CheckResult, Proposal
from bot.state.model import CampaignState, TrialRecord
from gate.errors import AttuneError
from gate.events import FindingRecord, TrialFinished
from gate.events_judgement import TrialJudged
from gate.ledger import LedgerEvent
from gate.models import EffectiveConfig, Recipe, TrialResult


def propose(ctx: CampaignContext, state: CampaignState, proposal: Proposal) -> bool:
    """Allocate the next candidate id to ``proposal``, unless it is refused before it
    becomes a candidate (``proposal_refused``: no id, no pull request, nothing charged);
    True when it became a candidate."""
    text = apply_changes(
        state.incumbent_recipe_text, {k: new for k, (_, new) in proposal.changes.items()}
    )
    if _refuse_proposal(ctx, state, proposal, text):
        return False
    n = len(state.candidates) + 1
    trial = f"c{n}"
    ctx.ledger.append(
        ctx.name,
        "candidate_proposed",
        {
            "trial": trial,
            "n": n,
            "title": proposal.title,
            **proposal.model_dump(mode="json"),
            "recipe_text": text,
        },
    )
    return True


def _refuse_proposal(
    ctx: CampaignContext, state: CampaignState, proposal: Proposal, text: str
) -> bool:
    """A move whose run this machine cannot hold (threads x ranks beyond its cores, batch x
    sequence beyond its memory: ``resources``) or that the memory model predicts not to fit
    the device (``predicted_oom``) is refused here, before it takes a candidate id;
    ``REFUSED_IN_A_ROW`` such refusals in a row stop the campaign as exhausted. A move the
    framework refuses is the gate's to judge (an ``invalid`` candidate), so it is let through."""
    try:
        effective = ctx.executor.resolve(ctx.recipe(text, "proposal"))
    except AttuneError:
        return False
    refusal = _machine_or_memory(ctx, effective)
    if refusal is None:
        return False
    reason, message = refusal
    ctx.ledger.append(
        ctx.name,
        "proposal_refused",
        {
            "title": proposal.title,
            "changes": proposal.model_dump(mode="json")["changes"],
            "fingerprint": effective.fingerprint(),
            "reason": reason,
            "message": message,
        },
    )
    ctx.progress.update(ctx.state(), "propose", f"refused: {proposal.title}: {message}")
    streak = _refused_in_a_row(ctx.ledger.events(ctx.name))
    if streak >= REFUSED_IN_A_ROW:
        ctx.stop("exhausted", [f"the last {streak} proposals were refused: {message}"])
    return True


def _machine_or_memory(ctx: CampaignContext, effective: EffectiveConfig) -> tuple[str, str] | None:
    """(reason, message) when the run cannot be held or is predicted not to fit; else None."""
    machine_refusal = getattr(ctx.executor, "machine_refusal", None)
    message = machine_refusal(effective) if machine_refusal is not None else None
    if message is not None:
        return "resources", message
    memory = ctx.executor.memory_verdict(effective)
    if memory is not None and not memory[0]:
        return "predicted_oom", memory[1]
    return None


def advance(ctx: CampaignContext, trial: str) -> None:
    """Do the next missing step for one candidate."""
    state = ctx.state()
    params = ctx.params(state)
    record = state.trials[trial]
    proposal = record.proposal
    assert proposal is not None and state.tuned_branch is not None
    assert state.pinned_sha is not None
    recipe = ctx.recipe(proposal.recipe_text, trial)
    if record.pr is None:
        pr = ctx.forge.open_candidate(
            branch=f"attune/{ctx.name}/{proposal.n}",
            base=state.tuned_branch,
            base_sha=state.pinned_sha,
            recipe_path=params.recipe_path,
            recipe_text=proposal.recipe_text,
            title=proposal.title,
            body=render.candidate_body(
                proposal,
                campaign=ctx.name,
                harness=state.harness[0],
                overridden=state.harness[1],
                simulation=params.simulation,
            ),
            labels=["attune", "attune:candidate"],
        )
        ctx.ledger.append(
            ctx.name,
            "pr_opened",
            {"trial": trial, "pr": pr.number, "branch": pr.head, "head_sha": pr.head_sha},
        )
        return
    if record.gate_verdict is None:
        _, report = ctx.executor.gate(trial, recipe, baseline=ctx.baseline_effective(state))
        # On GitHub the gate workflow posts GATE_CHECK: the campaign's own verdict (against the
        # original baseline) is a check of its own. A local forge runs no workflow.
        own = BASELINE_GATE_CHECK if params.repo is not None else GATE_CHECK
        ctx.forge.set_check(
            record.pr,
            CheckResult(
                name=own,
                conclusion="failure" if report.verdict == "reject" else "success",
                summary=render.gate_summary(report),
            ),
        )
        return
    if record.judged is None:
        _judge(ctx, state, record, recipe)
        return
    _settle(ctx, state, record)


def _judge(ctx: CampaignContext, state: CampaignState, record: TrialRecord, recipe: Recipe) -> None:
    trial = record.trial
    closing: str | None = None
    if record.gate_verdict == "reject":
        closing = _rejection(record.gate_findings)
    elif record.refused is not None:
        closing = record.refused.message
    elif record.finished is None and _same_as_incumbent(ctx, state, recipe):
        closing = f"identical in effect to the incumbent ({state.incumbent}): not run"
    elif record.finished is not None and record.finished.interrupted:
        closing = f"not measured: its run was interrupted ({_first_line(record.finished)})"
    elif record.finished is None:
        effective = ctx.executor.resolve(recipe)
        if ctx.executor.admit(trial, effective) is None:
            launch = ctx.executor.launch(trial, "candidate", recipe, effective)
            ctx.executor.finish(trial, launch)
        return
    if closing is not None:
        verdict = TrialJudged(
            trial=trial,
            decision="close",
            reason=closing,
            incumbent_score=state.incumbent_score,
            threshold=state.noise.threshold if state.noise else None,
        )
    else:
        first = judge_finished(state, _result(ctx, record))
        paired = None
        if first.decision == "remeasure":  # A/B pairs decide, or confirm a clear gain
            paired = remeasure(ctx, state, record, first.confirm_bar)
            if paired is None:
                return
        verdict = first.judged(trial, state.incumbent_score, paired)
    ctx.ledger.append(ctx.name, "trial_judged", verdict)
    ctx.progress.update(ctx.state(), f"trial {trial}", f"{verdict.decision}: {verdict.reason}")


def _same_as_incumbent(ctx: CampaignContext, state: CampaignState, recipe: Recipe) -> bool:
    """A candidate whose effective config equals the incumbent's has nothing to measure."""
    incumbent = ctx.recipe(state.incumbent_recipe_text, "incumbent")
    fingerprint = ctx.executor.resolve(recipe).fingerprint()
    return fingerprint == ctx.executor.resolve(incumbent).fingerprint()


def _result(ctx: CampaignContext, record: TrialRecord) -> TrialResult:
    path = ctx.executor.workdir / "trials" / record.trial / "result.json"
    return TrialResult.model_validate_json(path.read_text())


def _settle(ctx: CampaignContext, state: CampaignState, record: TrialRecord) -> None:
    """Carry out the judged decision on the forge and its cost comment, then ledger it.

    The cost comment goes before ``pr_merged``/``pr_closed``: once either is in the ledger
    the candidate is done, and a bot killed in between would never write it on restart.
    """
    assert record.judged is not None and record.pr is not None
    params = ctx.params(state)
    finished = record.finished
    cost = render.cost_comment(
        trial_s=record.device_seconds,
        status=finished.status if finished else "not launched",
        spent_s=state.spent_device_seconds,
        budget_h=params.budget_device_hours,
    )
    if record.judged.decision == "merge":
        assert state.pinned_sha is not None and record.head_sha is not None
        sha = ctx.forge.merge(
            record.pr, expected_base_sha=state.pinned_sha, expected_head_sha=record.head_sha
        )
        ctx.forge.comment(record.pr, cost, marker=render.COST_MARKER)
        ctx.ledger.append(
            ctx.name, "pr_merged", {"trial": record.trial, "pr": record.pr, "sha": sha}
        )
    else:
        ctx.forge.comment(
            record.pr, f"Closing: {record.judged.reason}.", marker=render.CLOSING_MARKER
        )
        ctx.forge.close(record.pr)
        ctx.forge.comment(record.pr, cost, marker=render.COST_MARKER)
        ctx.ledger.append(ctx.name, "pr_closed", {"trial": record.trial, "pr": record.pr})
    ctx.update_campaign_comment()


REFUSED_IN_A_ROW = 5
"""Proposals refused in a row (``proposal_refused``) that stop a campaign as exhausted."""


def _refused_in_a_row(events: list[LedgerEvent]) -> int:
    """``proposal_refused`` events since the last proposal that became a candidate."""
    streak = 0
    for event in reversed(events):
        if event.kind == "candidate_proposed":
            break
        streak += event.kind == "proposal_refused"
    return streak


def _first_line(finished: TrialFinished) -> str:
    return (finished.error or "no error recorded").strip().splitlines()[0]


def _rejection(findings: list[FindingRecord]) -> str:
    """Why the gate rejected a candidate: the framework's refusal when it was one."""
    for finding in findings:
        if finding.key_class == "invalid":
            return f"the pre-launch gate rejected it: {finding.reason} ({finding.source})"
    return "the pre-launch gate rejected it"
