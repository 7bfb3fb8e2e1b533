"""Random search, a baseline for the rules agent: each proposal is a whole layout drawn
uniformly from the embedded workload's layout space (``layout_space``), under the same
campaign, gate, budget, noise model and ledger as any agent.

The draw is seeded by ``ATTUNE_AGENT_SEED`` (or ``seed``) and the number of earlier proposals,
so the same history gives the same proposal: a restarted campaign carries on as if never
stopped. It never asks for a profile (it uses none) and never proposes a configuration that
already ran.
"""

from __future__ import annotations

import random
from collections import Counter

from bot.agents.levers.layout_space import (
    agent_seed,
    embedded_layouts,
    exhausted,
    layout_proposal,
    screen,
    stop_before,
)
from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop


class RandomSearchAgent:
    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self.seed = agent_seed(seed)

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        stop = stop_before(view, self.name)
        if stop is not None:
            return stop
        space = embedded_layouts(view.incumbent_values, view.cores)
        draw = len(view.history) + 1
        rng = random.Random(f"random:{self.seed}:{draw}")
        reasons: Counter[str] = Counter()
        for layout in rng.sample(space, len(space)):
            why = screen(view, layout, probe_of, tried)
            if why is None:
                return layout_proposal(
                    view,
                    layout,
                    mechanism=(
                        f"baseline agent (random search, seed {self.seed}, draw {draw}): a "
                        f"layout drawn uniformly from the {len(space)} of the registry's layout "
                        "levers; no profile is read and no gain is predicted; several levers "
                        "moving at once are one declared coupled move"
                    ),
                )
            reasons[why.split(":")[0]] += 1
        return exhausted(space, dict(reasons))
