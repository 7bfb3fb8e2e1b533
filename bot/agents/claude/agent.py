"""The Claude agent: one conversation per decision, every call recorded in the ledger.

A decision's conversation is ``d<n>``, n the decisions the campaign acted on before it
(candidates proposed plus profiles requested), so it is the same conversation until the
campaign acts. On resume (a kill -9, a stop on API failures), the conversation is rebuilt
from its ``model_called`` events: their recorded answers are replayed and their tool calls,
pure reads, run again; the model is only called for what is missing. A decision already
accepted is returned without a call. A launch only ever follows the campaign's own ledger
events, so none repeats.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic

from bot.agents.claude import messages
from bot.agents.claude.api import AgentUnavailable, create_message, make_client
from bot.agents.claude.prices import Usage, cost_usd
from bot.agents.claude.settings import ClaudeSettings
from bot.agents.claude.source_tree import SourceTree
from bot.agents.claude.tool_specs import TOOLS
from bot.agents.claude.tools import Decision, ToolBox
from bot.campaign_state import fold
from bot.interfaces import AgentView, ProbeOf, Stop
from gate.ledger import Ledger
from gate.registry import Registry

MAX_CALLS = 16
"""Model calls one decision may take in one run of the bot."""
MAX_BAD_TURNS = 5
"""Turns in a row that achieve nothing (refusals, malformed input, truncation, questions)."""


class ClaudeAgent:
    name = "claude"

    def __init__(
        self,
        *,
        ledger: Ledger,
        campaign: str,
        registry: Registry,
        tree: SourceTree,
        settings: ClaudeSettings,
        playbook: str,
        client: anthropic.Anthropic | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.ledger, self.campaign = ledger, campaign
        self.registry, self.tree = registry, tree
        self.settings, self.playbook = settings, playbook
        self.client = client or make_client(settings)
        self.sleep = sleep

    def decide(self, view: AgentView, probe_of: ProbeOf, tried: set[str]) -> Decision:
        events = self.ledger.events(self.campaign)
        state = fold(self.campaign, events)
        conversation = f"d{len(state.candidates) + len(state.profile_requests)}"
        box = ToolBox(view, probe_of, tried, self.registry, self.tree, state)
        # the opening is a cache breakpoint too: every later call re-reads it at 0.1x
        cached = {"type": "ephemeral"}
        opening = {
            "type": "text",
            "text": messages.opening(view, self.tree),
            "cache_control": cached,
        }
        history: list[dict[str, Any]] = [{"role": "user", "content": [opening]}]
        calls = [e.payload for e in events if e.kind == "model_called"]
        spent = sum(float(p["cost_usd"]) for p in calls)
        asked = {
            e.payload["call"]
            for e in events
            if e.kind == "agent_assumption" and e.payload["conversation"] == conversation
        }
        call = 0
        for past in (p for p in calls if p["conversation"] == conversation):
            answer = messages.reply(past["content"], past["stop_reason"], box.call)
            if answer.question is not None and past["call"] not in asked:
                self._assume(conversation, past["call"], answer.question)
            if answer.decision is not None:
                return answer.decision
            history += [
                {"role": "assistant", "content": past["content"]},
                {"role": "user", "content": answer.content},
            ]
            call = past["call"] + 1
        bad = 0
        for _ in range(MAX_CALLS):
            if spent >= self.settings.spend_cap_usd:
                return Stop(
                    reason="agent_spend_cap",
                    evidence=[
                        f"the LLM spend cap of ${self.settings.spend_cap_usd:.2f} is reached "
                        f"(${spent:.4f} spent): raise ATTUNE_AGENT_SPEND_CAP_USD and resume"
                    ],
                )
            try:
                response, attempts = self._create(history)
            except AgentUnavailable as exc:
                return Stop(reason="agent_error", evidence=[f"{exc}; resume to continue"])
            content = messages.assistant_blocks(list(response.content))
            u = response.usage
            usage = Usage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
                cache_read_input_tokens=u.cache_read_input_tokens or 0,
            )
            cost = cost_usd(self.settings.price, usage)
            spent += cost
            answer = messages.reply(content, response.stop_reason, box.call)
            self.ledger.append(
                self.campaign,
                "model_called",
                {
                    "conversation": conversation,
                    "call": call,
                    "model": response.model or self.settings.model,
                    **usage.model_dump(),
                    "stop_reason": response.stop_reason,
                    "tool_calls": [str(b["name"]) for b in content if b["type"] == "tool_use"],
                    "cost_usd": round(cost, 8),
                    "attempts": attempts,
                    "request_id": response.id,
                    "content": content,
                    "decision": _kind(answer.decision),
                },
            )
            if answer.question is not None:
                self._assume(conversation, call, answer.question)
            if answer.decision is not None:
                return answer.decision
            bad = 0 if answer.ok else bad + 1
            if bad >= MAX_BAD_TURNS:
                return Stop(
                    reason="agent_error",
                    evidence=[f"{bad} turns in a row without a usable step; resume to continue"],
                )
            history += [
                {"role": "assistant", "content": content},
                {"role": "user", "content": answer.content},
            ]
            call += 1
        return Stop(
            reason="agent_error",
            evidence=[f"no decision in {MAX_CALLS} model calls; resume to continue"],
        )

    def _create(self, history: list[dict[str, Any]]) -> tuple[Any, int]:
        request = {
            "model": self.settings.model,
            "max_tokens": self.settings.max_tokens,
            "system": [
                {"type": "text", "text": self.playbook, "cache_control": {"type": "ephemeral"}}
            ],
            "tools": TOOLS,
            "messages": history,
        }
        if self.sleep is not None:
            return create_message(self.client, self.settings, request, sleep=self.sleep)
        return create_message(self.client, self.settings, request)

    def _assume(self, conversation: str, call: int, question: str) -> None:
        self.ledger.append(
            self.campaign,
            "agent_assumption",
            {
                "conversation": conversation,
                "call": call,
                "question": question[:2000],
                "answer": messages.TAKE_THE_DEFAULT,
            },
        )


def _kind(decision: Decision | None) -> str | None:
    if decision is None:
        return None
    return {"Proposal": "propose", "ProfileRequest": "request_profile", "Stop": "stop"}[
        type(decision).__name__
    ]
