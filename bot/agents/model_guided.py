"""``--agent model``: global, model-guided search (``docs/tuner-bench.md``).

Each decision re-plans from the incumbent with the campaign's calibrated step-time model
(``AgentView.model``, ``perfmodel/plan.py``) corrected by the lever effects learned from the
campaign's own measurements (``perfmodel/residuals.py``: every measured proposal, replayed from
the history, says how far the calibrated model misprices the lever values it set). It prices
the whole gate-allowed layout space, takes the predicted optimum among the layouts that fit,
and proposes ONE lever of the way there (Megatron-LM's recompute granularity, method and layer
count move together as one declared coupled move; so do both data-parallel overlaps, since
Megatron-LM refuses the parameter gather's overlap alone; on a MoE model expert parallelism is
a lever too). Every step is probed by the campaign first: the framework resolves it and the
memory model corrected by the campaign's peaks and OOMs says whether it fits.

Each one-lever step has a predicted log gain ``g`` and a spread ``s`` (the learned effects'
posterior: wide for a lever value nobody measured, narrow for one measured); ``t`` is the noise
threshold's log. The rule, in order:

1. **Exploit.** Steps with ``g - s > t`` (beyond the noise by more than the band): toward the
   optimum first, then the best ``g`` per device-hour.
2. **Explore.** Else the step with the best expected improvement beyond the threshold,
   ``E[max(0, G - t)]`` for ``G ~ N(g, s)``, per device-hour, provided it is at least
   ``EXPLORE_MIN_EI`` and the budget left covers ``EXPLORE_TRIALS`` more trials of it;
   labelled exploration. Its measurement teaches the lever's effect, and the next decision
   re-plans.
3. **Stop** (exhausted) when neither holds, with the evidence: the best step, its gain and
   band, and the predicted optimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from bot.agents.levers.layout_space import budget_stop, past_trials
from bot.agents.levers.split_moves import BOTH_OVERLAPS, PARAM_GATHER_NEEDS_GRAD_REDUCE
from bot.interfaces import AgentView, Probe, ProbeOf, ProfileRequest, Proposal, Stop
from gate.words import count
from perfmodel.calibration import Calibration
from perfmodel.hardware import part
from perfmodel.plan import RECOMPUTE, Layout, layouts, lever_values, own_value
from perfmodel.residuals import Residuals, expected_improvement, fit_residuals

EXPLORE_TRIALS = 3
"""An exploration runs only while the budget left covers this many more trials of it."""
EXPLORE_MIN_EI = 0.0025
"""An exploration must be expected to clear the noise threshold by this much (log gain, 1%):
a move the model says is probably slower but might be much faster still qualifies; one it says
is surely slower, or at best marginal, does not."""
PROBES = 4
"""One-lever steps probed per decision at most (each resolves a candidate)."""
COMMUNICATION_LEVERS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "parallelism.tensor_parallel_degree",
    "expert_model_parallel_size",
    "overlaps",
)
OVERLAPS = "overlaps"
"""Both data-parallel overlaps on at once: one declared coupled step (Megatron-LM refuses the
parameter gather's overlap without the gradient reduction's)."""


def _changes(lever: str, value: Any) -> dict[str, Any]:
    if lever == OVERLAPS:
        return dict(BOTH_OVERLAPS)
    return dict(RECOMPUTE[value]) if lever == "recompute" else {lever: value}


def _step(start: dict[str, Any], levers: dict[str, Any]) -> tuple[str, Any] | None:
    """The step from ``start`` to ``levers``: one lever, or both overlaps switched on together."""
    moved = [k for k in start if levers.get(k) != start[k]]
    if len(moved) == 1:
        return moved[0], levers[moved[0]]
    if sorted(moved) == sorted(BOTH_OVERLAPS) and all(levers[k] is True for k in moved):
        return OVERLAPS, True
    return None


def _toward(optimum: Layout, lever: str, value: Any) -> bool:
    if lever == OVERLAPS:
        return all(optimum.levers.get(k) is True for k in BOTH_OVERLAPS)
    return bool(optimum.levers.get(lever) == value)


class ModelGuidedAgent:
    name = "model"

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        stop = budget_stop(view)
        if stop is not None:
            return stop
        here = probe_of({})
        if view.model is None or here is None or here.effective is None:
            return Stop(reason="exhausted", evidence=["no step-time model for this campaign"])
        calibration: Calibration = view.model.calibration
        space = list(
            layouts(
                here.effective,
                part(view.model.hardware),
                layout_keys=set(view.layout_sources),
                calibration=calibration,
                device_memory_gib=view.model.device_memory_gib,
                cores=view.cores,
            )
        )
        start = lever_values(here.effective, space)
        by_levers = {_key(x.levers): x for x in space}
        if _key(start) not in by_levers:
            return Stop(reason="exhausted", evidence=["the incumbent is not in its layout space"])
        learned = learned_residuals(view, by_levers)
        # the incumbent ran, so it fits whatever the uncalibrated memory model says
        fitting = [x for x in space if x.fits is not False or x.levers == start]
        optimum = max(fitting, key=lambda x: _corrected(x, learned))
        bar = math.log1p(view.threshold)
        ranked = self._neighbours(start, by_levers, optimum, learned, view.forecast_s)
        if not ranked:
            return Stop(reason="exhausted", evidence=["no one-lever step in the layout space"])

        def accepted(step: Move) -> Probe | None:
            probe = probe_of(_changes(step.lever, step.value))
            ok = probe is not None and probe.fingerprint not in tried and probe.fits
            return probe if ok else None

        probes = 0
        for step in ranked:  # exploit: beats the threshold by more than the band
            if step.gain - step.sd <= bar or probes >= PROBES:
                continue
            probes += 1
            if accepted(step) is not None:
                return self._proposal(view, step, optimum, learned, here, explore=False)
        hopeful = [n for n in ranked if n.improvement(bar) >= EXPLORE_MIN_EI]
        hopeful.sort(key=lambda n: -n.improvement(bar) / max(n.cost, 1e-9))
        for step in hopeful:  # explore: uncertain, worth it, and the budget allows it
            if EXPLORE_TRIALS * step.cost > view.budget_left_s or probes >= PROBES:
                continue
            probes += 1
            if accepted(step) is not None:
                return self._proposal(view, step, optimum, learned, here, explore=True)
        best = max(ranked, key=lambda n: n.improvement(bar))
        ahead = _pct(_log_gain(optimum, start, by_levers, learned))
        return Stop(
            reason="exhausted",
            evidence=[
                f"no untried one-lever step is predicted to beat the noise threshold "
                f"{100 * view.threshold:.1f}% by more than its band, nor expected to clear it "
                f"by {100 * EXPLORE_MIN_EI:g}% within the budget: the best, "
                f"{best.lever}={best.value}, is predicted {_pct(best.gain)} +-"
                f"{100 * math.expm1(best.sd):.1f}% (calibrated on {calibration.runs} runs, "
                f"lever effects learned from {count(learned.measured, 'measured layout')}); the "
                f"predicted optimum {_label(optimum)} is {ahead} over the incumbent"
            ],
        )

    @staticmethod
    def _neighbours(
        start: dict[str, Any],
        by_levers: dict[tuple[tuple[str, Any], ...], Layout],
        optimum: Layout,
        learned: Residuals,
        forecast_s: float,
    ) -> list[Move]:
        """Every one-lever step from the incumbent the space prices, with its corrected log
        gain, its spread and a trial's device-seconds (the campaign's forecast of the
        incumbent's, scaled by the predicted step time): toward the optimum first, then by
        predicted gain per device-hour. Only the steps taken are probed (each probe resolves a
        candidate through the framework: seconds for Megatron-LM)."""
        now = by_levers[_key(start)]
        out = []
        for x in by_levers.values():
            step = _step(start, x.levers)
            if step is None:
                continue
            mean, sd = learned.step(start, x.levers)
            gain = math.log(x.tokens_per_s_per_device / now.tokens_per_s_per_device) + mean
            cost = forecast_s * now.tokens_per_s_per_device / x.tokens_per_s_per_device
            out.append(Move(*step, gain=gain, sd=sd, cost=cost))
        out.sort(
            key=lambda n: (not _toward(optimum, n.lever, n.value), -n.gain / max(n.cost, 1e-9))
        )
        return out

    @staticmethod
    def _proposal(
        view: AgentView,
        step: Move,
        optimum: Layout,
        learned: Residuals,
        here: Probe,
        *,
        explore: bool,
    ) -> Proposal:
        lever, value = step.lever, step.value
        changes = _changes(lever, value)
        values = view.incumbent_values
        changes = {k: v for k, v in changes.items() if values.get(k) != v}
        gain, band = 100 * math.expm1(step.gain), 100 * math.expm1(step.sd)
        bar = math.log1p(view.threshold)
        why = (
            f"exploration: the model is uncertain here (predicted {gain:+.1f}%, band "
            f"+-{band:.1f}%), expected to clear the noise threshold by "
            f"{100 * step.improvement(bar):.1f}%, and the budget covers {EXPLORE_TRIALS}+ more "
            "trials; its measurement refits the model"
            if explore
            else f"predicted {gain:+.1f}% (band +-{band:.1f}%)"
        )
        neck = "communication" if lever in COMMUNICATION_LEVERS else "compute"
        if lever == OVERLAPS:
            lever, value = "overlap_grad_reduce and overlap_param_gather", "True"
            why += (
                ", one declared coupled move: Megatron-LM refuses overlap_param_gather without "
                f"overlap_grad_reduce ({PARAM_GATHER_NEEDS_GRAD_REDUCE})"
            )
        now = here.predicted_tokens_per_s or 0.0
        mechanism = (
            "the calibrated step-time model, corrected by the lever effects learned from "
            f"{count(learned.measured, 'measured layout')}, predicts the gate-allowed layout "
            f"space's optimum at {_label(optimum)}; one lever toward it: {lever}={value}, {why}, "
            f"{now * math.exp(step.gain):,.0f} tokens/s/device, "
            f"{step.cost / 3600:.3g} device-hours a trial"
        )
        return Proposal(
            lever=list(changes),
            changes={k: (values.get(k), v) for k, v in changes.items()},
            coupled=len(changes) > 1,
            bottleneck=neck,
            mechanism=mechanism,
            expected_gain_pct=gain,
            sources=[view.layout_sources.get(k, "-") for k in changes],
        )


@dataclass(frozen=True)
class Move:
    """A one-lever step: its lever and value, its corrected log gain and that gain's spread,
    and a trial's device-seconds."""

    lever: str
    value: Any
    gain: float
    sd: float
    cost: float

    def improvement(self, bar: float) -> float:
        return expected_improvement(self.gain, self.sd, bar)


def _key(levers: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(levers.items(), key=lambda kv: kv[0]))


def _corrected(layout: Layout, learned: Residuals) -> float:
    """A layout's tokens/s/device by the calibrated model times its learned lever effects."""
    return layout.tokens_per_s_per_device * math.exp(
        learned.step(learned.baseline, layout.levers)[0]
    )


def _log_gain(
    layout: Layout, start: dict[str, Any], by_levers: dict[Any, Layout], learned: Residuals
) -> float:
    return math.log(_corrected(layout, learned) / _corrected(by_levers[_key(start)], learned))


def _pct(log_gain: float) -> str:
    return f"{100 * math.expm1(log_gain):+.1f}%"


def learned_residuals(view: AgentView, by_levers: dict[Any, Layout]) -> Residuals:
    """The lever effects learned from every measured proposal of the campaign: its layout
    replayed from the history, its score relative to the baseline's over the calibrated
    model's (layouts outside the priced space are left out)."""
    names = list(next(iter(by_levers.values())).levers)
    baseline_values, past = past_trials(view, whole=True)
    baseline = {name: own_value(baseline_values, name) for name in names}
    base = by_levers.get(_key(baseline))
    measured = []
    for trial in past:
        if trial.relative is None or trial.failed or base is None:
            continue
        levers = {name: own_value(trial.layout, name) for name in names}
        layout = by_levers.get(_key(levers))
        if layout is not None and trial.relative > 0:
            predicted = layout.tokens_per_s_per_device / base.tokens_per_s_per_device
            measured.append((levers, math.log(trial.relative / predicted)))
    return fit_residuals(baseline, measured, [x.levers for x in by_levers.values()])


def _label(layout: Layout) -> str:
    return ", ".join(f"{k}={v}" for k, v in layout.levers.items())
