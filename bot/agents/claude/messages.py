"""What attune says to the model: the opening message of a decision and the answer to each
of the model's turns. Pure functions of their inputs, so a replayed conversation is the same
conversation."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.agents.claude.source_tree import SourceTree
from bot.agents.claude.tools import Decision, Outcome
from bot.interfaces import AgentView
from bot.render.words import count

TAKE_THE_DEFAULT = (
    "No one answers questions during a campaign. Take the default and record the assumption: "
    "state it in one line, then act with one tool call (propose, request_profile or stop)."
)
MAX_TOOL_CALLS = 8
"""Tool calls of one turn that run; the rest are answered "not run" (a turn of ~100 reads
once grew the next request past the context)."""
MAX_CONVERSATION_CHARS = 300_000
"""Characters of a request's messages (JSON) at most, about 75k tokens: older tool results
are summarised in one line each past it (``bound``)."""
KEEP_CHARS = 200
"""A block this short is kept whole when trimming."""
TOO_MANY = (
    "not run: at most {cap} tool calls per turn; ask for this one again in your next turn if "
    "you still need it"
)
TRIMMED = (
    "[trimmed to keep the conversation within its bound: a {name} result of {chars:,} "
    "characters; call it again if you need it]"
)
TRUNCATED = (
    "Your answer was cut off at max_tokens{where}. Be brief: one short tool call, no long "
    "reasoning in text."
)


def opening(view: AgentView, tree: SourceTree) -> str:
    """The campaign as the model first sees it in a decision."""
    layout = {
        k: view.incumbent_values[k] for k in view.layout_sources if k in view.incumbent_values
    }
    lines = [
        f"Framework: {view.framework} {tree.version}. Its source: {tree.package}/ "
        f"(read_source and grep_source paths are relative to its parent, as registry sources).",
        f"Incumbent: {view.incumbent}. Its layout settings (the keys you may tune):",
        json.dumps(layout, sort_keys=True, default=str),
        "get_registry(key) gives a key's class, reason and the source line that reads it.",
    ]
    if view.profile is None:
        lines.append("Profile of the incumbent: none yet.")
    else:
        lines.append(f"Profile of the incumbent: {view.profile.model_dump_json()}")
    lines.append(
        f"A candidate must beat the incumbent by {view.threshold:.1%} (the noise threshold). "
        f"Budget left: {view.budget_left_s:.0f} device-seconds; the next trial is forecast at "
        f"{view.forecast_s:.0f}. CPU cores (or devices) per trial: {view.cores}."
    )
    for h in view.history:
        moves = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in h.changes.items())
        gain = f"{h.gain:+.1%}" if h.gain is not None else "-"
        lines.append(f"- {h.trial}: {moves}; status {h.status}, {h.decision}, gain {gain}")
    if view.lessons:
        lines.append("Accepted lessons (reviewed by people); cite the ids you rely on:")
        lines += [
            f"- {x.id}: {x.claim} (levers {x.levers}, {x.effect} {x.gain_pct:+.0f}% over "
            f"{count(x.trials, 'trial')})"
            for x in view.lessons
        ]
    lines.append("Decide the next step.")
    return "\n".join(lines)


@dataclass
class Reply:
    """attune's answer to one model turn."""

    content: list[dict[str, Any]]
    """The next user message's content blocks."""
    decision: Decision | None = None
    """The first decision that passed its checks, if any: the conversation ends."""
    question: str | None = None
    """The model's text when it asked instead of acting."""
    ok: bool = False
    """Whether the turn did something useful (a tool ran without error)."""
    interrupted: bool = False
    """``attune stop`` interrupted one of its tool calls: the conversation pauses there."""


def reply(
    content: list[dict[str, Any]],
    stop_reason: str | None,
    run: Callable[[dict[str, Any]], Outcome],
) -> Reply:
    """Run the turn's tool calls (none when the answer was truncated; at most
    ``MAX_TOOL_CALLS``) and answer them. ``run`` gets each ``tool_use`` block."""
    uses = [b for b in content if b.get("type") == "tool_use"]
    text = "\n".join(str(b.get("text", "")) for b in content if b.get("type") == "text").strip()
    if stop_reason == "max_tokens":
        where = " in the middle of a tool call; it was not run" if uses else ""
        results = [
            _result(u["id"], "not run: the call was cut off; send it again", True) for u in uses
        ]
        return Reply([*results, {"type": "text", "text": TRUNCATED.format(where=where)}])
    if not uses:
        return Reply([{"type": "text", "text": TAKE_THE_DEFAULT}], question=text or "(empty)")
    results, ok = [], False
    for n, use in enumerate(uses):
        if n >= MAX_TOOL_CALLS:
            results.append(_result(use["id"], TOO_MANY.format(cap=MAX_TOOL_CALLS), True))
            continue
        outcome = run(use)
        if outcome.interrupted:
            return Reply(results, interrupted=True)
        results.append(_result(use["id"], outcome.text, outcome.is_error))
        ok = ok or not outcome.is_error
        if outcome.decision is not None:
            return Reply(results, decision=outcome.decision, ok=True)
    return Reply(results, ok=ok)


@dataclass
class Bounded:
    messages: list[dict[str, Any]]
    blocks: int
    """Blocks summarised."""
    chars_before: int
    chars_after: int


def _chars(value: Any) -> int:
    return len(json.dumps(value, default=str))


def bound(history: list[dict[str, Any]], limit: int | None = None) -> Bounded:
    """``history`` within ``limit`` characters: the oldest tool results first, then the
    oldest long texts and tool inputs, are replaced by a one-line summary; the opening and
    the last message (the results the model is about to read) are kept. A pure function of
    the history, so a replayed conversation is trimmed the same way, and a resumed one whose
    recorded turns outgrew the context still fits."""
    limit = MAX_CONVERSATION_CHARS if limit is None else limit
    before = _chars(history)
    if before <= limit:
        return Bounded(history, 0, before, before)
    names = {
        b.get("id"): str(b.get("name"))
        for m in history
        if m["role"] == "assistant"
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    }
    out = [{**m, "content": copy.deepcopy(m["content"])} for m in history]
    size, blocks = before, 0
    for kinds in (("tool_result",), ("text", "tool_use")):
        for message in out[1:-1]:
            if size <= limit:
                return Bounded(out, blocks, before, size)
            content = message["content"]
            if not isinstance(content, list):
                continue
            for i, b in enumerate(content):
                if not isinstance(b, dict) or b.get("type") not in kinds:
                    continue
                old = _chars(b)
                if old <= KEEP_CHARS:
                    continue
                content[i] = _summary(b, names)
                size -= old - _chars(content[i])
                blocks += 1
    return Bounded(out, blocks, before, size)


def _summary(block: dict[str, Any], names: dict[Any, str]) -> dict[str, Any]:
    kind = block["type"]
    if kind == "tool_result":
        name = names.get(block.get("tool_use_id"), "tool")
        text = TRIMMED.format(name=name, chars=len(str(block.get("content", ""))))
        return {**block, "content": text}
    if kind == "tool_use":
        return {**block, "input": {"trimmed": f"{_chars(block.get('input')):,} characters"}}
    return {"type": "text", "text": f"[trimmed: {len(str(block.get('text', ''))):,} characters]"}


def _result(tool_use_id: str, text: str, is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


def assistant_blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    """The response's content blocks as the request shape (and the ledger) keep them."""
    out = []
    for b in blocks:
        if b.type == "text":
            out.append({"type": "text", "text": b.text})
        elif b.type == "tool_use":
            out.append({"type": "tool_use", "id": b.id, "name": b.name, "input": b.input})
        else:
            out.append(b.model_dump(mode="json", exclude_none=True))
    return out
