"""The step-time model's per-campaign calibration (``perfmodel/calibration.py``): a few group
factors fitted on log step time pull a deliberately wrong prior toward what the simulated
cluster measures, and the error band shrinks as runs accumulate."""

from __future__ import annotations

import itertools
import math

import pytest

from benchmarks.sim_space import SPACES, Truth, changes
from bot.campaign.recipe_edit import apply_changes
from gate.models import EffectiveConfig
from gate.recipe import parse_recipe
from perfmodel import predict_step
from perfmodel.calibration import PRIOR_LOG_ERROR, Observation, fit
from runners.sim.truth import SimParams, true_run

LAYOUTS = [
    {"tp": 8, "mbs": 1, "recompute": "full", "overlap_grad": False},
    {"tp": 4, "mbs": 1, "recompute": "full", "overlap_grad": False},
    {"tp": 2, "mbs": 1, "recompute": "selective", "overlap_grad": True},
    {"tp": 4, "mbs": 2, "recompute": "selective", "overlap_grad": True},
    {"tp": 2, "mbs": 1, "recompute": "full", "overlap_grad": True},
    {"tp": 8, "mbs": 2, "recompute": "none", "overlap_grad": True},
    {"tp": 4, "mbs": 1, "recompute": "none", "overlap_grad": False},
    {"tp": 1, "mbs": 1, "recompute": "selective", "overlap_grad": True},
]
WRONG = {"compute": 2.0, "optimizer": 2.0, "other": 2.0, "tp": 0.4, "dp": 0.4}
"""The deliberately wrong prior: compute twice too slow, communication 2.5x too fast."""


def _measured_pairs(params: SimParams) -> list[tuple[Observation, float]]:
    """(wrong prior's observation of one simulated run, its true step time) per layout."""
    space = SPACES["llama3-8b"]
    truth = Truth(space, params)
    text = space.recipe.read_text()
    recipes = [
        parse_recipe(apply_changes(text, changes(layout)), path=f"l{i}.yaml")
        for i, layout in enumerate(LAYOUTS)
    ]
    found = []
    for i, effective in enumerate(truth.adapter.resolve_each(recipes)):  # one worker for all
        assert isinstance(effective, EffectiveConfig), effective
        true = truth.of(effective)
        if not true.fits:
            continue
        run = true_run(true, params, run_key=f"l{i}", steps=8)
        measured = sum(run.step_seconds[3:]) / len(run.step_seconds[3:])
        prior = predict_step(effective, truth.hardware, device_memory_gib=truth.memory_gib)
        wrong = prior.corrected(WRONG)
        found.append((Observation(breakdown=wrong.breakdown, measured_step_s=measured), measured))
    return found


def _error(predicted: float, measured: float) -> float:
    return abs(math.log(predicted / measured))


@pytest.fixture(scope="module")
def pairs() -> list[tuple[Observation, float]]:
    return _measured_pairs(SimParams(seed=11, spread=0.05, cv=0.02))


@pytest.mark.slow  # resolving the layouts through Megatron-LM's parser: about 30 s
def test_calibration_pulls_a_wrong_prior_toward_the_simulated_measurements(
    pairs: list[tuple[Observation, float]],
) -> None:
    assert len(pairs) >= 6
    train, held_out = pairs[:4], pairs[4:]
    calibration = fit([o for o, _ in train])
    for obs, measured in held_out:
        before = _error(sum(obs.breakdown.values()), measured)
        after = _error(calibration.corrected_step_s(obs.breakdown), measured)
        assert before > 0.3  # the wrong prior is far off on runs the fit never saw
        assert after < before / 3
        assert after < 0.12
    # the compute group is pulled back from the wrong x2 toward 1
    assert 0.35 < calibration.factors["compute"] < 0.7


@pytest.mark.slow
def test_the_band_shrinks_as_runs_accumulate(pairs: list[tuple[Observation, float]]) -> None:
    bands = [fit([o for o, _ in pairs[:n]]).band for n in range(len(pairs) + 1)]
    assert bands[0] == pytest.approx(PRIOR_LOG_ERROR)
    assert all(b2 <= b1 + 1e-9 for b1, b2 in itertools.pairwise(bands[2:]))
    assert bands[-1] < bands[0] * 0.6


def test_one_run_moves_the_group_that_dominates_it_and_nothing_is_unbounded() -> None:
    only_compute = Observation(breakdown={"compute": 1.0, "tp": 0.0}, measured_step_s=1.3)
    calibration = fit([only_compute])
    assert calibration.factors["compute"] == pytest.approx(1.3, rel=0.01)
    assert calibration.factors["communication"] == pytest.approx(1.0)  # unseen: kept at 1
    assert calibration.runs == 1
    assert fit([]).factors == {"compute": 1.0, "communication": 1.0, "bubble": 1.0}
