"""The rules agent: one lever per proposal, full hypotheses, no repeats, back-off, stop."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bot.agents.claude.catalogue import remaining_moves
from bot.agents.levers.directions import blocked_directions
from bot.agents.rules import RulesAgent
from bot.campaign.recipe_edit import apply_changes
from bot.interfaces import AgentView, HistoryItem, Probe, ProfileRequest, Proposal, Stop
from gate.errors import AttuneError
from gate.models import EffectiveConfig, ProfileBreakdown
from gate.recipe import parse_recipe
from gate.registry import Registry, load_registry
from perfmodel import predict_step
from perfmodel.calibration import Calibration, move_fields
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
COMPUTE_BOUND = ProfileBreakdown(
    compute=0.8, communication=0.0, cpu=0.15, idle=0.05, step_seconds=0.2, steps=3
)
CPU_BOUND = ProfileBreakdown(
    compute=0.3, communication=0.0, cpu=0.6, idle=0.1, step_seconds=0.2, steps=3
)


def recipe_text(config: dict[str, Any]) -> str:
    return yaml.safe_dump({"framework": "embedded", "name": "r", "config": config})


def resolve(text: str) -> EffectiveConfig:
    return EmbeddedAdapter().resolve(parse_recipe(text, path="r.yaml"))


def fingerprint(text: str) -> str:
    return resolve(text).fingerprint()


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry("embedded", "1")


def view(
    registry: Registry,
    config: dict[str, Any] = PORTED,
    *,
    profile: ProfileBreakdown | None = COMPUTE_BOUND,
    history: list[HistoryItem] | None = None,
    budget_left_s: float = 1000.0,
    cores: int = 2,
) -> AgentView:
    values = EmbeddedAdapter().resolve(parse_recipe(recipe_text(config), path="r.yaml")).values
    return AgentView(
        framework="embedded",
        incumbent="baseline",
        incumbent_values=values,
        profile=profile,
        history=history or [],
        layout_sources=registry.layout_sources(),
        threshold=0.03,
        budget_left_s=budget_left_s,
        forecast_s=20.0,
        cores=cores,
    )


def decide(v: AgentView, config: dict[str, Any] = PORTED, tried: set[str] | None = None) -> Any:
    text = recipe_text(config)

    incumbent = predict_step(resolve(text), "cpu")

    def probe_of(changes: dict[str, object]) -> Probe | None:
        try:
            effective = resolve(apply_changes(text, changes))
        except AttuneError:
            return None
        predicted = move_fields(incumbent, predict_step(effective, "cpu"), Calibration(), steps=8)
        return Probe(fingerprint=effective.fingerprint(), **predicted)

    return RulesAgent().decide(v, probe_of, tried or {fingerprint(text)})


def test_asks_for_a_profile_first(registry: Registry) -> None:
    out = decide(view(registry, profile=None))
    assert isinstance(out, ProfileRequest) and "bottleneck is unclear" in out.reason


def test_proposal_moves_one_layout_lever_with_a_full_hypothesis(registry: Registry) -> None:
    out = decide(view(registry))
    assert isinstance(out, Proposal)
    assert len(out.changes) == 1 and not out.coupled
    (key,) = out.changes
    assert registry.data.keys[key].key_class == "layout"
    assert out.bottleneck == "compute"
    assert "compute is 80% of the step" in out.mechanism
    assert out.expected_gain_pct > 0
    assert out.sources == [registry.data.keys[key].source]
    assert out.changes[key][0] == PORTED[key]


def test_bottleneck_picks_the_lever(registry: Registry) -> None:
    compute = decide(view(registry))
    cpu = decide(view(registry, profile=CPU_BOUND))
    assert isinstance(compute, Proposal) and isinstance(cpu, Proposal)
    assert compute.bottleneck == "compute" and cpu.bottleneck == "cpu"
    assert compute.lever != cpu.lever  # what the profile says changes what is tried


def test_coupled_split_is_declared(registry: Registry) -> None:
    two_ranks = {**PORTED, "data_parallel_size": 2, "activation_checkpointing": False}
    idle = ProfileBreakdown(
        compute=0.3, communication=0.5, cpu=0.1, idle=0.1, step_seconds=0.2, steps=3
    )
    out = decide(view(registry, two_ranks, profile=idle), two_ranks)
    assert isinstance(out, Proposal)
    assert out.coupled and set(out.changes) == {"data_parallel_size", "threads"}
    assert out.changes["data_parallel_size"] == (2, 1) and out.changes["threads"] == (1, 2)


def test_never_proposes_a_configuration_already_run(registry: Registry) -> None:
    first = decide(view(registry))
    assert isinstance(first, Proposal)
    changes = {k: new for k, (_, new) in first.changes.items()}
    tried = {
        fingerprint(recipe_text(PORTED)),
        fingerprint(apply_changes(recipe_text(PORTED), changes)),
    }
    second = decide(view(registry), tried=tried)
    assert isinstance(second, Proposal) and second.changes != first.changes


def test_backs_off_a_direction_that_ran_out_of_memory(registry: Registry) -> None:
    oom = HistoryItem(
        trial="c1", changes={"micro_batch_size": (1, 2)}, status="oom", decision="close", gain=None
    )
    seen: set[str] = set()
    tried = {fingerprint(recipe_text(PORTED))}
    for _ in range(10):
        out = decide(view(registry, profile=CPU_BOUND, history=[oom]), tried=tried)
        if not isinstance(out, Proposal):
            break
        seen.update(out.changes)
        changes = {k: new for k, (_, new) in out.changes.items()}
        tried.add(fingerprint(apply_changes(recipe_text(PORTED), changes)))
    assert "micro_batch_size" not in seen
    assert isinstance(out, Stop) and out.reason == "exhausted"
    assert any("micro_batch_size=2: c1 failed" in line for line in out.evidence)


def test_stops_when_the_budget_cannot_cover_a_trial(registry: Registry) -> None:
    out = decide(view(registry, budget_left_s=5.0))
    assert isinstance(out, Stop) and out.reason == "budget"
    assert "forecast at 20 device-seconds and 5 are left" in out.evidence[0]


def test_stops_with_evidence_for_every_lever(registry: Registry) -> None:
    tuned = {
        **PORTED,
        "threads": 2,
        "micro_batch_size": 8,
        "activation_checkpointing": False,
        "attention": "sdpa",
        "compile": True,
        "optimizer_impl": "fused",
    }
    out = decide(view(registry, tuned), tuned)
    assert isinstance(out, Stop) and out.reason == "exhausted"
    assert out.evidence == ["every lever is already at its fastest known setting"]
    lost = [
        HistoryItem(
            trial="c1",
            changes={"attention": ("math", "sdpa")},
            status="ok",
            decision="close",
            gain=0.01,
            reason="+1.0% does not beat the 3.0% threshold",
        ),
    ]
    partly = {**tuned, "attention": "math"}
    out = decide(view(registry, partly, history=lost), partly)
    assert isinstance(out, Stop)
    assert out.evidence == [
        "attention=sdpa: already tried in c1: +1.0% does not beat the 3.0% threshold"
    ]


def micro_batch_proposal(registry: Registry, history: list[HistoryItem]) -> Proposal | None:
    """The agent's micro-batch move after ``history``, if it still makes one."""
    tried = {fingerprint(recipe_text(PORTED))}
    for item in history:
        changes = {k: new for k, (_, new) in item.changes.items()}
        tried.add(fingerprint(apply_changes(recipe_text(PORTED), changes)))
    for _ in range(10):
        out = decide(view(registry, profile=CPU_BOUND, history=history), tried=tried)
        if not isinstance(out, Proposal):
            return None
        if "micro_batch_size" in out.changes:
            return out
        changes = {k: new for k, (_, new) in out.changes.items()}
        tried.add(fingerprint(apply_changes(recipe_text(PORTED), changes)))
    return None


def closed(trial: str, old: int, new: int, gain: float) -> HistoryItem:
    return HistoryItem(
        trial=trial,
        changes={"micro_batch_size": (old, new)},
        status="ok",
        decision="close",
        gain=gain,
        reason=f"{gain:+.1%}",
    )


def test_a_micro_batch_step_closed_within_the_noise_does_not_end_the_climb(
    registry: Registry,
) -> None:
    """micro-batch 1 -> 2 closed at -1% (threshold 3%): the next proposal goes to 4, saying
    why; 2 and 4 both within the noise: 8; a clearly slower step ends the direction."""
    out = micro_batch_proposal(registry, [closed("c1", 1, 2, -0.01)])
    assert out is not None and out.changes == {"micro_batch_size": (1, 4)}
    assert "c1 (-1.0%) closed within the noise threshold 3.0%" in out.mechanism
    out = micro_batch_proposal(registry, [closed("c1", 1, 2, 0.02), closed("c2", 1, 4, -0.02)])
    assert out is not None and out.changes == {"micro_batch_size": (1, 8)}
    assert "c1 (+2.0%), c2 (-2.0%)" in out.mechanism
    # clearly slower (beyond the threshold): no further micro-batch move
    assert micro_batch_proposal(registry, [closed("c1", 1, 2, -0.10)]) is None
    # the whole per-rank share reached: nothing further to try
    every = [closed(f"c{i}", 1, 2**i, 0.0) for i in range(1, 4)]
    assert micro_batch_proposal(registry, every) is None


def test_a_crashed_boolean_move_is_blocked_for_both_agents(registry: Registry) -> None:
    """compile False -> True crashed (its judgement not yet in): neither the rules agent nor the
    Claude agent's catalogue check offers it again; both read one ``direction``."""
    crashed = HistoryItem(
        trial="c1", changes={"compile": (False, True)}, status="failed", decision=None, gain=None
    )
    v = view(registry, history=[crashed])
    assert blocked_directions(v.history) == {("compile", "=true"): "c1"}
    text = recipe_text(PORTED)

    def probe_of(changes: dict[str, object]) -> Probe | None:
        return Probe(fingerprint=fingerprint(apply_changes(text, changes)))

    left = remaining_moves(v, probe_of, {fingerprint(text)})
    assert left and not any(move.startswith("compile=") for move in left), left
    out = decide(v)
    assert isinstance(out, Proposal) and "compile" not in out.changes


def test_expected_gains_are_the_models_and_slower_moves_are_pruned(registry: Registry) -> None:
    """No constant: the proposal's expected gain is the probe's prediction; a move the model
    predicts slower than the incumbent beyond its band is pruned, named in the hypothesis."""
    text = recipe_text(PORTED)
    first = decide(view(registry))
    assert isinstance(first, Proposal) and first.lever == ["threads"]

    def probe_of(changes: dict[str, object]) -> Probe | None:
        fp = fingerprint(apply_changes(text, changes))
        slower = "threads" in changes
        gain = -20.0 if slower else 4.0
        return Probe(fingerprint=fp, predicted_gain_pct=gain, band_pct=5.0)

    out = RulesAgent().decide(view(registry), probe_of, {fingerprint(text)})
    assert isinstance(out, Proposal) and out.lever != ["threads"]
    assert out.expected_gain_pct == 4.0
    assert "Pruned before launch: threads=2: pruned, predicted -20.0% (band +-5.0%)" in (
        out.mechanism
    )


def test_a_memory_hungry_move_is_paired_with_a_saver_when_it_alone_does_not_fit(
    registry: Registry,
) -> None:
    config = {**PORTED, "activation_checkpointing": False}
    text = recipe_text(config)

    def probe_of(changes: dict[str, object]) -> Probe | None:
        fp = fingerprint(apply_changes(text, changes))
        if "micro_batch_size" not in changes:
            return Probe(fingerprint=fp, predicted_gain_pct=-30.0, band_pct=5.0)
        together = changes.get("activation_checkpointing") is True
        return Probe(
            fingerprint=fp,
            fits=together,
            memory="predicted 3.1 GiB of 2.0 GiB" if not together else "1.2 GiB of 2.0 GiB",
            predicted_gain_pct=15.0 if together else 20.0,
            band_pct=5.0,
        )

    out = RulesAgent().decide(view(registry, config), probe_of, {fingerprint(text)})
    assert isinstance(out, Proposal) and out.coupled
    assert out.changes == {"micro_batch_size": (1, 2), "activation_checkpointing": (False, True)}
    assert "alone does not fit (predicted 3.1 GiB of 2.0 GiB" in out.mechanism
    assert "predicted +20.0%" in out.mechanism and "predicted +15.0%" in out.mechanism
    assert out.expected_gain_pct == 15.0
