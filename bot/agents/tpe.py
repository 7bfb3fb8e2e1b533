"""Optuna's TPE (tree-structured Parzen estimator), a baseline for the rules agent: it proposes
whole layouts of the embedded workload's layout space through Optuna's ask/tell interface,
under the same campaign, gate, budget, noise model and ledger as any agent.

The agent keeps no state: on every decision it builds a fresh in-memory study, tells it every
earlier proposal (its layout and its score relative to the baseline, replayed from the
history; a failed run is a failed trial), then asks. The sampler is seeded by
``ATTUNE_AGENT_SEED`` (or ``seed``) and the number of earlier proposals, so a restarted
campaign proposes exactly what it would have. A suggestion that is invalid, already run or
does not fit is told as what is known of it (its score, or a failure) and the study is asked
again; after ``MAX_ASKS`` the first remaining layout in a seeded order is taken.

The search space is conditional: the micro-batch sizes offered depend on the data-parallel
ranks (``micro_batch_size@<ranks>``), which TPE handles as a define-by-run space.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import BaseTrial, TrialState

from bot.agents.levers.layout_space import (
    CHOICES,
    Layout,
    agent_seed,
    embedded_layouts,
    exhausted,
    layout_key,
    layout_proposal,
    micro_sizes,
    past_trials,
    screen,
    splits,
    stop_before,
)
from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop

N_STARTUP = 5
"""Proposals drawn at random before TPE's model takes over (Optuna's default is 10; campaigns
run about 10-20 candidates)."""
MAX_ASKS = 64


class Space:
    """The layout space as Optuna parameters: ``split`` (threads x ranks), the micro-batch size
    for that many ranks, and the machine-independent levers."""

    def __init__(self, values: dict[str, Any], cores: int) -> None:
        self.global_batch = int(values["global_batch_size"])
        self.splits = {f"{t}x{r}": (t, r) for t, r in splits(cores)}
        self.splits = {k: v for k, v in self.splits.items() if micro_sizes(self.global_batch, v[1])}

    def distributions(self, layout: Layout) -> dict[str, BaseDistribution]:
        ranks = int(layout["data_parallel_size"])
        out: dict[str, BaseDistribution] = {
            "split": CategoricalDistribution(list(self.splits)),
            f"micro_batch_size@{ranks}": CategoricalDistribution(
                micro_sizes(self.global_batch, ranks)
            ),
        }
        out.update({k: CategoricalDistribution(list(v)) for k, v in CHOICES.items()})
        return out

    def params(self, layout: Layout) -> dict[str, Any]:
        ranks = int(layout["data_parallel_size"])
        out = {
            "split": f"{layout['threads']}x{ranks}",
            f"micro_batch_size@{ranks}": int(layout["micro_batch_size"]),
        }
        out.update({k: layout[k] for k in CHOICES})
        return out

    def contains(self, layout: Layout) -> bool:
        ranks = int(layout["data_parallel_size"])
        return (
            f"{layout['threads']}x{ranks}" in self.splits
            and layout["micro_batch_size"] in micro_sizes(self.global_batch, ranks)
            and all(layout[k] in v for k, v in CHOICES.items())
        )

    def suggest(self, trial: BaseTrial) -> Layout:
        threads, ranks = self.splits[str(trial.suggest_categorical("split", list(self.splits)))]
        micro = trial.suggest_categorical(
            f"micro_batch_size@{ranks}", micro_sizes(self.global_batch, ranks)
        )
        layout: Layout = {"threads": threads, "data_parallel_size": ranks}
        layout["micro_batch_size"] = micro
        for key, choices in CHOICES.items():
            layout[key] = trial.suggest_categorical(key, list(choices))
        return layout


def build_study(view: AgentView, space: Space, seed: int) -> tuple[optuna.Study, dict[str, float]]:
    """A study told every earlier proposal; and the known value (log of the score relative to
    the baseline's) of each layout that ran, the baseline's included."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=N_STARTUP)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    baseline, past = past_trials(view)
    known = {layout_key(baseline): 0.0}
    for item in past:
        if not space.contains(item.layout):
            continue
        ok = item.relative is not None and item.relative > 0 and not item.failed
        value = math.log(item.relative) if ok and item.relative else None
        if value is None and not item.failed:
            continue  # never ran (closed unrun, refused): says nothing about speed
        study.add_trial(
            optuna.trial.create_trial(
                state=TrialState.COMPLETE if value is not None else TrialState.FAIL,
                value=value,
                params=space.params(item.layout),
                distributions=space.distributions(item.layout),
            )
        )
        if value is not None:
            known[layout_key(item.layout)] = value
    return study, known


class TPEAgent:
    name = "tpe"

    def __init__(self, seed: int | None = None) -> None:
        self.seed = agent_seed(seed)

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        stop = stop_before(view, self.name)
        if stop is not None:
            return stop
        space = Space(view.incumbent_values, view.cores)
        draw = len(view.history) + 1
        mixed = random.Random(f"tpe:{self.seed}:{draw}").getrandbits(32)
        study, known = build_study(view, space, mixed)
        mechanism = (
            f"baseline agent (Optuna TPE, seed {self.seed}, proposal {draw}, "
            f"{len(study.trials)} earlier trials told): the layout TPE expects best from the "
            "scores so far; no profile is read and no gain is predicted; several levers moving "
            "at once are one declared coupled move"
        )
        for _ in range(MAX_ASKS):
            trial = study.ask()
            layout = space.suggest(trial)
            if screen(view, layout, probe_of, tried) is None:
                return layout_proposal(view, layout, mechanism=mechanism)
            value = known.get(layout_key(layout))
            if value is None:
                study.tell(trial, state=TrialState.FAIL)
            else:
                study.tell(trial, value)
        layouts = embedded_layouts(view.incumbent_values, view.cores)
        reasons: Counter[str] = Counter()
        for layout in random.Random(mixed).sample(layouts, len(layouts)):
            why = screen(view, layout, probe_of, tried)
            if why is None:
                return layout_proposal(view, layout, mechanism=mechanism)
            reasons[why.split(":")[0]] += 1
        return exhausted(layouts, dict(reasons))
