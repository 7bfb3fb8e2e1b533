"""The default agent: deterministic rules from the profile and the trial history.

It names the bottleneck from the incumbent's profile (the largest of compute, communication,
CPU-side work and idle), picks ONE layout lever that addresses it (or one coupled parallel
split, declared as such), and writes the hypothesis with the registry's source line for the
lever. It asks for a profile when it has none for the incumbent, never proposes a
configuration already launched, backs off a direction that crashed or ran out of memory, and
stops when the budget cannot cover another trial or when every lever it knows is ruled out,
listing why for each.

Every move's expected gain is the campaign's calibrated step-time model's
(``Probe.predicted_gain_pct``, ``bot/campaign/predictions.py``), never a constant: the moves
it predicts faster beyond the noise threshold plus its band first, then the measured
bottleneck's other moves, each group ordered by predicted gain per device-hour, and a move predicted
slower than the incumbent by more than the model's error band is pruned before launch (named
in the hypothesis of the proposal that goes instead, or in the stop's evidence). On a GPU
framework the model may name the bottleneck instead of a profile run (its breakdown of the
incumbent's step), when it predicts a move beyond the noise; else the agent asks for a
profile. The catalogue steps tensor parallelism down by any power of two (8 -> 1 in one move
when the model predicts that best), moves expert parallelism likewise (up by one doubling),
and moves Megatron-LM's recompute with its method and layer count, and both overlaps
together, each one declared coupled move.

With the experience bank (``AgentView.lessons``: accepted lessons whose scope matches the
campaign), a move an ``effect: faster`` lesson backs goes first, by its measured gain, and a move
a ``slower`` or ``fails`` lesson describes is skipped; the hypothesis names the lessons it used
(``Proposal.lessons_used``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bot.agents.lesson_use import cite, lesson_about
from bot.agents.levers.directions import blocked_directions, direction
from bot.agents.levers.gpu_moves import megatron_moves, torchtitan_moves
from bot.agents.levers.layout_space import budget_stop
from bot.agents.levers.moves import Move, MoveCatalogue, embedded_moves
from bot.agents.levers.predicted import (
    MODEL_NAMES_THE_BOTTLENECK,
    SAVERS,
    beyond_noise,
    predicted_bottleneck,
    prediction_text,
    slower_beyond_band,
)
from bot.interfaces import (
    AgentView,
    HistoryItem,
    Probe,
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
        stop = budget_stop(view)
        if stop is not None:
            return stop
        unclear = f"no profile of the incumbent ({view.incumbent}): the bottleneck is unclear"
        if view.profile is not None:
            neck, named = bottleneck(view), ""
            share = getattr(view.profile, neck)
        else:  # the calibrated model may name it, if it also predicts a move beyond the noise
            here = probe_of({}) if view.framework in MODEL_NAMES_THE_BOTTLENECK else None
            found = predicted_bottleneck(view.model, here.effective if here else None)
            if found is None:
                return ProfileRequest(reason=unclear)
            (neck, share), named = found, " by the calibrated step-time model (no profile run)"
        make = MOVES.get(view.framework)
        if make is None:
            return Stop(reason="exhausted", evidence=[f"no rules for {view.framework}"])
        moves = make(dict(view.incumbent_values), view.cores)
        values = view.incumbent_values
        lessons = {id(m): lesson_about(m.changes, values, view.lessons) for m in moves}

        def backed(m: Move) -> float:
            lesson = lessons[id(m)]
            return lesson.gain_pct if lesson is not None and lesson.effect == "faster" else 0.0

        probed: dict[int, Probe | None] = {}

        def probe(m: Move) -> Probe | None:
            if id(m) not in probed:
                probed[id(m)] = probe_of(dict(m.changes))
            return probed[id(m)]

        def rate(m: Move) -> float | None:
            """Predicted gain per device-second of its trial (the calibrated model)."""
            p = probe(m)
            if p is None or p.predicted_gain_pct is None:
                return None
            return p.predicted_gain_pct / max(p.predicted_trial_device_s or 1.0, 1e-9)

        def clear(m: Move) -> bool:
            return beyond_noise(probe(m), view.threshold)

        # moves a lesson backs first (by its measured gain), then those the calibrated model
        # predicts beyond the noise and its band (a profile says where time goes, not what a
        # move gains), then the bottleneck's moves (a measurement the prior does not see), each
        # group by predicted gain per device-hour, moves the model cannot predict last
        moves.sort(
            key=lambda m: (
                -backed(m),
                not clear(m),
                not clear(m) and neck not in m.bottlenecks,
                rate(m) is None,
                -(rate(m) or 0.0),
            )
        )
        if view.profile is None and not any(clear(m) for m in moves):
            return ProfileRequest(reason=unclear + " (no move predicted beyond the noise)")
        blocked = blocked_directions(view.history)
        lost = {
            (k, repr(new)): item
            for item in view.history
            if item.decision == "close"
            for k, (_, new) in item.changes.items()
        }
        evidence: list[str] = []
        skipped: list[str] = []
        pruned: list[str] = []
        """Moves the calibrated model predicts slower than the incumbent beyond its band."""
        pruned_first: list[str] | None = None
        for first in moves:
            label = ", ".join(f"{k}={v}" for k, v in first.changes.items())
            old = {k: view.incumbent_values[k] for k in first.changes}
            lesson = lessons[id(first)]
            if lesson is not None and lesson.effect != "faster":
                evidence.append(f"{label}: {cite(lesson)}")
                skipped.append(lesson.id)
                continue
            move, onward = self._past_the_noise(first, lost, view.threshold)
            why = self._ruled_out(move, old, blocked, lost, probe(move), tried, view)
            alone = probe(move)
            if why and alone is not None and not alone.fits:
                paired = self._with_saver(move, alone, view, probe_of, tried)
                if paired is not None:  # one declared coupled move: hungry lever + saver
                    move, onward, why = paired, "", None
                    probed[id(move)] = probe_of(dict(move.changes))
                    old = {k: view.incumbent_values.get(k) for k in move.changes}
            if why:
                evidence.append(f"{label}: {why}")
                continue
            p = probe(move)
            assert p is not None  # a move the framework rejects is ruled out above
            if slower_beyond_band(p):
                pruned.append(f"{label}: pruned, {prediction_text(p)}")
                continue
            if view.profile is None and not beyond_noise(p, view.threshold):
                return ProfileRequest(reason=unclear + " (no move beyond the noise is left)")
            if pruned_first is None:
                pruned_first = self._pruned(moves, probe)
                pruned += [x for x in pruned_first if x not in pruned]
            mechanism = f"{neck} is {share:.0%} of the step{named}; " + onward + move.mechanism
            expected = p.predicted_gain_pct
            if expected is not None:
                mechanism += f". The calibrated step-time model: {prediction_text(p)}"
            if lesson is not None:
                mechanism += f". Backed by {cite(lesson)}"
                if expected is None and lesson.gain_pct > 0:
                    expected = lesson.gain_pct
            if skipped:
                mechanism += f". Skipped what lessons {', '.join(skipped)} say loses"
            if pruned:
                mechanism += ". Pruned before launch: " + "; ".join(pruned)
            return Proposal(
                lever=list(move.changes),
                changes={k: (old[k], v) for k, v in move.changes.items()},
                coupled=move.coupled,
                bottleneck=neck,
                mechanism=mechanism,
                expected_gain_pct=expected if expected is not None else 0.0,
                sources=[view.layout_sources.get(k, "-") for k in move.changes],
                lessons_used=([lesson.id] if lesson is not None else []) + skipped,
            )
        if not moves:
            evidence.append("every lever is already at its fastest known setting")
        return Stop(reason="exhausted", evidence=evidence + pruned)

    @staticmethod
    def _with_saver(
        move: Move, alone: Probe, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Move | None:
        """``move`` with a memory saver (``SAVERS``) as one coupled move, when the memory model
        says ``move`` alone does not fit and says the pair fits, and the calibrated model
        predicts the pair faster than the incumbent beyond its band."""
        for saver in SAVERS.get(view.framework, []):
            if set(saver) & set(move.changes) or any(k not in view.layout_sources for k in saver):
                continue
            if all(view.incumbent_values.get(k) == v for k, v in saver.items()):
                continue
            changes = {**move.changes, **saver}
            both = probe_of(changes)
            if both is None or not both.fits or both.fingerprint in tried:
                continue
            gain, band = both.predicted_gain_pct, both.band_pct or 0.0
            if gain is None or gain <= band:
                continue
            label = ", ".join(f"{k}={v}" for k, v in move.changes.items())
            saved = ", ".join(f"{k}={v}" for k, v in saver.items())
            return Move(
                changes,
                move.bottlenecks,
                f"{move.mechanism}. The memory model says {label} alone does not fit "
                f"({alone.memory}; alone it is {prediction_text(alone)}), so it is paired "
                f"with the memory saver {saved} as one declared coupled move: together they "
                f"fit ({both.memory}) and are {prediction_text(both)}",
                coupled=True,
            )
        return None

    @staticmethod
    def _pruned(moves: list[Move], probe: Callable[[Move], Probe | None]) -> list[str]:
        """Every move of the catalogue the model predicts slower beyond its band: recorded in
        the proposal that goes instead (each costs one prediction, no launch)."""
        out = []
        for m in moves:
            p = probe(m)
            if p is not None and slower_beyond_band(p):
                label = ", ".join(f"{k}={v}" for k, v in m.changes.items())
                out.append(f"{label}: pruned, {prediction_text(p)}")
        return out

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
        probe: Probe | None,
        tried: set[str],
        view: AgentView,
    ) -> str | None:
        closed = {id(lost.get((k, repr(new)))) for k, new in move.changes.items()}
        for key, new in move.changes.items():
            if key not in view.layout_sources:
                return "not a layout key in the registry"
            trial = blocked.get((key, direction(old[key], new)))
            if trial:
                return f"{trial} failed moving {key} this way; backing off"
            item = lost.get((key, repr(new)))
            if item is not None and len(closed) == 1:  # a coupled move: all its keys closed
                return f"already tried in {item.trial}: {item.reason}"
        if probe is None:
            return "the framework's validation rejects it"
        if probe.fingerprint in tried:
            return "this effective configuration was already run"
        if not probe.fits:
            return f"the memory model says it does not fit: {probe.memory}"
        return None
