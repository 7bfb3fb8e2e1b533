"""The rules agent on a Megatron-LM recipe (the simulated benchmark's ported Llama-3 8B: TP 8,
full recompute): tensor parallelism may step down by any power of two, recompute moves with
its method and layer count as one declared coupled move that Megatron-LM accepts, the moves
the calibrated model predicts beyond the noise go first, and the model names the bottleneck
instead of a profile run only when it predicts such a move."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.agents.levers.gpu_moves import megatron_moves
from bot.agents.levers.moves import Move
from bot.agents.levers.predicted import SAVERS
from bot.agents.rules import RulesAgent
from bot.campaign.recipe_edit import apply_changes
from bot.interfaces import AgentView, HistoryItem, ModelView, Probe, ProfileRequest, Proposal
from gate.models import EffectiveConfig
from gate.recipe import load_recipe, parse_recipe
from gate.registry import load_registry
from perfmodel import predict_step
from perfmodel.calibration import Calibration, move_fields
from runners.adapters import get_adapter
from runners.megatron.adapter import MegatronAdapter

RECIPE = Path(__file__).resolve().parent.parent / "benchmarks/recipes/sim/llama3-8b-ported.yaml"
PART = "h100-sxm"
SELECTIVE_ALONE = {"recompute_granularity": "selective"}
Resolved = dict[str, EffectiveConfig | Exception]

pytestmark = pytest.mark.frameworks  # resolves through Megatron-LM's own parser


def _key(changes: dict[str, Any]) -> str:
    return json.dumps(changes, sort_keys=True)


@pytest.fixture(scope="module")
def resolved() -> tuple[EffectiveConfig, list[Move], Resolved]:
    """The baseline, its catalogue, and every move of it (and the old one-key recompute move)
    resolved by Megatron-LM's own validation, in one resolver process."""
    adapter = get_adapter("megatron", path=str(RECIPE))
    assert isinstance(adapter, MegatronAdapter)  # resolves a batch in one worker
    base = adapter.resolve(load_recipe(RECIPE))
    moves = megatron_moves(dict(base.values), 8)
    sets = [{}, SELECTIVE_ALONE, *(m.changes for m in moves), *SAVERS["megatron"]]
    text = RECIPE.read_text()
    outcomes = adapter.resolve_each(
        [parse_recipe(apply_changes(text, c), path="x.yaml") for c in sets]
    )
    return base, moves, {_key(c): o for c, o in zip(sets, outcomes, strict=True)}


def test_every_memory_saver_is_a_recipe_megatron_accepts(
    resolved: tuple[EffectiveConfig, list[Move], Resolved],
) -> None:
    """A memory-hungry move is paired with a saver: each must resolve on a recipe with full
    recompute (selective recompute must also clear the method and the layer count)."""
    _, _, outcomes = resolved
    for saver in SAVERS["megatron"]:
        outcome = outcomes[_key(saver)]
        assert isinstance(outcome, EffectiveConfig), (saver, outcome)


def test_the_catalogue_steps_tp_down_by_any_power_and_couples_recompute(
    resolved: tuple[EffectiveConfig, list[Move], Resolved],
) -> None:
    _, moves, outcomes = resolved
    tp = [
        m.changes["tensor_model_parallel_size"]
        for m in moves
        if "tensor_model_parallel_size" in m.changes
    ]
    assert tp == [4, 2, 1]
    recompute = [m for m in moves if "recompute_granularity" in m.changes]
    assert [m.changes for m in recompute] == [
        {"recompute_granularity": g, "recompute_method": None, "recompute_num_layers": None}
        for g in ("selective", None)
    ]
    assert all(m.coupled and "one declared coupled move" in m.mechanism for m in recompute)
    # Megatron-LM refuses selective recompute beside a recompute method; the coupled move passes
    assert isinstance(outcomes[_key(SELECTIVE_ALONE)], Exception)
    for m in recompute + [m for m in moves if "tensor_model_parallel_size" in m.changes]:
        assert isinstance(outcomes[_key(m.changes)], EffectiveConfig), m.changes


def _view(base: EffectiveConfig, threshold: float = 0.03, framework: str = "megatron") -> AgentView:
    registry = load_registry("megatron", "0.19.2")
    return AgentView(
        framework=framework,
        incumbent="baseline",
        incumbent_values=base.values,
        profile=None,
        history=[],
        layout_sources=registry.layout_sources(),
        threshold=threshold,
        budget_left_s=1e7,
        forecast_s=2000.0,
        cores=8,
        model=ModelView(hardware=PART, calibration=Calibration()),
    )


def _decide(
    resolved: tuple[EffectiveConfig, list[Move], Resolved],
    *,
    threshold: float = 0.03,
    framework: str = "megatron",
    tried: set[str] | None = None,
) -> tuple[Any, dict[str, Probe]]:
    base, _, outcomes = resolved
    view = _view(base, threshold, framework)
    before = predict_step(base, PART)
    probes: dict[str, Probe] = {}

    def probe_of(changes: dict[str, object]) -> Probe | None:
        found = outcomes.get(_key(changes))
        if not isinstance(found, EffectiveConfig):
            return None
        fields = move_fields(before, predict_step(found, PART), Calibration(), steps=8)
        probes[_key(changes)] = Probe(fingerprint=found.fingerprint(), effective=found, **fields)
        return probes[_key(changes)]

    return RulesAgent().decide(view, probe_of, {base.fingerprint(), *(tried or ())}), probes


def test_the_model_names_the_bottleneck_and_its_best_move_goes_first(
    resolved: tuple[EffectiveConfig, list[Move], Resolved],
) -> None:
    out, probes = _decide(resolved)
    assert isinstance(out, Proposal), out
    assert "by the calibrated step-time model (no profile run)" in out.mechanism
    clear = {
        k: p
        for k, p in probes.items()
        if k != _key({}) and (p.predicted_gain_pct or 0) > 3.0 + (p.band_pct or 0)
    }
    assert clear  # the model predicts moves beyond the noise here, ...

    def rate(p: Probe) -> float:
        return (p.predicted_gain_pct or 0) / (p.predicted_trial_device_s or 1)

    best = max(clear, key=lambda k: rate(clear[k]))  # ... and the best per device-hour goes
    assert _key({k: new for k, (_, new) in out.changes.items()}) == best
    assert out.expected_gain_pct == pytest.approx(clear[best].predicted_gain_pct)
    assert out.coupled == (len(out.changes) > 1)
    assert all(s != "-" for s in out.sources)


def test_a_profile_when_no_move_is_predicted_beyond_the_noise(
    resolved: tuple[EffectiveConfig, list[Move], Resolved],
) -> None:
    out, _ = _decide(resolved, threshold=5.0)  # a 500% noise bar: nothing is clear
    assert isinstance(out, ProfileRequest)
    assert "no move predicted beyond the noise" in out.reason
    # every move predicted beyond the noise already ran: a profile, not an uncertain move
    _, probes = _decide(resolved)
    ran = {p.fingerprint for p in probes.values() if (p.predicted_gain_pct or 0) > 3.0}
    out, _ = _decide(resolved, tried=ran)
    assert isinstance(out, ProfileRequest), out
    assert "no move beyond the noise is left" in out.reason
    out, _ = _decide(resolved, framework="embedded")  # the CPU workload keeps its profile
    assert isinstance(out, ProfileRequest) and "bottleneck is unclear" in out.reason


def test_a_closed_coupled_move_rules_out_itself_only(
    resolved: tuple[EffectiveConfig, list[Move], Resolved],
) -> None:
    """Selective recompute (granularity, method and layers) closed: full -> none, which clears
    the method and layers too, is not "already tried"; selective recompute itself is."""
    base, moves, _ = resolved
    selective, off = (m for m in moves if "recompute_granularity" in m.changes)
    item = HistoryItem(
        trial="c1",
        changes={k: (base.values[k], v) for k, v in selective.changes.items()},
        decision="close",
        reason="+1.0%: within the noise",
        gain=0.01,
        status="ok",
    )
    lost = {(k, repr(new)): item for k, (_, new) in item.changes.items()}
    view = _view(base)

    def why(move: Move) -> str | None:
        old = {k: base.values[k] for k in move.changes}
        probe = Probe(fingerprint="new")
        return RulesAgent._ruled_out(move, old, {}, lost, probe, set(), view)

    assert why(off) is None
    assert why(selective) == "already tried in c1: +1.0%: within the noise"


MIXTRAL = RECIPE.with_name("mixtral-8x7b-ported.yaml")
NO_RECOMPUTE = {
    "recompute_granularity": None,
    "recompute_method": None,
    "recompute_num_layers": None,
}
BOTH: dict[str, object] = {"overlap_grad_reduce": True, "overlap_param_gather": True}
COMMUNICATION_X5 = Calibration(
    factors={"compute": 1.0, "communication": 5.0, "bubble": 1.0}, runs=6, band=0.005
)
"""A model calibrated on 6 runs to communication 5x the prior's, within +-0.5%."""


def _campaign(text: str, decisions: int = 8) -> tuple[list[Proposal], dict[str, Probe]]:
    """The rules agent's proposals on the ported Mixtral (``text``), each run in turn (its
    fingerprint joins ``tried``), every candidate resolved by Megatron-LM's own validation and
    priced by a model calibrated to communication 5x the prior."""
    adapter = MegatronAdapter()
    base = adapter.resolve(parse_recipe(text, path="x.yaml"))
    view = _view(base)
    view.model = ModelView(hardware=PART, calibration=COMMUNICATION_X5)
    before = predict_step(base, PART)
    probes: dict[str, Probe] = {}

    def probe_of(changes: dict[str, object]) -> Probe | None:
        if _key(changes) not in probes:
            try:
                found = adapter.resolve(parse_recipe(apply_changes(text, changes), path="y.yaml"))
            except Exception:  # Megatron-LM's validation refused it
                return None
            fields = move_fields(before, predict_step(found, PART), COMMUNICATION_X5, steps=8)
            probes[_key(changes)] = Probe(
                fingerprint=found.fingerprint(), effective=found, **fields
            )
        return probes[_key(changes)]

    tried, out = {base.fingerprint()}, []
    for _ in range(decisions):
        proposal = RulesAgent().decide(view, probe_of, tried)
        if not isinstance(proposal, Proposal):
            break
        out.append(proposal)
        tried.add(probes[_key({k: new for k, (_, new) in proposal.changes.items()})].fingerprint)
    return out, probes


@pytest.mark.slow
def test_on_mixtral_both_overlaps_and_expert_parallelism_are_proposed() -> None:
    """Both overlaps, one declared coupled move Megatron-LM accepts (it refuses the parameter
    gather's alone), and expert parallelism, a layout key: proposed in the order of the
    calibrated model's gain per device-hour among the moves it predicts beyond the noise."""
    text = apply_changes(MIXTRAL.read_text(), NO_RECOMPUTE)
    proposals, probes = _campaign(text)
    moved = [{k: new for k, (_, new) in p.changes.items()} for p in proposals]
    assert BOTH in moved, moved
    both = proposals[moved.index(BOTH)]
    assert both.coupled and "megatron/training/arguments.py:994@0.19.2" in both.mechanism
    assert all(s != "-" for s in both.sources)
    assert (probes[_key(BOTH)].predicted_gain_pct or 0.0) > 3.0 + 0.5  # beyond the noise
    with pytest.raises(Exception, match="overlap-param-gather with --overlap-grad-reduce"):
        MegatronAdapter().resolve(
            parse_recipe(apply_changes(text, {"overlap_param_gather": True}), path="z.yaml")
        )
    # with both overlaps on, the model predicts a smaller EP beyond the noise: EP goes too
    proposals, probes = _campaign(apply_changes(text, BOTH))
    ep = [p for p in proposals if p.lever == ["expert_model_parallel_size"]]
    assert ep and not ep[0].coupled, [p.changes for p in proposals]
    old, new = ep[0].changes["expert_model_parallel_size"]
    assert (
        old == 8 and isinstance(new, int) and new < 8 and "a layout change only" in ep[0].mechanism
    )
    assert ep[0].sources == [
        load_registry("megatron", "0.19.2").data.keys["expert_model_parallel_size"].source
    ]
    found = probes[_key({"expert_model_parallel_size": new})]
    assert found.effective is not None  # Megatron-LM resolved it: the same experts, EP smaller
    assert found.effective.values["expert_model_parallel_size"] == new
    assert found.effective.values["num_experts"] == 8
    assert (found.predicted_gain_pct or 0.0) > 3.0 + (found.band_pct or 0.0)
