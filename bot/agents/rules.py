"""The default agent: deterministic rules from the profile and the trial history.

It names the bottleneck from the incumbent's profile (the largest of compute, communication,
CPU-side work and idle), picks ONE layout lever that addresses it (or one coupled parallel
split, declared as such), and writes the hypothesis with the registry's source line for the
lever. It asks for a profile when it has none for the incumbent, never proposes a
configuration already launched, backs off a direction that crashed or ran out of memory, and
stops when the budget cannot cover another trial or when every lever it knows is ruled out,
listing why for each.

With the experience bank (``AgentView.lessons``: accepted lessons whose scope matches the
campaign), a move an ``effect: faster`` lesson backs goes first, by its measured gain, and a move
a ``slower`` or ``fails`` lesson describes is skipped; the hypothesis names the lessons it used
(``Proposal.lessons_used``).
"""

from __future__ import annotations

from typing import Any

from bot.agents.lesson_use import cite, lesson_about
from bot.agents.levers.directions import blocked_directions, direction
from bot.agents.levers.gpu_moves import megatron_moves, torchtitan_moves
from bot.agents.levers.moves import Move, MoveCatalogue, embedded_moves
from bot.interfaces import (
    AgentView,
    HistoryItem,
    ProbeOf,
    ProfileRequest,
    Proposal,
    Stop,
)

MOVES: dict[str, MoveCatalogue] = {
    "embedded": embedded_moves,
    "megatron": megatron_moves,
    "torchtitan": torchtitan_moves,
}


def bottleneck(view: AgentView) -> str:
    """The largest share of the incumbent's profiled step: compute, communication (exposed),
    memory_copy, cpu or idle."""
    assert view.profile is not None
    p = view.profile
    fractions = {"compute": p.compute, "communication": p.communication, "cpu": p.cpu}
    fractions.update(memory_copy=p.memory_copy, idle=p.idle)
    return max(fractions, key=lambda k: fractions[k])


class RulesAgent:
    name = "rules"

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        if view.forecast_s > view.budget_left_s:
            return Stop(
                reason="budget",
                evidence=[
                    f"the next trial is forecast at {view.forecast_s:.0f} device-seconds and "
                    f"{view.budget_left_s:.0f} are left"
                ],
            )
        if view.profile is None:
            return ProfileRequest(
                reason=f"no profile of the incumbent ({view.incumbent}): the bottleneck is unclear"
            )
        neck = bottleneck(view)
        make = MOVES.get(view.framework)
        if make is None:
            return Stop(reason="exhausted", evidence=[f"no rules for {view.framework}"])
        moves = make(dict(view.incumbent_values), view.cores)
        values = view.incumbent_values
        lessons = {id(m): lesson_about(m.changes, values, view.lessons) for m in moves}

        def backed(m: Move) -> float:
            lesson = lessons[id(m)]
            return lesson.gain_pct if lesson is not None and lesson.effect == "faster" else 0.0

        # moves a lesson backs first (by its measured gain), then the bottleneck's moves,
        # each group by expected gain
        moves.sort(key=lambda m: (-backed(m), neck not in m.bottlenecks, -m.expected_gain_pct))
        blocked = blocked_directions(view.history)
        lost = {
            (k, repr(new)): item
            for item in view.history
            if item.decision == "close"
            for k, (_, new) in item.changes.items()
        }
        evidence: list[str] = []
        skipped: list[str] = []
        for first in moves:
            label = ", ".join(f"{k}={v}" for k, v in first.changes.items())
            old = {k: view.incumbent_values[k] for k in first.changes}
            lesson = lessons[id(first)]
            if lesson is not None and lesson.effect != "faster":
                evidence.append(f"{label}: {cite(lesson)}")
                skipped.append(lesson.id)
                continue
            move, onward = self._past_the_noise(first, lost, view.threshold)
            why = self._ruled_out(move, old, blocked, lost, probe_of, tried, view)
            if why:
                evidence.append(f"{label}: {why}")
                continue
            mechanism = (
                f"{neck} is {getattr(view.profile, neck):.0%} of the step; "
                + onward
                + move.mechanism
            )
            expected = move.expected_gain_pct
            if lesson is not None:
                mechanism += f". Backed by {cite(lesson)}"
                expected = lesson.gain_pct if lesson.gain_pct > 0 else expected
            if skipped:
                mechanism += f". Skipped what lessons {', '.join(skipped)} say loses"
            return Proposal(
                lever=list(move.changes),
                changes={k: (old[k], v) for k, v in move.changes.items()},
                coupled=move.coupled,
                bottleneck=neck,
                mechanism=mechanism,
                expected_gain_pct=expected,
                sources=[view.layout_sources.get(k, "-") for k in move.changes],
                lessons_used=([lesson.id] if lesson is not None else []) + skipped,
            )
        if not moves:
            evidence.append("every lever is already at its fastest known setting")
        return Stop(reason="exhausted", evidence=evidence)

    @staticmethod
    def _past_the_noise(
        move: Move, lost: dict[tuple[str, str], HistoryItem], threshold: float
    ) -> tuple[Move, str]:
        """The first step of ``move``'s direction not yet closed, when every closed step before
        it measured within the noise (not clearly slower), and why it goes that far."""
        notes: list[str] = []
        while move.further is not None:
            closed = [lost.get((k, repr(v))) for k, v in move.changes.items()]
            item = closed[0] if len(closed) == 1 else None
            if item is None or item.gain is None or item.gain <= -threshold:
                break
            notes.append(f"{item.trial} ({item.gain:+.1%})")
            move = move.further
        if not notes:
            return move, ""
        return move, (
            f"the smaller step{'s' if len(notes) > 1 else ''} {', '.join(notes)} closed within "
            f"the noise threshold {threshold:.1%}, which is no evidence against the direction, "
            "so one step further: "
        )

    @staticmethod
    def _ruled_out(
        move: Move,
        old: dict[str, Any],
        blocked: dict[tuple[str, str], str],
        lost: dict[tuple[str, str], HistoryItem],
        probe_of: ProbeOf,
        tried: set[str],
        view: AgentView,
    ) -> str | None:
        for key, new in move.changes.items():
            if key not in view.layout_sources:
                return "not a layout key in the registry"
            trial = blocked.get((key, direction(old[key], new)))
            if trial:
                return f"{trial} failed moving {key} this way; backing off"
            item = lost.get((key, repr(new)))
            if item is not None:
                return f"already tried in {item.trial}: {item.reason}"
        probe = probe_of(dict(move.changes))
        if probe is None:
            return "the framework's validation rejects it"
        if probe.fingerprint in tried:
            return "this effective configuration was already run"
        if not probe.fits:
            return f"the memory model says it does not fit: {probe.memory}"
        return None
