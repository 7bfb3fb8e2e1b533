"""A TEST DOUBLE of an agent: proposes one fixed candidate once, then stops."""

from __future__ import annotations

from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop


class ProposesOnceDouble:
    """Scripted agent: ``proposal`` on the first decision, a stop after it."""

    name = "scripted"

    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal
        self.proposed = False

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        if self.proposed:
            return Stop(reason="exhausted", evidence=["scripted agent: done"])
        self.proposed = True
        return self.proposal
