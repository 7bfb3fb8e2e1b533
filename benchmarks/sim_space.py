"""The tuner benchmark's realistic layout spaces on the simulated cluster
(``benchmarks/tuner_sim.py``): three deliberately ported Megatron-LM recipes, the levers each
space varies, and the exhaustive optimum of the simulated TRUTH (not attune's model) over every
layout the framework accepts.

A layout is one choice per lever (``tp``, ``pp``, ``mbs``, ``recompute``, ``overlap_grad``,
``overlap_param``, and ``ep`` for the MoE space); ``changes`` turns it into the Megatron
argparse dests a recipe edit sets (``recompute`` sets granularity, method and layer count
together: Megatron refuses a recompute method beside selective recompute).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.campaign.recipe_edit import apply_changes
from gate.errors import AttuneError
from gate.models import EffectiveConfig
from gate.recipe import load_recipe, parse_recipe
from perfmodel.plan import RECOMPUTE
from runners.megatron.adapter import MegatronAdapter
from runners.sim.backend import recipe_hardware
from runners.sim.truth import SimParams, TrueLayout, true_layout

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ROOT / "benchmarks" / "recipes" / "sim"

Layout = dict[str, Any]
CHUNK = 96
"""Layouts per resolver process in the exhaustive sweep."""

DESTS = {
    "tp": "tensor_model_parallel_size",
    "pp": "pipeline_model_parallel_size",
    "ep": "expert_model_parallel_size",
    "mbs": "micro_batch_size",
    "overlap_grad": "overlap_grad_reduce",
    "overlap_param": "overlap_param_gather",
}


@dataclass(frozen=True)
class Space:
    name: str
    recipe: Path
    levers: dict[str, tuple[Any, ...]]
    steps: int = 8
    warmup: int = 3
    notes: list[str] = field(default_factory=list)

    def layouts(self) -> list[Layout]:
        names = list(self.levers)
        return [
            dict(zip(names, combo, strict=True))
            for combo in itertools.product(*self.levers.values())
        ]


COMMON: dict[str, tuple[Any, ...]] = {
    "tp": (1, 2, 4, 8),
    "mbs": (1, 2, 4),
    "recompute": ("full", "selective", "none"),
    "overlap_grad": (False, True),
    "overlap_param": (False, True),
}
SPACES = {
    "llama3-8b": Space("llama3-8b", RECIPES / "llama3-8b-ported.yaml", {**COMMON, "pp": (1, 2)}),
    "llama3-70b": Space(
        "llama3-70b", RECIPES / "llama3-70b-ported.yaml", {**COMMON, "pp": (1, 2, 4, 8)}
    ),
    "mixtral-8x7b": Space(
        "mixtral-8x7b",
        RECIPES / "mixtral-8x7b-ported.yaml",
        {**COMMON, "tp": (1, 2, 4), "pp": (1, 2, 4), "ep": (1, 2, 4, 8)},
    ),
}


def changes(layout: Layout) -> dict[str, Any]:
    """The Megatron dests ``layout`` sets."""
    out: dict[str, Any] = {}
    for lever, value in layout.items():
        if lever == "recompute":
            out.update(RECOMPUTE[value])
        else:
            out[DESTS[lever]] = value
    return out


def layout_of(values: dict[str, Any], levers: list[str]) -> Layout:
    """The layout of an effective config, on ``levers``."""
    out: Layout = {}
    for lever in levers:
        if lever == "recompute":
            out[lever] = values.get("recompute_granularity") or "none"
        else:
            value = values.get(DESTS[lever])
            out[lever] = bool(value) if lever.startswith("overlap") else int(value or 1)
    return out


@dataclass
class TruthTable:
    """Every layout the framework accepts, with the truth's verdict on it."""

    space: Space
    params: SimParams
    baseline: TrueLayout
    rows: list[tuple[Layout, TrueLayout]]
    refused: int

    def best(self) -> tuple[Layout, TrueLayout]:
        fitting = [r for r in self.rows if r[1].fits]
        return max(fitting, key=lambda r: r[1].tokens_per_s_per_device)

    @property
    def optimum_speedup(self) -> float:
        return self.best()[1].tokens_per_s_per_device / self.baseline.tokens_per_s_per_device

    def predicted_best(self) -> tuple[Layout, TrueLayout]:
        """The layout attune's own step-time model ranks first (among those that truly fit)."""
        fitting = [r for r in self.rows if r[1].fits]
        return min(
            fitting,
            key=lambda r: r[1].predicted_step_time_s / r[1].tokens_per_step * r[1].world,
        )


class Truth:
    """The simulated truth of one space's recipes, by recipe text (resolved once)."""

    def __init__(self, space: Space, params: SimParams) -> None:
        self.space, self.params = space, params
        base = load_recipe(space.recipe)
        self.hardware, self.memory_gib = recipe_hardware(base)
        self.adapter = MegatronAdapter()
        self._by_text: dict[str, TrueLayout | None] = {}

    def of(self, effective: EffectiveConfig) -> TrueLayout:
        return true_layout(effective, self.hardware, self.params, device_memory_gib=self.memory_gib)

    def of_text(self, text: str) -> TrueLayout | None:
        if text not in self._by_text:
            try:
                effective = self.adapter.resolve(parse_recipe(text, path="candidate.yaml"))
            except AttuneError:
                self._by_text[text] = None
            else:
                self._by_text[text] = self.of(effective)
        return self._by_text[text]

    def table(self) -> TruthTable:
        """The exhaustive sweep: every layout resolved (one worker, cached on disk) and
        judged by the truth."""
        text = self.space.recipe.read_text()
        baseline = self.of(self.adapter.resolve(load_recipe(self.space.recipe)))
        layouts = self.space.layouts()
        recipes = [parse_recipe(apply_changes(text, changes(x)), path="x.yaml") for x in layouts]
        outcomes: list[EffectiveConfig | AttuneError] = []
        for start in range(0, len(recipes), CHUNK):  # one worker per chunk, each in its limit
            outcomes += self.adapter.resolve_each(recipes[start : start + CHUNK])
        rows, refused = [], 0
        for layout, outcome in zip(layouts, outcomes, strict=True):
            if isinstance(outcome, EffectiveConfig):
                rows.append((layout, self.of(outcome)))
            else:
                refused += 1
        return TruthTable(self.space, self.params, baseline, rows, refused)
