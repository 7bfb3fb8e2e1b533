"""Ledger events of an LLM agent: each model call and each assumption it was told to make.

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
    """``propose``, ``request_profile`` or ``stop`` when this answer's decision was accepted."""


class AgentAssumption(Event):
    """The model asked instead of deciding; it was told to take the default and say which."""

    KIND = "agent_assumption"
    conversation: str
    call: int
    question: str
    """What the model asked (its text, shortened)."""
    answer: str
    """What it was told."""
