"""The model's tool calls in the ledger: each written as it starts (``tool_started``) and as it
ends (``tool_finished``), so a resumed conversation knows which ran, which timed out and which
were cut short by ``attune stop`` or a killed bot, and never pays for or hangs on them again."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from bot.agents.claude.tools import Decision, Outcome, ToolBox
from gate.events_agent import ToolFinished, ToolStarted
from gate.ledger import Ledger, LedgerEvent

Started = set[tuple[int, str]]
Finished = dict[tuple[int, str], ToolFinished]


def recorded(events: Sequence[LedgerEvent], conversation: str) -> tuple[Started, Finished]:
    """(call, tool_use_id) of the conversation's tool calls that started, and of those that
    finished with their ``tool_finished`` events."""
    tools = [
        t
        for t in (e.event for e in events if e.kind in ("tool_started", "tool_finished"))
        if isinstance(t, ToolStarted | ToolFinished) and t.conversation == conversation
    ]
    started = {(t.call, t.tool_use_id) for t in tools}
    finished = {(t.call, t.tool_use_id): t for t in tools if isinstance(t, ToolFinished)}
    return started, finished


def runner(
    ledger: Ledger,
    campaign: str,
    box: ToolBox,
    conversation: str,
    call: int,
    started: Started,
    finished: Finished,
) -> Callable[[dict[str, Any]], Outcome]:
    """Run one tool call of answer ``call``, recorded as it starts and as it ends.

    Replaying a recorded answer: a call that finished runs again (a pure read: the same
    answer), one that timed out gets the same answer without running, and one that
    started and never finished (``attune stop``, a killed bot) is not run again."""

    def run(use: dict[str, Any]) -> Outcome:
        name, use_id = str(use.get("name")), str(use.get("id"))
        key = (call, use_id)
        done = finished.get(key)
        if done is not None and done.outcome == "timeout":
            return Outcome(done.message or f"{name} timed out", True)
        if done is not None:
            return box.call(name, use.get("input"))
        if key in started:
            return Outcome(
                f"{name} did not finish before the campaign stopped (attune stop, or the "
                "bot ended) and was not run again: call it again, narrower, if you need it",
                True,
            )
        ids = {"conversation": conversation, "call": call, "tool_use_id": use_id}
        ledger.append(campaign, "tool_started", {**ids, "name": name[:100]})
        began = time.monotonic()
        outcome = box.call(name, use.get("input"))
        if outcome.interrupted:
            return outcome  # no tool_finished: a resume does not run it again
        result = "timeout" if outcome.timed_out else "error" if outcome.is_error else "ok"
        ledger.append(
            campaign,
            "tool_finished",
            {
                **ids,
                "name": name[:100],
                "outcome": result,
                "seconds": round(time.monotonic() - began, 3),
                "message": outcome.text[:2000] if outcome.is_error else None,
                "decision": kind(outcome.decision),
            },
        )
        return outcome

    return run


def kind(decision: Decision | None) -> str | None:
    if decision is None:
        return None
    return {"Proposal": "propose", "ProfileRequest": "request_profile", "Stop": "stop"}[
        type(decision).__name__
    ]
