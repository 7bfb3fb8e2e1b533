"""``--agent model``: global, model-guided search (``docs/tuner-bench.md``).

Each decision re-plans from the incumbent with the campaign's calibrated step-time and memory
models (``AgentView.model``, ``perfmodel/plan.py``): it prices the whole gate-allowed layout
space (the levers the registry classifies as layout, every combination the framework's rules
accept), takes the predicted optimum among the layouts that fit, and proposes ONE lever of the
way there (a lever whose keys move together, such as Megatron-LM's recompute granularity and
method, is one declared coupled move; so are both data-parallel overlaps switched on at once,
since Megatron-LM refuses the parameter gather's overlap alone). On a MoE model the planner
varies expert parallelism too. Every candidate step is probed by the campaign first:
the framework resolves it, the memory model corrected by the campaign's peaks and OOMs says
whether it fits, and the calibrated model says its gain over the incumbent and the band.

The rule, in order:

1. **Exploit.** Among the one-lever steps that fit, were not tried and are predicted to beat
   the noise threshold by more than the band, the step toward the optimum (its lever takes
   the optimum's value) with the best predicted gain per device-hour; else any such step.
2. **Explore.** None beats threshold + band, but a step predicted faster than the incumbent
   has an optimistic gain (prediction + band) beyond the threshold, and the budget left covers
   at least ``EXPLORE_TRIALS`` more trials of it: the step with the best optimistic gain per
   device-hour, labelled exploration. Its measurement refits the model (the band shrinks) and
   re-plans.
3. **Stop** (exhausted) when neither holds, with the evidence: the best predicted step, its
   gain and the band.
"""

from __future__ import annotations

import math
from typing import Any

from bot.agents.levers.layout_space import budget_stop
from bot.agents.levers.split_moves import BOTH_OVERLAPS, PARAM_GATHER_NEEDS_GRAD_REDUCE
from bot.interfaces import AgentView, Probe, ProbeOf, ProfileRequest, Proposal, Stop
from perfmodel.calibration import Calibration
from perfmodel.hardware import part
from perfmodel.plan import RECOMPUTE, Layout, layouts, lever_values

EXPLORE_TRIALS = 3
"""An exploration runs only while the budget left covers this many more trials of it."""
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
        # the incumbent ran, so it fits whatever the uncalibrated memory model says
        fitting = [x for x in space if x.fits is not False or x.levers == start]
        if not fitting:
            return Stop(reason="exhausted", evidence=["no layout of the space is predicted to fit"])
        optimum = max(fitting, key=lambda x: x.tokens_per_s_per_device)
        threshold_pct = 100 * view.threshold
        band = 100 * math.expm1(calibration.band)
        now = here.predicted_tokens_per_s or 0.0
        ranked = self._neighbours(start, space, optimum, now, view.forecast_s)
        if not ranked:
            return Stop(reason="exhausted", evidence=["no one-lever step in the layout space"])

        def accepted(lever: str, value: Any) -> Probe | None:
            probe = probe_of(_changes(lever, value))
            ok = probe is not None and probe.fingerprint not in tried and probe.fits
            return (
                probe if ok and probe is not None and probe.predicted_gain_pct is not None else None
            )

        probes = 0
        for lever, value, gain, _ in ranked:  # exploit: beats threshold + band
            if gain <= threshold_pct + band or probes >= PROBES:
                continue
            probes += 1
            probe = accepted(lever, value)
            if probe is not None and (probe.predicted_gain_pct or 0.0) > threshold_pct + band:
                return self._proposal(view, (lever, value, probe), optimum, here, explore=False)
        hopeful = [n for n in ranked if n[2] > 0.0 and n[2] + band > threshold_pct]
        hopeful.sort(key=lambda n: -(n[2] + band) / max(n[3], 1e-9))
        for lever, value, _, cost in hopeful:  # explore: uncertain, and the budget allows it
            if EXPLORE_TRIALS * cost > view.budget_left_s or probes >= PROBES:
                continue
            probes += 1
            probe = accepted(lever, value)
            if probe is not None and (probe.predicted_gain_pct or 0.0) > 0.0:
                return self._proposal(view, (lever, value, probe), optimum, here, explore=True)
        lever, value, gain, _ = max(ranked, key=lambda n: n[2])
        return Stop(
            reason="exhausted",
            evidence=[
                f"no one-lever step is predicted to beat the noise threshold "
                f"{threshold_pct:.1f}% by more than the model's band +-{band:.1f}%: the best, "
                f"{lever}={value}, is predicted {gain:+.1f}% (calibrated on "
                f"{calibration.runs} runs); the predicted optimum {_label(optimum)} is "
                f"{_gain(optimum, here):+.1f}% over the incumbent"
            ],
        )

    @staticmethod
    def _neighbours(
        start: dict[str, Any], space: list[Layout], optimum: Layout, now: float, forecast_s: float
    ) -> list[tuple[str, Any, float, float]]:
        """(lever, value, predicted gain %, a trial's device-seconds: the campaign's forecast of
        the incumbent's scaled by the predicted step time) of every one-lever step
        from the incumbent the space prices: toward the optimum first, then by predicted gain
        per device-hour. Only the steps taken are probed (each probe resolves a candidate
        through the framework: seconds for Megatron-LM)."""
        out = []
        for x in space:
            step = _step(start, x.levers)
            if step is None or now <= 0:
                continue
            gain = 100 * (x.tokens_per_s_per_device / now - 1)
            cost = forecast_s * now / x.tokens_per_s_per_device
            out.append((*step, gain, cost))
        out.sort(key=lambda n: (not _toward(optimum, n[0], n[1]), -n[2] / max(n[3], 1e-9)))
        return out

    @staticmethod
    def _proposal(
        view: AgentView,
        step: tuple[str, Any, Probe],
        optimum: Layout,
        here: Probe,
        *,
        explore: bool,
    ) -> Proposal:
        lever, value, probe = step
        changes = _changes(lever, value)
        values = view.incumbent_values
        changes = {k: v for k, v in changes.items() if values.get(k) != v}
        band = probe.band_pct or 0.0
        gain = probe.predicted_gain_pct or 0.0
        trial_h = (probe.predicted_trial_device_s or 0.0) / 3600
        why = (
            f"exploration: the model is uncertain here (predicted {gain:+.1f}%, band "
            f"+-{band:.1f}%) and the budget covers {EXPLORE_TRIALS}+ more trials; its "
            "measurement refits the model"
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
        mechanism = (
            f"the calibrated step-time model's predicted optimum of the gate-allowed layout "
            f"space is {_label(optimum)} at {optimum.tokens_per_s_per_device:,.0f} "
            f"tokens/s/device ({_gain(optimum, here):+.1f}% over the incumbent); one lever "
            f"toward it: {lever}={value}, {why}, "
            f"{probe.predicted_tokens_per_s or 0:,.0f} tokens/s/device, {trial_h:.3g} "
            "device-hours a trial"
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


def _label(layout: Layout) -> str:
    return ", ".join(f"{k}={v}" for k, v in layout.levers.items())


def _gain(layout: Layout, here: Probe) -> float:
    now = here.predicted_tokens_per_s
    return 0.0 if not now else 100 * (layout.tokens_per_s_per_device / now - 1)
