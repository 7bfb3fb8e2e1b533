"""The Claude agent: one conversation per decision, every call recorded in the ledger.

A decision's conversation is ``d<n>``, n the decisions the campaign acted on before it
(candidates proposed plus profiles requested), so it is the same conversation until the
campaign acts. Each answer is written (``model_called``) as soon as it arrives, before any of
its tool calls runs, and each tool call as it starts and ends (``tool_runs.py``). On resume (a
kill -9, ``attune stop``, a stop on API failures), the conversation is rebuilt from the
ledger: recorded answers are replayed, their finished tool calls (pure reads) run again, and
the model is only called for what is missing; a decision already accepted is returned
without a call. Every request is bounded (``messages.bound``), so a conversation that grew
past the context still resumes. Usage is validated before it is charged
(``prices.validated_usage``). A launch only ever follows the campaign's own ledger events,
so none repeats.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic

from bot.agents.claude import messages, tool_runs
from bot.agents.claude.api import AgentUnavailable, create_message, make_client
from bot.agents.claude.prices import cost_usd, validated_usage
from bot.agents.claude.settings import ClaudeSettings
from bot.agents.claude.source_tree import SourceTree
from bot.agents.claude.tool_specs import TOOLS
from bot.agents.claude.tools import Decision, ToolBox
from bot.commands.stop import STOP_FILE
from bot.interfaces import AgentView, ProbeOf, Stop
from bot.state.fold import fold
from gate.events_agent import AgentAssumption, ModelCalled
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
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.ledger, self.campaign = ledger, campaign
        self.registry, self.tree = registry, tree
        self.settings, self.playbook = settings, playbook
        self.client = client or make_client(settings)
        self.sleep = sleep
        self.should_stop = should_stop or _stop_file(ledger.path.parent)

    def decide(self, view: AgentView, probe_of: ProbeOf, tried: set[str]) -> Decision:
        events = self.ledger.events(self.campaign)
        state = fold(self.campaign, events)
        conversation = f"d{len(state.candidates) + len(state.profile_requests)}"
        box = ToolBox(
            view,
            probe_of,
            tried,
            self.registry,
            self.tree,
            state,
            deadline_s=self.settings.tool_timeout_s,
            should_stop=self.should_stop,
        )
        # the opening is a cache breakpoint too: every later call re-reads it at 0.1x
        cached = {"type": "ephemeral"}
        opening = {
            "type": "text",
            "text": messages.opening(view, self.tree),
            "cache_control": cached,
        }
        history: list[dict[str, Any]] = [{"role": "user", "content": [opening]}]
        typed = [e.event for e in events if e.kind in ("model_called", "agent_assumption")]
        calls = [c for c in typed if isinstance(c, ModelCalled)]
        spent = sum(_charged(c.cost_usd) for c in calls)
        asked = {
            a.call
            for a in typed
            if isinstance(a, AgentAssumption) and a.conversation == conversation
        }
        started, finished = tool_runs.recorded(events, conversation)
        call = 0
        for past in (c for c in calls if c.conversation == conversation):
            box.begin_turn()
            run = tool_runs.runner(
                self.ledger, self.campaign, box, conversation, past.call, started, finished
            )
            answer = messages.reply(past.content, past.stop_reason, run)
            if answer.interrupted:
                return _interrupted()
            if answer.question is not None and past.call not in asked:
                self._assume(conversation, past.call, answer.question)
            if answer.decision is not None:
                return answer.decision
            history += [
                {"role": "assistant", "content": past.content},
                {"role": "user", "content": answer.content},
            ]
            call = past.call + 1
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
            bounded = messages.bound(history)
            if bounded.blocks:
                self.ledger.append(
                    self.campaign,
                    "conversation_trimmed",
                    {
                        "conversation": conversation,
                        "call": call,
                        "blocks": bounded.blocks,
                        "chars_before": bounded.chars_before,
                        "chars_after": bounded.chars_after,
                    },
                )
            request = self._request(bounded.messages)
            request_chars = len(json.dumps(request))
            try:
                response, attempts = self._create(request)
            except AgentUnavailable as exc:
                return Stop(reason="agent_error", evidence=[f"{exc}; resume to continue"])
            content = messages.assistant_blocks(list(response.content))
            usage, usage_problem = validated_usage(
                response.usage, request_chars=request_chars, max_tokens=self.settings.max_tokens
            )
            cost = cost_usd(self.settings.price, usage)
            spent += cost
            claimed = str(response.model or "")
            # written before any tool runs: a resume never pays for this answer again
            self.ledger.append(
                self.campaign,
                "model_called",
                {
                    "conversation": conversation,
                    "call": call,
                    "model": self.settings.model,
                    **usage.model_dump(),
                    "stop_reason": response.stop_reason,
                    "tool_calls": [str(b["name"]) for b in content if b["type"] == "tool_use"],
                    "cost_usd": round(cost, 8),
                    "attempts": attempts,
                    "request_id": response.id,
                    "content": content,
                    "decision": None,
                    "server_model": claimed[:200] if claimed != self.settings.model else None,
                    "usage_problem": usage_problem[:500] if usage_problem else None,
                    "request_chars": request_chars,
                },
            )
            box.begin_turn()
            run = tool_runs.runner(self.ledger, self.campaign, box, conversation, call, set(), {})
            answer = messages.reply(content, response.stop_reason, run)
            if answer.interrupted:
                return _interrupted()
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

    def _request(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "model": self.settings.model,
            "max_tokens": self.settings.max_tokens,
            "system": [
                {"type": "text", "text": self.playbook, "cache_control": {"type": "ephemeral"}}
            ],
            "tools": TOOLS,
            "messages": history,
        }

    def _create(self, request: dict[str, Any]) -> tuple[Any, int]:
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


def _stop_file(workdir: Path) -> Callable[[], bool]:
    """``attune stop`` writes this file beside the ledger (``bot/commands/stop.py``)."""
    return lambda: (workdir / STOP_FILE).exists()


def _charged(cost: float) -> float:
    """A recorded call's cost as the spend cap counts it: never negative, never NaN (a
    ledger written before usage was validated may hold either)."""
    return cost if math.isfinite(cost) and cost > 0 else 0.0


def _interrupted() -> Stop:
    return Stop(
        reason="requested",
        evidence=["attune stop interrupted the agent's tool call; resume to continue"],
    )
