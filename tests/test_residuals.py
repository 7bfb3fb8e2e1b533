"""The model-guided agent's learned lever effects (``perfmodel/residuals.py``): a Bayesian
additive model of what the calibrated step-time model still misprices, lever by lever."""

from __future__ import annotations

import math
import random

import pytest

from perfmodel.residuals import (
    CONTEXT_SD,
    EFFECT_SD,
    MEASURE_SD,
    SAME_LEVER_CORRELATION,
    expected_improvement,
    fit_residuals,
)

BASE = {"tp": 8, "ep": 8, "recompute": "full"}
SPACE = [
    {"tp": tp, "ep": ep, "recompute": r}
    for tp in (1, 2, 4, 8)
    for ep in (1, 2, 4, 8)
    for r in ("full", "selective", "none")
]


def test_with_nothing_measured_a_move_is_as_uncertain_as_one_prior_prediction() -> None:
    learned = fit_residuals(BASE, [], SPACE)
    mean, sd = learned.step(BASE, {**BASE, "ep": 4})
    assert mean == 0.0
    # two independent effects change (none measured) plus the context term
    assert sd == pytest.approx(math.sqrt(EFFECT_SD**2 + CONTEXT_SD**2))
    mean, sd = learned.step({**BASE, "ep": 4}, {**BASE, "ep": 2})
    within = 2 * EFFECT_SD**2 * (1 - SAME_LEVER_CORRELATION)  # one lever: correlated values
    assert sd == pytest.approx(math.sqrt(within + CONTEXT_SD**2))


def test_one_measurement_moves_its_effect_most_of_the_way_and_its_siblings_part_way() -> None:
    residual = math.log(1.25)  # EP 4 measured 25% faster than the calibrated model said
    learned = fit_residuals(BASE, [({**BASE, "ep": 4}, residual)], SPACE)
    mean, sd = learned.step(BASE, {**BASE, "ep": 4})
    shrink = EFFECT_SD**2 / (EFFECT_SD**2 + MEASURE_SD**2)
    assert mean == pytest.approx(residual * shrink)
    assert sd < math.sqrt(EFFECT_SD**2 + CONTEXT_SD**2)
    sibling, _ = learned.step(BASE, {**BASE, "ep": 2})  # another value of the same lever
    assert sibling == pytest.approx(SAME_LEVER_CORRELATION * residual * shrink)
    other, other_sd = learned.step(BASE, {**BASE, "tp": 4})  # another lever: untouched
    assert other == 0.0 and other_sd == pytest.approx(math.sqrt(EFFECT_SD**2 + CONTEXT_SD**2))
    assert learned.measured == 1


def test_effects_are_separated_across_layouts_that_share_levers() -> None:
    """Each lever's own effect is recovered from layouts that move several levers at once."""
    truth: dict[tuple[str, object], float] = {("tp", 4): 0.2, ("ep", 2): -0.15}
    truth[("recompute", "none")] = 0.1
    rng = random.Random(0)
    measured = []
    for levers in rng.sample(SPACE, 30):
        r = sum(effect for (k, value), effect in truth.items() if levers[k] == value)
        measured.append((levers, r + rng.gauss(0, 0.01)))
    learned = fit_residuals(BASE, measured, SPACE)
    for (lever, value), effect in truth.items():
        assert learned.step(BASE, {**BASE, lever: value})[0] == pytest.approx(effect, abs=0.04)


def test_expected_improvement_matches_its_definition() -> None:
    rng = random.Random(1)
    for gain, sd, bar in [(0.05, 0.1, 0.06), (-0.05, 0.15, 0.06), (0.3, 0.05, 0.06)]:
        draws = [max(0.0, rng.gauss(gain, sd) - bar) for _ in range(200_000)]
        assert expected_improvement(gain, sd, bar) == pytest.approx(
            sum(draws) / len(draws), abs=2e-3
        )
    assert expected_improvement(0.1, 0.0, 0.06) == pytest.approx(0.04)
    assert expected_improvement(0.01, 0.0, 0.06) == 0.0
