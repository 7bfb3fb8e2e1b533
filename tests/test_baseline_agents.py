"""The baseline agents (random search, Optuna TPE): deterministic for a seed, rebuilt from the
history alone after a restart, never a configuration that already ran, whole layouts as one
declared coupled move, and the budget stop. Probes resolve real recipes with the embedded
workload's validation; the scores of the closed-loop tests come from a synthetic speed model
(TEST DOUBLE: ``synthetic_speed``), since what is tested is the search, not the machine."""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
import yaml

from bot.agents.levers.layout_space import (
    LEVERS,
    embedded_layouts,
    layout_key,
    layout_of,
    past_trials,
)
from bot.agents.random_search import RandomSearchAgent
from bot.agents.tpe import Space, TPEAgent, build_study
from bot.campaign.recipe_edit import apply_changes
from bot.campaign.setup import AGENTS
from bot.interfaces import AgentView, HistoryItem, Probe, Proposal, Stop
from gate.errors import AttuneError
from gate.recipe import parse_recipe
from gate.registry import Registry, load_registry
from runners.embedded.adapter import EmbeddedAdapter

PORTED = {
    "n_layer": 2,
    "d_model": 64,
    "n_head": 4,
    "seq_len": 32,
    "global_batch_size": 8,
    "threads": 1,
    "micro_batch_size": 1,
    "activation_checkpointing": True,
    "attention": "math",
    "compile": False,
    "optimizer_impl": "for_loop",
}
Agent = RandomSearchAgent | TPEAgent


def recipe_text(config: dict[str, Any]) -> str:
    # config last: keys the recipe does not set are added at the end of its section
    body = {"framework": "embedded", "name": "r", "config": config}
    return yaml.safe_dump(body, sort_keys=False)


def resolve(text: str) -> dict[str, Any]:
    return EmbeddedAdapter().resolve(parse_recipe(text, path="r.yaml")).values


@functools.cache
def fingerprint(text: str) -> str:
    return EmbeddedAdapter().resolve(parse_recipe(text, path="r.yaml")).fingerprint()


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry("embedded", "1")


def synthetic_speed(layout: dict[str, Any]) -> float:
    """TEST DOUBLE: an invented speed per layout (more threads, bigger micro-batches, no
    recompute, SDPA and fused optimizers are faster; two ranks a little slower)."""
    speed = float(layout["threads"]) ** 0.8 * (1 + 0.1 * math.log2(layout["micro_batch_size"]))
    speed *= 0.8 if layout["activation_checkpointing"] else 1.0
    speed *= 1.05 if layout["attention"] == "sdpa" else 1.0
    speed *= {"for_loop": 1.0, "foreach": 1.03, "fused": 1.04}[layout["optimizer_impl"]]
    return float(speed) * (0.9 if layout["data_parallel_size"] > 1 else 1.0)


class SimulatedCampaign:
    """TEST DOUBLE of the campaign's loop around an agent: probes real recipes, folds each
    proposal into the history with its gain over the incumbent (``synthetic_speed``), merges
    gains over 3%, charges 10 device-seconds per proposal."""

    def __init__(self, registry: Registry, *, budget_s: float = 10_000.0) -> None:
        self.registry = registry
        self.incumbent = recipe_text(PORTED)
        self.history: list[HistoryItem] = []
        self.tried = {fingerprint(self.incumbent)}
        self.budget_s = budget_s
        self.proposed: list[str] = []

    def view(self) -> AgentView:
        return AgentView(
            framework="embedded",
            incumbent="baseline",
            incumbent_values=resolve(self.incumbent),
            profile=None,
            history=list(self.history),
            layout_sources={
                k: e.source for k, e in self.registry.data.keys.items() if e.key_class == "layout"
            },
            threshold=0.03,
            budget_left_s=self.budget_s - 10.0 * len(self.history),
            forecast_s=10.0,
            cores=2,
        )

    def probe(self, changes: dict[str, object]) -> Probe | None:
        try:
            return Probe(fingerprint=fingerprint(apply_changes(self.incumbent, changes)))
        except AttuneError:
            return None

    def step(self, agent: Agent) -> Proposal | Stop:
        decision = agent.decide(self.view(), self.probe, self.tried)
        assert not isinstance(decision, Stop) or decision.evidence
        if isinstance(decision, Stop):
            return decision
        assert isinstance(decision, Proposal)
        text = apply_changes(self.incumbent, {k: new for k, (_, new) in decision.changes.items()})
        fp = fingerprint(text)
        assert fp not in self.tried, f"{decision.title} was already run"
        self.tried.add(fp)
        self.proposed.append(decision.title)
        gain = (
            synthetic_speed(layout_of(resolve(text)))
            / synthetic_speed(layout_of(resolve(self.incumbent)))
            - 1
        )
        merge = gain > 0.03
        self.history.append(
            HistoryItem(
                trial=f"c{len(self.history) + 1}",
                changes=decision.changes,
                status="ok",
                decision="merge" if merge else "close",
                gain=gain,
            )
        )
        if merge:
            self.incumbent = text
        return decision


def run(registry: Registry, make: Any, steps: int, *, restart_at: int | None = None) -> list[str]:
    sim = SimulatedCampaign(registry)
    agent = make()
    for i in range(steps):
        if i == restart_at:
            agent = make()  # a restarted bot: a new agent, the same history
        sim.step(agent)
    return sim.proposed


@pytest.mark.parametrize("make", [RandomSearchAgent, TPEAgent], ids=["random", "tpe"])
def test_deterministic_for_a_seed_and_rebuilt_after_a_restart(
    registry: Registry, make: Any
) -> None:
    first = run(registry, lambda: make(seed=7), 8)
    assert run(registry, lambda: make(seed=7), 8) == first
    assert run(registry, lambda: make(seed=7), 8, restart_at=4) == first
    assert run(registry, lambda: make(seed=8), 8) != first
    assert len(set(first)) == len(first)


def test_seed_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTUNE_AGENT_SEED", "42")
    assert RandomSearchAgent().seed == 42 and TPEAgent().seed == 42
    assert RandomSearchAgent(seed=3).seed == 3
    monkeypatch.setenv("ATTUNE_AGENT_SEED", "forty")
    with pytest.raises(ValueError, match="ATTUNE_AGENT_SEED must be an integer"):
        TPEAgent()


@pytest.mark.parametrize("make", [RandomSearchAgent, TPEAgent], ids=["random", "tpe"])
def test_whole_layouts_are_one_declared_coupled_move(registry: Registry, make: Any) -> None:
    sim = SimulatedCampaign(registry)
    decision = sim.step(make(seed=1))
    assert isinstance(decision, Proposal)
    assert set(decision.lever) == set(decision.changes) <= set(LEVERS)
    assert decision.coupled == (len(decision.changes) > 1)
    kind = "random search" if make is RandomSearchAgent else "Optuna TPE"
    assert decision.mechanism.startswith(f"baseline agent ({kind}, seed 1")
    assert all(src != "-" for src in decision.sources)


@pytest.mark.parametrize("make", [RandomSearchAgent, TPEAgent], ids=["random", "tpe"])
def test_never_a_tried_configuration_and_exhaustion(registry: Registry, make: Any) -> None:
    sim = SimulatedCampaign(registry)
    base = resolve(sim.incumbent)
    space = embedded_layouts(base, 2)
    fingerprints = {}
    for layout in space:
        changes = {k: v for k, v in layout.items() if base[k] != v}
        fingerprints[layout_key(layout)] = fingerprint(apply_changes(sim.incumbent, changes))
    assert len(set(fingerprints.values())) == len(space) == 264
    left = space[123]
    sim.tried = set(fingerprints.values()) - {fingerprints[layout_key(left)]}
    decision = sim.step(make(seed=5))
    assert isinstance(decision, Proposal)
    assert {k: new for k, (_, new) in decision.changes.items()} == {
        k: v for k, v in left.items() if base[k] != v
    }
    stop = sim.step(make(seed=5))
    assert isinstance(stop, Stop) and stop.reason == "exhausted"
    assert any("already run" in line for line in stop.evidence)


@pytest.mark.parametrize("make", [RandomSearchAgent, TPEAgent], ids=["random", "tpe"])
def test_budget_stop(registry: Registry, make: Any) -> None:
    sim = SimulatedCampaign(registry, budget_s=25.0)
    assert isinstance(sim.step(make()), Proposal)
    assert isinstance(sim.step(make()), Proposal)
    stop = sim.step(make())  # 5 device-seconds left, 10 forecast
    assert isinstance(stop, Stop) and stop.reason == "budget"
    assert "forecast at 10 device-seconds and 5 are left" in stop.evidence[0]


def test_history_replays_into_whole_layouts_and_scores(registry: Registry) -> None:
    sim = SimulatedCampaign(registry)
    agent = RandomSearchAgent(seed=3)
    for _ in range(6):
        sim.step(agent)
    view = sim.view()
    baseline, past = past_trials(view)
    assert baseline == layout_of(resolve(recipe_text(PORTED)))
    base_speed = synthetic_speed(baseline)
    for item in past:
        assert item.relative == pytest.approx(synthetic_speed(item.layout) / base_speed)
    # the told study: every proposal that ran, with log(relative) as its value
    study, known = build_study(view, Space(view.incumbent_values, 2), seed=0)
    assert len(study.trials) == len(past) == 6
    values = sorted(t.value for t in study.trials if t.value is not None)
    assert values == pytest.approx(sorted(math.log(p.relative or 0) for p in past))
    assert known[layout_key(baseline)] == 0.0


def test_tpe_tells_failed_runs_as_failed_trials(registry: Registry) -> None:
    sim = SimulatedCampaign(registry)
    sim.step(TPEAgent(seed=1))
    sim.history[0] = sim.history[0].model_copy(
        update={"status": "oom", "decision": "close", "gain": None}
    )
    study, _ = build_study(sim.view(), Space(sim.view().incumbent_values, 2), seed=0)
    assert [t.state.name for t in study.trials] == ["FAIL"]


def test_registered_as_agents() -> None:
    assert {"random", "tpe"} <= set(AGENTS)
    assert AGENTS["random"](None).name == "random"  # type: ignore[arg-type]
    assert AGENTS["tpe"](None).name == "tpe"  # type: ignore[arg-type]
