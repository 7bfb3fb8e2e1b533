"""Which way a move turns a key, and which ways earlier runs failed: the one definition the rules
agent, the Claude agent's catalogue check, the lessons and their audit share."""

from __future__ import annotations

from typing import get_args

from bot.interfaces import HistoryItem
from gate.models import TrialStatus

FAILED: tuple[str, ...] = tuple(s for s in get_args(TrialStatus) if s != "ok")
"""Every run status but ``ok``: a run that says nothing good about its move."""


def direction(old: object, new: object) -> str:
    """How a move changes one key: ``up`` or ``down`` for numbers, ``=value`` otherwise
    (``=false`` for a boolean switched off), the way lessons write their levers. A boolean is
    never a number here: ``True > False`` would call switching a feature on "up"."""
    if isinstance(old, bool) or isinstance(new, bool):
        return f"={str(new).lower()}"
    if isinstance(old, int | float) and isinstance(new, int | float):
        return "up" if new > old else "down"
    return f"={new}"


def blocked_directions(history: list[HistoryItem]) -> dict[tuple[str, str], str]:
    """(key, direction) -> trial that failed that way: the agents back off these."""
    blocked = {}
    for item in history:
        if item.status in FAILED:
            for key, (old, new) in item.changes.items():
                blocked[(key, direction(old, new))] = item.trial
    return blocked
