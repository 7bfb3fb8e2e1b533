"""Random search and Optuna TPE over a GPU layout space (``benchmarks/sim_space.py``): the
baselines of the simulated tuner benchmark. They work as ``bot/agents/random_search.py`` and
``bot/agents/tpe.py`` do on the embedded workload (whole layouts, declared as one coupled
move, screened by the campaign's probe: valid, untried, predicted to fit), over the space's
levers instead of the embedded workload's. Nothing here can see the simulated truth: what they
learn comes from the campaign's history, like every agent."""

from __future__ import annotations

import math
import random
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import TrialState

from benchmarks.sim_space import Layout, Space, changes, layout_of
from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop

FAILED = ("failed", "oom", "timeout", "nan", "hang", "comm_timeout", "rank_died")
N_STARTUP = 5
MAX_ASKS = 64


def _key(layout: Layout) -> str:
    return repr(sorted(layout.items()))


class SpaceAgent:
    """What random search and TPE share: the space, the screen, the proposal, the stop."""

    name = "space"

    def __init__(self, space: Space, seed: int) -> None:
        self.space, self.seed = space, seed
        self.levers = list(space.levers)

    def moves(self, view: AgentView, layout: Layout) -> dict[str, Any]:
        return {k: v for k, v in changes(layout).items() if view.incumbent_values.get(k) != v}

    def screen(
        self, view: AgentView, layout: Layout, probe_of: ProbeOf, tried: set[str]
    ) -> str | None:
        moved = self.moves(view, layout)
        if not moved:
            return "the incumbent's own layout"
        probe = probe_of(moved)
        if probe is None:
            return "the framework's validation rejects it"
        if probe.fingerprint in tried:
            return "already run"
        if not probe.fits:
            return "the memory model says it does not fit"
        return None

    def proposal(self, view: AgentView, layout: Layout, mechanism: str) -> Proposal:
        moved = self.moves(view, layout)
        return Proposal(
            lever=list(moved),
            changes={k: (view.incumbent_values.get(k), v) for k, v in moved.items()},
            coupled=len(moved) > 1,
            bottleneck="unprofiled",
            mechanism=mechanism,
            expected_gain_pct=0.0,
            sources=[view.layout_sources.get(k, "-") for k in moved],
        )

    def stop(self, view: AgentView) -> Stop | None:
        if view.forecast_s > view.budget_left_s:
            return Stop(
                reason="budget",
                evidence=[
                    f"the next trial is forecast at {view.forecast_s:.0f} device-seconds and "
                    f"{view.budget_left_s:.0f} are left"
                ],
            )
        return None

    def past(self, view: AgentView) -> list[tuple[Layout, float | None, bool]]:
        """Every earlier proposal's layout, score relative to the baseline, and failure."""
        values = dict(view.incumbent_values)
        for item in reversed(view.history):
            if item.decision == "merge":
                values.update({k: old for k, (old, _) in item.changes.items()})
        incumbent, incumbent_rel = values, 1.0
        out = []
        for item in view.history:
            ran = {**incumbent, **{k: new for k, (_, new) in item.changes.items()}}
            relative = None if item.gain is None else incumbent_rel * (1.0 + item.gain)
            out.append((layout_of(ran, self.levers), relative, item.status in FAILED))
            if item.decision == "merge" and relative is not None:
                incumbent, incumbent_rel = ran, relative
        return out

    def exhausted(self) -> Stop:
        return Stop(reason="exhausted", evidence=["no layout of the space is left to try"])


class SpaceRandomAgent(SpaceAgent):
    name = "random"

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        stop = self.stop(view)
        if stop is not None:
            return stop
        layouts = self.space.layouts()
        draw = len(view.history) + 1
        for layout in random.Random(f"random:{self.seed}:{draw}").sample(layouts, len(layouts)):
            if self.screen(view, layout, probe_of, tried) is None:
                return self.proposal(
                    view, layout, f"baseline agent (random search, seed {self.seed}, draw {draw})"
                )
        return self.exhausted()


class SpaceTPEAgent(SpaceAgent):
    name = "tpe"

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        stop = self.stop(view)
        if stop is not None:
            return stop
        draw = len(view.history) + 1
        mixed = random.Random(f"tpe:{self.seed}:{draw}").getrandbits(32)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(seed=mixed, n_startup_trials=N_STARTUP)
        study = optuna.create_study(direction="maximize", sampler=sampler)
        dists: dict[str, BaseDistribution] = {
            k: CategoricalDistribution(list(v)) for k, v in self.space.levers.items()
        }
        known = {_key(layout_of(dict(view.incumbent_values), self.levers)): 0.0}
        for layout, relative, failed in self.past(view):
            if any(layout[k] not in v for k, v in self.space.levers.items()):
                continue
            ok = relative is not None and relative > 0 and not failed
            value = math.log(relative) if ok and relative else None
            if value is None and not failed:
                continue
            study.add_trial(
                optuna.trial.create_trial(
                    state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
                    value=value,
                    params=layout,
                    distributions=dists,
                )
            )
            if value is not None:
                known[_key(layout)] = value
        mechanism = f"baseline agent (Optuna TPE, seed {self.seed}, proposal {draw})"
        for _ in range(MAX_ASKS):
            trial = study.ask()
            layout = {
                k: trial.suggest_categorical(k, list(v)) for k, v in self.space.levers.items()
            }
            if self.screen(view, layout, probe_of, tried) is None:
                return self.proposal(view, layout, mechanism)
            value = known.get(_key(layout))
            if value is None:
                study.tell(trial, state=TrialState.FAIL)
            else:
                study.tell(trial, value)
        layouts = self.space.layouts()
        for layout in random.Random(mixed).sample(layouts, len(layouts)):
            if self.screen(view, layout, probe_of, tried) is None:
                return self.proposal(view, layout, mechanism)
        return self.exhausted()
