"""The sharpened promotion rule (``gate/sequential.py``), pure: Student's t, the one-run bar,
the paired A/B rule and its cap, the confirmation's interval, and the false-promotion rate of
identical recipes (A/A) simulated with noise like the demo machine's."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from benchmarks.false_promotion import DEMO_CV, simulate
from gate import noise, sequential
from gate.models import NoiseModel

# reference values of Student's t quantiles (any statistics table)
T_TABLE = [(1, 0.975, 12.7062), (2, 0.975, 4.3027), (4, 0.975, 2.7764), (4, 0.995, 4.6041)]
T_TABLE += [(10, 0.975, 2.2281), (30, 0.975, 2.0423), (5, 0.999, 5.8934), (7, 0.99, 2.9980)]


@pytest.mark.parametrize(("df", "p", "expected"), T_TABLE)
def test_t_quantiles_match_the_tables(df: int, p: float, expected: float) -> None:
    assert sequential.t_quantile(p, df) == pytest.approx(expected, abs=2e-4)
    assert sequential.t_cdf(expected, df) == pytest.approx(p, abs=1e-5)
    assert sequential.t_quantile(1 - p, df) == pytest.approx(-expected, abs=2e-4)


def test_t_tends_to_the_normal() -> None:
    assert sequential.t_cdf(1.959964, 2000) == pytest.approx(0.975, abs=1e-4)
    with pytest.raises(ValueError, match="degrees of freedom"):
        sequential.t_cdf(1.0, 0)
    with pytest.raises(ValueError, match="0 < p < 1"):
        sequential.t_quantile(1.0, 3)


def model(cv: float, runs: int = 5) -> NoiseModel:
    return NoiseModel(runs=runs, mean=1000.0, std=1000 * cv, cv=cv, threshold=max(0.03, 3 * cv))


def test_the_one_run_bar_is_at_least_the_noise_threshold() -> None:
    quiet, noisy = model(0.002), model(0.024)
    assert sequential.one_run_bar(quiet, 5) == pytest.approx(0.03)  # the floor
    # t_4 at 0.996 is 4.908; the gain's spread is cv x sqrt(1 + 1/5)
    assert sequential.one_run_bar(noisy, 5) == pytest.approx(4.9076 * 0.024 * math.sqrt(1.2), 1e-3)
    assert sequential.one_run_bar(noisy, 5) > noisy.threshold
    # an incumbent scored from fewer runs makes a single run's gain less certain
    assert sequential.one_run_bar(noisy, 1) > sequential.one_run_bar(noisy, 5)


@pytest.mark.parametrize(
    ("gain", "expected"),
    [(0.20, "merge"), (0.05, "remeasure"), (0.0001, "remeasure"), (0.0, "close"), (-0.1, "close")],
)
def test_the_first_run_merges_re_measures_or_closes(gain: float, expected: str) -> None:
    assert sequential.first_run(gain, 0.12) == expected


def pairs_with(differences: list[float], a: float = 1000.0) -> list[tuple[float, float]]:
    return [(a, a * (1 + d)) for d in differences]


def test_the_paired_rule_needs_its_minimum_of_pairs() -> None:
    verdict = sequential.decide(pairs_with([0.2, 0.2]))
    assert verdict.decision == "more" and verdict.pairs == 2


def test_a_consistent_gain_beyond_three_standard_errors_and_the_floor_merges() -> None:
    d = [0.05, 0.051, 0.049]
    verdict = sequential.decide(pairs_with(d), max_pairs=3)
    se = statistics.stdev(d) / math.sqrt(3)
    k = sequential.paired_factor(3, 3)  # one look: it may spend the whole alpha
    assert k >= 3.0 and k == pytest.approx(sequential.t_quantile(1 - sequential.ALPHA_PAIRED, 2))
    # at the default cap the first of four looks spends little: the same pairs need more
    assert sequential.decide(pairs_with(d)).decision == "more"
    assert verdict.decision == "merge"
    assert verdict.mean == pytest.approx(0.05) and verdict.se == pytest.approx(se)
    assert verdict.bar == pytest.approx(max(0.03, k * se))


def test_a_gain_under_the_floor_never_merges_however_certain() -> None:
    verdict = sequential.decide(pairs_with([0.02, 0.02, 0.02, 0.02]))
    assert verdict.decision == "close" and "upper bound" in verdict.reason


def test_an_unclear_difference_asks_for_more_then_stops_at_the_cap() -> None:
    d = [0.06, -0.01, 0.05]
    assert sequential.decide(pairs_with(d), max_pairs=4).decision == "more"
    capped = sequential.decide(pairs_with([*d, 0.02]), max_pairs=4)
    assert capped.decision == "close" and "4-pair cap" in capped.reason
    with pytest.raises(ValueError, match="at least 3"):
        sequential.decide(pairs_with(d), max_pairs=2)


def test_the_looks_spend_alpha_obrien_fleming_style_and_never_more_than_it() -> None:
    for cap in (3, 4, 6, 10):
        shares = [sequential.look_alpha(n, cap) for n in range(sequential.MIN_PAIRS, cap + 1)]
        assert sum(shares) == pytest.approx(sequential.ALPHA_PAIRED)
        assert shares == sorted(shares)  # early looks strict, the last one gets the most
    # the one-sided O'Brien-Fleming spending at half the information: 2 (1 - Phi(z / sqrt .5))
    z = statistics.NormalDist().inv_cdf(1 - sequential.ALPHA_PAIRED / 2)
    half = 2 * (1 - statistics.NormalDist().cdf(z / math.sqrt(0.5)))
    assert sequential.look_alpha(3, 6) == pytest.approx(half)
    with pytest.raises(ValueError, match=r"3\.\.6 pairs"):
        sequential.look_alpha(7, 6)


def test_the_standard_error_pools_the_calibration() -> None:
    d = [0.07, 0.13, 0.10]
    calibrated = model(0.024, runs=5)
    se, df = sequential.standard_error(d, 0.10, calibrated)
    s_d = statistics.stdev(d)
    pooled = math.sqrt((4 * 2 * 0.024**2 + 2 * s_d**2) / 6)
    assert df == 6 and se == pytest.approx(pooled / math.sqrt(3))
    alone, df_alone = sequential.standard_error(d, 0.10, None)
    assert df_alone == 2 and alone == pytest.approx(s_d / math.sqrt(3))
    # pairs noisier than the calibration keep their own spread: pooling never hides it
    noisy = [0.30, -0.10, 0.10]
    se_noisy, _ = sequential.standard_error(noisy, 0.1, calibrated)
    assert se_noisy == pytest.approx(statistics.stdev(noisy) / math.sqrt(3))
    # with the calibration's degrees of freedom three pairs can decide a gain inside the
    # one-run bar that the pairs alone could not
    pairs = pairs_with(d)
    assert sequential.decide(pairs, max_pairs=3, noise=calibrated).decision == "merge"
    assert sequential.decide(pairs, max_pairs=3).decision == "close"


def test_pooling_finds_more_real_gains_at_the_same_false_promotion_rate() -> None:
    """Simulated at the demo machine's noise: a true +8% gain (inside the one-run bar) is
    promoted far more often with the calibration pooled in, and identical recipes stay rare."""
    pooled = simulate(1000, gain=0.08, seed=7)
    alone = simulate(1000, gain=0.08, seed=7, pooled=False)
    rate_pooled = sum(r.decision == "merge" for r in pooled) / 1000
    rate_alone = sum(r.decision == "merge" for r in alone) / 1000
    assert rate_pooled > 0.85 and rate_pooled > rate_alone + 0.08, (rate_pooled, rate_alone)
    aa = simulate(3000, seed=8, max_pairs=3)
    assert sum(r.decision == "merge" for r in aa) / 3000 < 0.01


def test_the_confirmation_interval() -> None:
    pairs = [(1000.0, 2500.0), (1010.0, 2550.0), (990.0, 2450.0)]
    interval = sequential.confidence_interval(pairs)
    ratios = [b / a for a, b in pairs]
    half = 4.3027 * statistics.stdev(ratios) / math.sqrt(3)
    assert interval.speedup == pytest.approx(statistics.fmean(ratios))
    assert interval.low == pytest.approx(interval.speedup - half, abs=1e-4)
    assert interval.high == pytest.approx(interval.speedup + half, abs=1e-4)
    assert interval.low is not None and interval.low < interval.speedup < (interval.high or 0)
    one = sequential.confidence_interval(pairs[:1])
    assert one.pairs == 1 and one.low is None and one.high is None
    with pytest.raises(ValueError, match="at least one pair"):
        sequential.confidence_interval([])


def test_200_simulated_a_a_comparisons_promote_under_one_percent() -> None:
    results = simulate(200, cv=DEMO_CV, seed=0)
    promoted = [r for r in results if r.decision == "merge"]
    assert len(promoted) < 2, promoted  # under 1% of 200
    # the simulation exercised both phases: about half land in (0, bar] and are re-measured
    remeasured = [r for r in results if r.phase == "paired"]
    assert 60 < len(remeasured) < 140
    assert all(r.runs == 1 + 2 * r.pairs for r in remeasured)
    assert all(sequential.MIN_PAIRS <= r.pairs <= sequential.MAX_PAIRS for r in remeasured)


@pytest.mark.parametrize(("cv", "drift"), [(DEMO_CV, 0.0), (0.01, 0.0), (0.05, 0.0), (0.01, 0.02)])
def test_the_false_promotion_rate_is_under_one_percent_at_any_noise(
    cv: float, drift: float
) -> None:
    """200 comparisons count about 0.7 false promotions at a true rate of 0.35%: a larger
    sample measures the rate itself, at several noise levels and with a slow machine drift."""
    results = simulate(3000, cv=cv, drift=drift, seed=1)
    rate = sum(r.decision == "merge" for r in results) / len(results)
    assert rate < 0.01


@pytest.mark.parametrize("pooled", [False, True])
def test_the_paired_phase_alone_stays_under_its_alpha(pooled: bool) -> None:
    """Fresh pairs of identical recipes, every look of the rule: at most ALPHA_PAIRED merge,
    judged by the pairs alone or with a fresh five-run calibration pooled in."""
    rng = random.Random(3)
    trials, merged = 3000, 0
    for _ in range(trials):
        pairs: list[tuple[float, float]] = []
        calibrated = noise.calibrate([1000 * (1 + rng.gauss(0, 0.05)) for _ in range(5)])
        while True:
            pairs.append((1000 * (1 + rng.gauss(0, 0.05)), 1000 * (1 + rng.gauss(0, 0.05))))
            verdict = sequential.decide(pairs, noise=calibrated if pooled else None)
            if verdict.decision != "more":
                merged += verdict.decision == "merge"
                break
    assert merged / trials <= sequential.ALPHA_PAIRED


def test_a_real_gain_is_found_more_often_than_by_chance() -> None:
    """Not only strict: a true +10% at the demo's noise merges far more often than A/A."""
    rng = random.Random(5)
    merged = 0
    for _ in range(300):
        m = noise.calibrate([1000 * (1 + rng.gauss(0, DEMO_CV)) for _ in range(5)])
        gain = 1100 * (1 + rng.gauss(0, DEMO_CV)) / m.mean - 1
        first = sequential.first_run(gain, sequential.one_run_bar(m, 5))
        if first == "merge":
            merged += 1
            continue
        if first == "close":
            continue
        pairs: list[tuple[float, float]] = []
        while (v := sequential.decide(pairs)).decision == "more":
            pairs.append((1000 * (1 + rng.gauss(0, DEMO_CV)), 1100 * (1 + rng.gauss(0, DEMO_CV))))
        merged += v.decision == "merge"
    assert merged / 300 > 0.5
