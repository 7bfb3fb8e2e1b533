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
   optimum first, then the best ``g`` per device-hour. A step the memory model says does not
   fit alone is tried, after every step that fits, paired with a memory saver: a second lever
   whose layout the memory model says peaks lower (a higher TP or PP, more recompute, a
   smaller micro-batch), as one declared coupled move (``planned_moves.paired``).
2. **Explore.** Else the step with the best expected improvement beyond the threshold,
   ``E[max(0, G - t)]`` for ``G ~ N(g, s)``, per device-hour, provided it is at least
   ``EXPLORE_MIN_EI`` and the budget left covers ``EXPLORE_TRIALS`` more trials of it;
   labelled exploration (memory-saver pairs as in 1). Its measurement teaches the lever's
   effect, and the next decision re-plans.
3. **Stop** (exhausted) when neither holds, with the evidence: the best step, its gain and
   band, and the predicted optimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from bot.agents.levers.layout_space import budget_stop
from bot.agents.levers.planned_moves import (
    OVERLAPS,
    Key,
    Move,
    corrected,
    key,
    learned_residuals,
    neighbours,
    paired,
)
from bot.agents.levers.split_moves import PARAM_GATHER_NEEDS_GRAD_REDUCE
from bot.interfaces import AgentView, Probe, ProbeOf, ProfileRequest, Proposal, Stop
from gate.words import count
from perfmodel.calibration import Calibration
from perfmodel.hardware import part
from perfmodel.plan import Layout, layouts, lever_values
from perfmodel.residuals import Residuals

EXPLORE_TRIALS = 3
"""An exploration runs only while the budget left covers this many more trials of it."""
EXPLORE_MIN_EI = 0.0025
"""An exploration must be expected to clear the noise threshold by this much (log gain,
0.25%): a move the model says is probably slower but might be much faster still qualifies; one
it says is surely slower, or at best marginal, does not."""
PROBES = 6
"""Steps probed per phase (exploit, explore) of a decision at most (each resolves a candidate
through the framework: seconds for Megatron-LM)."""
COMMUNICATION_LEVERS = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "parallelism.tensor_parallel_degree",
    "expert_model_parallel_size",
    OVERLAPS,
)


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
        by_levers: dict[Key, Layout] = {key(x.levers): x for x in space}
        if key(start) not in by_levers:
            return Stop(reason="exhausted", evidence=["the incumbent is not in its layout space"])
        learned = learned_residuals(view, by_levers)
        # the incumbent ran, so it fits whatever the uncalibrated memory model says
        fitting = [x for x in space if x.fits is not False or x.levers == start]
        optimum = max(fitting, key=lambda x: corrected(x, learned))
        bar = math.log1p(view.threshold)
        ranked = neighbours(start, by_levers, optimum, learned, view.forecast_s)
        if not ranked:
            return Stop(reason="exhausted", evidence=["no one-lever step in the layout space"])
        refused: list[str] = []

        def first(steps: list[Move], worth: Callable[[Move], bool]) -> tuple[Move, str] | None:
            """The first of ``steps`` (in order) worth a trial that the framework accepts, that
            has not run and that fits; then, only if none does, the steps that did not fit
            alone, each paired with a memory saver, in the same order."""
            later: list[tuple[Move, str]] = []
            for step in [s for s in steps if worth(s)][:PROBES]:
                probe = probe_of(step.changes)
                if probe is None or probe.fingerprint in tried:
                    continue
                if probe.fits:
                    return step, ""
                refused.append(f"{step.lever}={step.value} ({probe.memory})")
                later += [
                    (pair, probe.memory or "memory model")
                    for pair in paired(step, start, by_levers, learned, view.forecast_s)
                    if worth(pair)
                ]
            for pair, alone in later[:PROBES]:
                both = probe_of(pair.changes)
                if both is not None and both.fingerprint not in tried and both.fits:
                    return pair, alone
            return None

        found = first(ranked, lambda n: n.gain - n.sd > bar)  # exploit: beyond noise + band
        explore = found is None
        if found is None:  # explore: uncertain, worth it, and the budget allows it
            hopeful = sorted(ranked, key=lambda n: -n.improvement(bar) / max(n.cost, 1e-9))
            found = first(
                hopeful,
                lambda n: (
                    n.improvement(bar) >= EXPLORE_MIN_EI
                    and EXPLORE_TRIALS * n.cost <= view.budget_left_s
                ),
            )
        if found is not None:
            step, alone = found
            return self._proposal(view, step, optimum, learned, here, explore=explore, alone=alone)
        best = max(ranked, key=lambda n: n.improvement(bar))
        ahead = math.log(corrected(optimum, learned) / corrected(by_levers[key(start)], learned))
        return Stop(
            reason="exhausted",
            evidence=[
                f"no untried one-lever step that fits is predicted to beat the noise threshold "
                f"{100 * view.threshold:.1f}% by more than its band, nor expected to clear it "
                f"by {100 * EXPLORE_MIN_EI:g}% within the budget: the best, "
                f"{best.lever}={best.value}, is predicted {_pct(best.gain)} +-"
                f"{100 * math.expm1(best.sd):.1f}% (calibrated on {calibration.runs} runs, "
                f"lever effects learned from {count(learned.measured, 'measured layout')}); the "
                f"predicted optimum {_label(optimum)} is {_pct(ahead)} over the incumbent"
                + (f"; predicted not to fit: {'; '.join(refused)}" if refused else "")
            ],
        )

    @staticmethod
    def _proposal(
        view: AgentView,
        step: Move,
        optimum: Layout,
        learned: Residuals,
        here: Probe,
        *,
        explore: bool,
        alone: str = "",
    ) -> Proposal:
        lever, value = step.lever, step.value
        changes = step.changes
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
        if step.saver is not None:
            why += (
                f"; alone it is predicted not to fit ({alone}), so it is paired with the memory "
                f"saver {step.saver[0]}={step.saver[1]} as one declared coupled move"
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


def _pct(log_gain: float) -> str:
    return f"{100 * math.expm1(log_gain):+.1f}%"


def _label(layout: Layout) -> str:
    return ", ".join(f"{k}={v}" for k, v in layout.levers.items())
