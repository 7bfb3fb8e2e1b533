"""Ledger events of an LLM agent: each model call, each tool call it asked for, each
assumption it was told to make, and each trimming of its conversation.

A ``model_called`` event holds what the model answered (its content blocks) besides what it
cost, so a bot killed in the middle of a conversation rebuilds it from the ledger instead of
paying for the same calls again (``bot/agents/claude/replay.py``).
"""

from __future__ import annotations

from typing import Any

from gate.event_base import Event


class ModelCalled(Event):
    """One Messages API call that returned (after its retries)."""

    KIND = "model_called"
    conversation: str
    """The decision it belongs to: ``d<n>``, n the decisions the campaign acted on before."""
    call: int
    """Its index in that conversation, from 0."""
    model: str
    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    stop_reason: str | None
    """end_turn, tool_use, max_tokens, stop_sequence, refusal, ..."""
    tool_calls: list[str]
    """Names of the tools it called, in order."""
    cost_usd: float
    """From the token counts and the model's price (``bot/agents/claude/prices.py``)."""
    attempts: int = 1
    """HTTP attempts it took (retries after 429, 5xx, 529 and timeouts included)."""
    request_id: str | None = None
    content: list[dict[str, Any]]
    """The assistant's content blocks as the API returned them (text, tool_use)."""
    decision: str | None = None
    """``propose``, ``request_profile`` or ``stop`` when this answer's decision was accepted
    (ledgers before ``tool_finished``; now null: the event is written before its tools run)."""
    server_model: str | None = None
    """The model the server claimed to answer with, when it differs from ``model`` (the
    configured one, which the price and the report use)."""
    usage_problem: str | None = None
    """Why the API's usage numbers were not believed (negative, or beyond what was sent or
    ``max_tokens``); the token counts and ``cost_usd`` are then the bounds charged instead."""
    request_chars: int | None = None
    """Characters of the request sent (JSON): the bound on its input tokens."""


class AgentAssumption(Event):
    """The model asked instead of deciding; it was told to take the default and say which."""

    KIND = "agent_assumption"
    conversation: str
    call: int
    question: str
    """What the model asked (its text, shortened)."""
    answer: str
    """What it was told."""


class ToolStarted(Event):
    """A tool call of the model started (written before it runs, so a resume knows of it)."""

    KIND = "tool_started"
    conversation: str
    call: int
    """The ``model_called`` call whose answer asked for it."""
    tool_use_id: str
    name: str


class ToolFinished(Event):
    """A tool call ended: answered, refused, or stopped at its deadline."""

    KIND = "tool_finished"
    conversation: str
    call: int
    tool_use_id: str
    name: str
    outcome: str
    """``ok``, ``error`` (a refusal or malformed input, sent back to the model) or
    ``timeout`` (stopped at its deadline; a resume answers it the same, without rerunning)."""
    seconds: float
    message: str | None = None
    """The error or timeout text the model got (shortened)."""
    decision: str | None = None
    """``propose``, ``request_profile`` or ``stop`` when this call's decision was accepted."""


class ConversationTrimmed(Event):
    """Old tool results were cut from a request to keep the conversation within its bound."""

    KIND = "conversation_trimmed"
    conversation: str
    call: int
    """The call whose request was trimmed."""
    blocks: int
    """Tool results (and old texts) replaced by a one-line summary."""
    chars_before: int
    chars_after: int
