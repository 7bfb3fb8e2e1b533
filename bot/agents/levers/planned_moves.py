"""The model-guided agent's moves over a priced layout space (``perfmodel/plan.py``): each
one-lever step from the incumbent with its corrected gain and spread, the same step paired with
a memory saver when it does not fit alone, and the lever effects learned from the campaign's
measurements that correct them (``perfmodel/residuals.py``). Pure: the agent probes the moves."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bot.agents.levers.layout_space import past_trials
from bot.agents.levers.split_moves import BOTH_OVERLAPS
from bot.interfaces import AgentView
from perfmodel.plan import RECOMPUTE, Layout, own_value
from perfmodel.residuals import Residuals, expected_improvement, fit_residuals

Key = tuple[tuple[str, Any], ...]
OVERLAPS = "overlaps"
"""Both data-parallel overlaps on at once: one declared coupled step (Megatron-LM refuses the
parameter gather's overlap without the gradient reduction's)."""
SAVERS = 2
"""Memory-saver pairings priced for a step that does not fit alone (the best by gain)."""


def key(levers: dict[str, Any]) -> Key:
    return tuple(sorted(levers.items(), key=lambda kv: kv[0]))


def changes_of(lever: str, value: Any) -> dict[str, Any]:
    """The recipe keys one lever's value sets."""
    if lever == OVERLAPS:
        return dict(BOTH_OVERLAPS)
    return dict(RECOMPUTE[value]) if lever == "recompute" else {lever: value}


@dataclass(frozen=True)
class Move:
    """A step from the incumbent: one lever (or both overlaps), optionally paired with a memory
    saver (a second lever that makes it fit); its corrected log gain, that gain's spread, and a
    trial's device-seconds."""

    lever: str
    value: Any
    gain: float
    sd: float
    cost: float
    saver: tuple[str, Any] | None = None

    def improvement(self, bar: float) -> float:
        return expected_improvement(self.gain, self.sd, bar)

    @property
    def changes(self) -> dict[str, Any]:
        out = changes_of(self.lever, self.value)
        if self.saver is not None:
            out.update(changes_of(*self.saver))
        return out


def _step(start: dict[str, Any], levers: dict[str, Any]) -> tuple[str, Any] | None:
    """The step from ``start`` to ``levers``: one lever, or both overlaps switched on together."""
    moved = [k for k in start if levers.get(k) != start[k]]
    if len(moved) == 1:
        return moved[0], levers[moved[0]]
    if sorted(moved) == sorted(BOTH_OVERLAPS) and all(levers[k] is True for k in moved):
        return OVERLAPS, True
    return None


def toward(optimum: Layout, lever: str, value: Any) -> bool:
    if lever == OVERLAPS:
        return all(optimum.levers.get(k) is True for k in BOTH_OVERLAPS)
    return bool(optimum.levers.get(lever) == value)


def corrected(layout: Layout, learned: Residuals) -> float:
    """A layout's tokens/s/device by the calibrated model times its learned lever effects."""
    return layout.tokens_per_s_per_device * math.exp(
        learned.step(learned.baseline, layout.levers)[0]
    )


def _move(
    start: dict[str, Any],
    x: Layout,
    now: Layout,
    learned: Residuals,
    forecast_s: float,
    step: tuple[str, Any],
    saver: tuple[str, Any] | None = None,
) -> Move:
    mean, sd = learned.step(start, x.levers)
    gain = math.log(x.tokens_per_s_per_device / now.tokens_per_s_per_device) + mean
    cost = forecast_s * now.tokens_per_s_per_device / x.tokens_per_s_per_device
    return Move(*step, gain=gain, sd=sd, cost=cost, saver=saver)


def neighbours(
    start: dict[str, Any],
    by_levers: dict[Key, Layout],
    optimum: Layout,
    learned: Residuals,
    forecast_s: float,
) -> list[Move]:
    """Every one-lever step from the incumbent the space prices (a trial's device-seconds: the
    campaign's forecast of the incumbent's, scaled by the predicted step time): toward the
    optimum first, then by predicted gain per device-hour."""
    now = by_levers[key(start)]
    out = []
    for x in by_levers.values():
        step = _step(start, x.levers)
        if step is not None:
            out.append(_move(start, x, now, learned, forecast_s, step))
    out.sort(key=lambda n: (not toward(optimum, n.lever, n.value), -n.gain / max(n.cost, 1e-9)))
    return out


def paired(
    step: Move,
    start: dict[str, Any],
    by_levers: dict[Key, Layout],
    learned: Residuals,
    forecast_s: float,
) -> list[Move]:
    """``step`` with one more lever moved that the memory model says lowers its peak (a higher
    TP or PP, more recompute, a smaller micro-batch...): the best ``SAVERS`` by gain."""
    alone = by_levers.get(key({**start, step.lever: step.value}))
    if step.lever == OVERLAPS or alone is None or alone.peak_memory_bytes is None:
        return []
    now = by_levers[key(start)]
    out = []
    for y in by_levers.values():
        moved = [k for k in start if y.levers[k] != start[k]]
        if len(moved) != 2 or step.lever not in moved or y.levers[step.lever] != step.value:
            continue
        if y.peak_memory_bytes is None or y.peak_memory_bytes >= alone.peak_memory_bytes:
            continue
        other = next(k for k in moved if k != step.lever)
        saver = (other, y.levers[other])
        out.append(_move(start, y, now, learned, forecast_s, (step.lever, step.value), saver))
    out.sort(key=lambda n: -n.gain)
    return out[:SAVERS]


def learned_residuals(view: AgentView, by_levers: dict[Key, Layout]) -> Residuals:
    """The lever effects learned from every measured proposal of the campaign: its layout
    replayed from the history, its score relative to the baseline's over the calibrated
    model's (layouts outside the priced space are left out)."""
    names = list(next(iter(by_levers.values())).levers)
    baseline_values, past = past_trials(view, whole=True)
    baseline = {name: own_value(baseline_values, name) for name in names}
    base = by_levers.get(key(baseline))
    measured = []
    for trial in past:
        if trial.relative is None or trial.failed or base is None:
            continue
        levers = {name: own_value(trial.layout, name) for name in names}
        layout = by_levers.get(key(levers))
        if layout is not None and trial.relative > 0:
            predicted = layout.tokens_per_s_per_device / base.tokens_per_s_per_device
            measured.append((levers, math.log(trial.relative / predicted)))
    return fit_residuals(baseline, measured, [x.levers for x in by_levers.values()])
