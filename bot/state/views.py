"""What the agent sees of a campaign's state: the history of its proposals and its view."""

from __future__ import annotations

from typing import Any

from bot.interfaces import AgentView, HistoryItem
from bot.state.model import CampaignState, TrialRecord
from gate import noise
from gate.models import EffectiveConfig
from gate.registry import Registry


def history(state: CampaignState) -> list[HistoryItem]:
    """What became of each proposal, for the agent (gain: the A/B mean where it ran)."""
    items = []
    for t in state.candidates:
        j = t.judged
        items.append(
            HistoryItem(
                trial=t.trial,
                changes={k: tuple(v) for k, v in t.proposal.changes.items()} if t.proposal else {},
                status=t.finished.status if t.finished else None,
                decision=j.decision if j else None,
                gain=(j.paired_mean if j.paired_mean is not None else j.gain) if j else None,
                reason=j.reason if j else "",
            )
        )
    return items


def agent_view(
    state: CampaignState,
    incumbent: EffectiveConfig,
    registry: Registry,
    *,
    forecast_s: float,
    cores: int,
) -> AgentView:
    """What the agent may see: never the ledger, the forge or the registry file itself."""
    assert state.params is not None
    return AgentView(
        framework=incumbent.framework,
        incumbent=state.incumbent,
        incumbent_values=incumbent.values,
        profile=state.profiles.get(state.incumbent),
        history=history(state),
        layout_sources=registry.layout_sources(),
        threshold=(state.judgement.noise or state.noise).threshold if state.noise else noise.FLOOR,
        # never below zero: a run stopped at the budget's limit may overshoot it by a little
        budget_left_s=max(
            0.0, state.params.budget_device_hours * 3600 - state.spent_device_seconds
        ),
        forecast_s=forecast_s,
        cores=cores,
    )


def trial_summary(t: TrialRecord) -> dict[str, Any]:
    """One trial as the LLM agent's ``get_history`` tool shows it: what it changed, the gate's
    verdict, its run and its judgement, the first line of its error; absent fields left out."""
    f, j = t.finished, t.judged
    row: dict[str, Any] = {"trial": t.trial, "role": t.role}
    if t.proposal:
        row["changes"] = {k: list(v) for k, v in t.proposal.changes.items()}
    row.update(gate=t.gate_verdict)
    if f:
        row.update(status=f.status, score=f.score)
    if j:
        row.update(decision=j.decision, gain=j.gain, reason=j.reason)
    if f and f.error:
        row["error"] = f.error.strip().splitlines()[0][:300]
    if t.refused:
        row["refused"] = t.refused.message
    return {k: v for k, v in row.items() if v is not None}
