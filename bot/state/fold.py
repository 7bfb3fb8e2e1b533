"""Fold a campaign's ledger events back into its state (``bot/state/model.py``): the only
memory a campaign has. ``campaign_state`` is the one way to read it."""

from __future__ import annotations

from bot.state.model import CampaignState
from gate import budget
from gate.events import (
    CampaignOpened,
    CampaignResumed,
    CampaignStopped,
    CandidateProposed,
    ChecksCalibrated,
    Event,
    ForgeReady,
    GateChecked,
    LaunchRefused,
    NoiseCalibrated,
    PrClosed,
    PrMerged,
    ProfileRequested,
    PrOpened,
    TrialAbandoned,
    TrialFinished,
    TrialLaunched,
    TrialStarted,
)
from gate.events_agent import AgentAssumption, ModelCalled
from gate.events_campaign import ProposalRefused
from gate.events_judgement import (
    ConfirmationFinished,
    ConfirmationRequested,
    NoiseRecalibrated,
    RunRequested,
    TrialJudged,
)
from gate.events_lessons import LessonsProposed
from gate.events_prediction import PredictionMade
from gate.ledger import Ledger, LedgerEvent
from gate.models import NoiseModel
from gate.postlaunch_reference import PostLaunchReference


def fold(campaign: str, events: list[LedgerEvent]) -> CampaignState:
    """Replay ``events`` (one campaign's, in order) into its state, each as its typed event
    (``LedgerEvent.event``: old shapes upcast)."""
    state = CampaignState(campaign=campaign)
    for entry in events:
        apply(state, entry.event)
    state.spent_device_seconds = sum((t.device_seconds for t in state.trials.values()), 0.0)
    return state


def campaign_state(ledger: Ledger, campaign: str) -> CampaignState:
    """The one way to read a campaign's state: its ledger events, folded."""
    return fold(campaign, ledger.events(campaign))


def apply(state: CampaignState, event: Event) -> None:
    """Record one event in ``state``. Never fails: an event is a fact, checked before it was
    written. Kinds the state does not keep (the agent's tool calls) pass through."""
    match event:
        case CampaignOpened():
            state.params = event
            state.acting_for = event.by
        case ForgeReady():
            state.tuned_pr, state.tuned_branch = event.tuned_pr, event.tuned_branch
            state.pinned_sha = event.base_sha
        case NoiseCalibrated():
            state.noise = NoiseModel.model_validate(event.model_dump(exclude={"v", "scores"}))
        case ChecksCalibrated():
            state.checks_reference = PostLaunchReference.model_validate(
                event.model_dump(exclude={"v"})
            )
        case CampaignStopped():
            state.stopped = event
        case LessonsProposed():
            state.lessons_proposed = event
        case CampaignResumed():
            state.stopped = None
            state.acting_for = event.by or state.acting_for
        case ModelCalled():
            state.llm["input_tokens"] = state.llm.get("input_tokens", 0) + event.input_tokens
            state.llm["output_tokens"] = state.llm.get("output_tokens", 0) + event.output_tokens
            state.llm["cost_usd"] = state.llm.get("cost_usd", 0) + event.cost_usd
            state.llm["calls"] = state.llm.get("calls", 0) + 1
        case ProposalRefused():
            state.refused_proposals.append(event)
            state.tried.add(event.fingerprint)
        case AgentAssumption():
            state.assumptions.append(event.question)
        case (
            RunRequested() | NoiseRecalibrated() | ConfirmationRequested() | ConfirmationFinished()
        ):
            state.judgement.apply(event)
        case _:
            _apply_trial(state, event)


def _apply_trial(state: CampaignState, event: Event) -> None:
    match event:
        case ProfileRequested():
            record = state.trial(event.trial)
            record.role = "profile"
            state.profile_requests[record.trial] = event.incumbent
        case CandidateProposed():
            record = state.trial(event.trial)
            record.role, record.proposal = "candidate", event
        case PrOpened():
            record = state.trial(event.trial)
            record.pr, record.head_sha, record.branch = event.pr, event.head_sha, event.branch
            record.base_sha = state.pinned_sha
        case GateChecked():
            record = state.trial(event.trial)
            record.gate_verdict, record.gate_findings = event.verdict, list(event.findings)
            state.tried.add(event.fingerprint)
        case LaunchRefused():
            state.trial(event.trial).refused = event
        case PredictionMade():
            state.trial(event.trial).prediction = event
        case TrialStarted():
            record = state.trial(event.trial)
            if event.role != "layout_check":  # a calibration variant is no move the agent made
                state.tried.add(event.fingerprint)
            record.predicted_peak_bytes = event.predicted_peak_bytes
            record.role = record.role or event.role
            record.started, record.launch, record.finished = True, None, None
        case TrialLaunched():
            state.trial(event.trial).launch = event
        case TrialAbandoned():
            record = state.trial(event.trial)
            record.started, record.launch = False, None
        case TrialFinished():
            _apply_finished(state, event)
        case TrialJudged():
            state.trial(event.trial).judged = event
        case PrMerged():
            record = state.trial(event.trial)
            record.merged_sha = state.pinned_sha = event.sha
            state.incumbent = record.trial
        case PrClosed():
            state.trial(event.trial).closed = True


def _apply_finished(state: CampaignState, event: TrialFinished) -> None:
    record = state.trial(event.trial)
    record.finished = event
    record.device_seconds += budget.charge(event)
    if record.role == "profile" and event.profile:
        incumbent = state.profile_requests.get(record.trial, state.incumbent)
        state.profiles[incumbent] = event.profile
