"""What the rules agent's lever catalogues (``bot/agents/levers/moves.py``, ``gpu_moves.py``) tell
the checks: which keys may move together (coupled splits) and which moves are still open."""

from __future__ import annotations

from bot.agents.levers.directions import blocked_directions, direction
from bot.agents.rules import MOVES
from bot.interfaces import AgentView, ProbeOf


def coupled_splits(view: AgentView) -> list[frozenset[str]]:
    """Key sets the catalogue moves together as one coupled parallel split."""
    make = MOVES.get(view.framework)
    if make is None:
        return []
    moves = make(dict(view.incumbent_values), view.cores)
    return [frozenset(m.changes) for m in moves if m.coupled]


def remaining_moves(view: AgentView, probe_of: ProbeOf, tried: set[str]) -> list[str]:
    """The catalogue's moves no finished trial rules out: layout, not backed off after a
    failure, not closed before, valid, not run, predicted to fit."""
    make = MOVES.get(view.framework)
    if make is None:
        return []
    blocked = blocked_directions(view.history)
    lost = {
        (k, repr(new))
        for item in view.history
        if item.decision == "close"
        for k, (_, new) in item.changes.items()
    }
    values = view.incumbent_values
    left = []
    for move in make(dict(values), view.cores):
        keys = list(move.changes)
        if any(k not in view.layout_sources for k in keys):
            continue
        if any((k, direction(values.get(k), v)) in blocked for k, v in move.changes.items()):
            continue
        if any((k, repr(v)) in lost for k, v in move.changes.items()):
            continue
        probe = probe_of(dict(move.changes))
        if probe is None or probe.fingerprint in tried or not probe.fits:
            continue
        left.append(", ".join(f"{k}={v}" for k, v in move.changes.items()) + " (not tried)")
    return left
