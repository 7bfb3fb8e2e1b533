"""The embedded workload's layout space, as the baseline search agents (random, TPE) see it.

A *layout* is one value for each of ``LEVERS``: threads x data-parallel ranks within the
cores (powers of two), a micro-batch size that divides each rank's share of the pinned global
batch, recompute, the attention kernel, torch.compile and the optimizer implementation. The
baseline agents propose whole layouts, so one proposal may move several levers at once: it is
declared as one coupled move and labelled as a baseline search in its hypothesis.

Nothing here runs anything: the space, the history replayed into (layout, relative score)
pairs, the checks every proposal passes (valid, untried, fits) and the proposal itself.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from bot.agents.levers.directions import FAILED
from bot.interfaces import AgentView, ProbeOf, Proposal, Stop

LEVERS = (
    "threads",
    "data_parallel_size",
    "micro_batch_size",
    "activation_checkpointing",
    "attention",
    "compile",
    "optimizer_impl",
)
"""The registry's layout keys of the embedded workload that a layout sets."""
CHOICES: dict[str, tuple[Any, ...]] = {
    "activation_checkpointing": (False, True),
    "attention": ("sdpa", "math"),
    "compile": (False, True),
    "optimizer_impl": ("for_loop", "foreach", "fused"),
}
"""Levers whose values do not depend on the machine or the batch."""
SEED_ENV = "ATTUNE_AGENT_SEED"

Layout = dict[str, Any]


def agent_seed(seed: int | None = None) -> int:
    """``seed``, else ``$ATTUNE_AGENT_SEED``, else 0; a malformed variable is an error."""
    if seed is not None:
        return seed
    raw = os.environ.get(SEED_ENV, "0").strip()
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_ENV} must be an integer, got {raw!r}") from None


def layout_key(layout: Layout) -> str:
    """One canonical string per layout (its levers in ``LEVERS`` order)."""
    return json.dumps([layout[k] for k in LEVERS])


def splits(cores: int) -> list[tuple[int, int]]:
    """(threads, ranks), each a power of two, with threads x ranks <= cores."""
    powers = [p for p in (1, 2, 4, 8, 16, 32, 64, 128) if p <= max(cores, 1)]
    return [(t, r) for r in powers for t in powers if t * r <= max(cores, 1)]


def micro_sizes(global_batch: int, ranks: int) -> list[int]:
    """Micro-batch sizes that divide each rank's share of the global batch."""
    if global_batch % ranks:
        return []
    share = global_batch // ranks
    return [m for m in range(1, share + 1) if share % m == 0]


def embedded_layouts(values: dict[str, Any], cores: int) -> list[Layout]:
    """Every layout of the space, in a fixed order (the sweep's and the agents')."""
    global_batch = int(values["global_batch_size"])
    out: list[Layout] = []
    for threads, ranks in splits(cores):
        for micro in micro_sizes(global_batch, ranks):
            for ckpt in CHOICES["activation_checkpointing"]:
                for attention in CHOICES["attention"]:
                    for compiled in CHOICES["compile"]:
                        for impl in CHOICES["optimizer_impl"]:
                            out.append(
                                {
                                    "threads": threads,
                                    "data_parallel_size": ranks,
                                    "micro_batch_size": micro,
                                    "activation_checkpointing": ckpt,
                                    "attention": attention,
                                    "compile": compiled,
                                    "optimizer_impl": impl,
                                }
                            )
    return out


def layout_of(values: dict[str, Any]) -> Layout:
    """The layout of an effective configuration."""
    return {k: values[k] for k in LEVERS}


@dataclass(frozen=True)
class PastTrial:
    """One earlier proposal, replayed: the whole layout it ran and its score relative to the
    baseline's (None when it failed or never ran)."""

    trial: str
    layout: Layout
    relative: float | None
    failed: bool


def past_trials(view: AgentView, *, whole: bool = False) -> tuple[Layout, list[PastTrial]]:
    """(the baseline's layout, every earlier proposal's layout and relative score); with
    ``whole``, every key of the incumbent's effective configuration rather than the embedded
    workload's levers (the model-guided agent replays Megatron-LM and torchtitan recipes).

    The history holds each proposal's changes against the incumbent of its time and its gain
    over that incumbent. The baseline's layout is the incumbent's with every merge undone (in
    reverse); replaying forward, a merged candidate becomes the incumbent and its score the
    bar (the baseline agents never ask for profile runs, so a winner's score is its one run).
    """
    layout = dict(view.incumbent_values) if whole else layout_of(view.incumbent_values)
    for item in reversed(view.history):
        if item.decision == "merge":
            layout.update({k: old for k, (old, _) in item.changes.items() if k in layout})
    baseline = dict(layout)
    incumbent, incumbent_rel = dict(baseline), 1.0
    out = []
    for item in view.history:
        ran = {**incumbent, **{k: new for k, (_, new) in item.changes.items() if k in incumbent}}
        relative = None if item.gain is None else incumbent_rel * (1.0 + item.gain)
        out.append(PastTrial(item.trial, ran, relative, failed=item.status in FAILED))
        if item.decision == "merge" and relative is not None:
            incumbent, incumbent_rel = ran, relative
    return baseline, out


def changes_from(view: AgentView, layout: Layout) -> dict[str, Any]:
    """The levers ``layout`` sets differently from the incumbent."""
    return {k: v for k, v in layout.items() if view.incumbent_values.get(k) != v}


def screen(view: AgentView, layout: Layout, probe_of: ProbeOf, tried: set[str]) -> str | None:
    """Why ``layout`` cannot be proposed (None when it can): the incumbent itself, refused by
    the framework's validation, an effective configuration already run, or not fitting."""
    changes = changes_from(view, layout)
    if not changes:
        return "the incumbent's own layout"
    probe = probe_of(changes)
    if probe is None:
        return "the framework's validation rejects it"
    if probe.fingerprint in tried:
        return "this effective configuration was already run"
    if not probe.fits:
        return f"the memory model says it does not fit: {probe.memory}"
    return None


def layout_proposal(view: AgentView, layout: Layout, *, mechanism: str) -> Proposal:
    """A whole-layout proposal: several levers at once are one declared coupled move."""
    changes = changes_from(view, layout)
    return Proposal(
        lever=list(changes),
        changes={k: (view.incumbent_values[k], v) for k, v in changes.items()},
        coupled=len(changes) > 1,
        bottleneck="unprofiled",
        mechanism=mechanism,
        expected_gain_pct=0.0,
        sources=[view.layout_sources.get(k, "-") for k in changes],
    )


def budget_stop(view: AgentView) -> Stop | None:
    """Every agent's first stop: the next trial's forecast is more than the budget left."""
    if view.forecast_s > view.budget_left_s:
        return Stop(
            reason="budget",
            evidence=[
                f"the next trial is forecast at {view.forecast_s:.0f} device-seconds and "
                f"{view.budget_left_s:.0f} are left"
            ],
        )
    return None


def stop_before(view: AgentView, agent: str) -> Stop | None:
    """The stops every baseline agent shares: the budget, and a framework without a space."""
    stop = budget_stop(view)
    if stop is not None:
        return stop
    if view.framework != "embedded":
        return Stop(
            reason="exhausted",
            evidence=[f"the {agent} agent searches the embedded workload's layouts only"],
        )
    return None


def exhausted(space: list[Layout], reasons: dict[str, int]) -> Stop:
    """The stop when no layout of the space is left, with how many fell to each reason."""
    lines = [f"{n} of {len(space)} layouts: {why}" for why, n in sorted(reasons.items())]
    return Stop(reason="exhausted", evidence=lines or ["the layout space is empty"])
