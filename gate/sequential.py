"""The promotion rule, sharpened: one run when the gain is beyond doubt, else interleaved pairs.

A candidate's first run is compared with the incumbent's score. Promoting on that one run must
stay rare under no real gain, and the noise threshold alone (max(3%, 3 x cv), with cv estimated
from five runs) is not: the gain's own spread is cv x sqrt(1 + 1/m) for an incumbent scored
from m runs, and cv itself is an estimate with (runs - 1) degrees of freedom, so the standardised
gain of an identical recipe follows Student's t with runs - 1 degrees of freedom, whose tail at
3 is about 2% for five runs. ``one_run_bar`` therefore uses the t quantile at ``ALPHA_ONE_RUN``.

Between 0 and that bar (the zone where a real gain and luck look alike) the candidate is
re-measured A/B/A/B: the incumbent (A) and the candidate (B) run alternately, each pair close in
time, and the paired relative differences d_i = B_i / A_i - 1 decide (``decide``). With n pairs
and mean d, a candidate is promoted when

    mean d > max(FLOOR, k_n x se),  k_n = max(SIGMAS, t_df(1 - alpha_n))

The standard error pools what is known of the noise. Two independent runs of one recipe with
run-to-run cv differ by d with variance 2 cv^2, and the calibration estimated cv from
``noise.runs`` runs; the pairs estimate the same variance with n - 1 more degrees of freedom, so

    s_pooled^2 = ((runs - 1) x 2 cv^2 + (n - 1) x s_d^2) / (runs - 1 + n - 1),  df = runs + n - 2

and under no real gain mean d / (s_pooled / sqrt n) follows Student's t with df degrees of
freedom (normal runs; the calibration runs are not pairs, so independent of them). Three pairs
alone would give df = 2, whose tail quantiles are enormous (t_2 at 0.999 is 22.3); pooled with
five calibration runs df is 6. Pairs noisier than the calibration (a candidate whose layout
is noisier than the incumbent's) are not hidden by the pooling: se is the larger of
s_pooled / sqrt n and s_d / sqrt n.

alpha_n spends ``ALPHA_PAIRED`` over the looks (n = MIN_PAIRS .. max_pairs) with the Lan-DeMets
O'Brien-Fleming spending function alpha(t) = 2 (1 - Phi(z_{1 - alpha/2} / sqrt t)),
t = n / max_pairs: the look at n pairs gets alpha(t_n) - alpha(t_{n-1}). The increments sum to
``ALPHA_PAIRED``, so by the union bound all looks together promote an identical recipe with
probability at most ``ALPHA_PAIRED``, whatever the noise level and however the first run
landed (its pairs are fresh runs). Early looks are strict and the last look gets most of the
alpha, which is where a gain inside the one-run bar is decided. The screening run is not a
pair: it was selected for landing in the zone and would bias the mean.

Everything here is pure: scores in, decisions out.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from statistics import NormalDist
from typing import Literal

from pydantic import BaseModel

from gate.models import NoiseModel
from gate.noise import FLOOR, SIGMAS

ALPHA_ONE_RUN = 0.004
"""Largest probability that an identical recipe is promoted on its first run."""
ALPHA_PAIRED = 0.004
"""Largest probability that an identical recipe is promoted by the paired phase."""
MIN_PAIRS = 3
"""Pairs before the paired rule is first applied (it needs a spread: two at the very least)."""
MAX_PAIRS = 6
"""Default per-candidate cap on pairs (2 x MAX_PAIRS extra runs at most)."""
CONFIRM_PAIRS = 3
"""Pairs of the final confirmation (baseline, winner)."""
CONFIDENCE = 0.95
"""Level of the confirmation's two-sided confidence interval."""

FirstRun = Literal["merge", "close", "remeasure"]
PairedDecision = Literal["merge", "close", "more"]


# --- Student's t, for integer degrees of freedom (no scipy) ---------------------------------


def t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with ``df`` >= 1 degrees of freedom (closed form for integer
    df, Abramowitz & Stegun 26.7.3 and 26.7.4)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    theta = math.atan2(x, math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2 == 1:
        total, term = 0.0, c
        if df > 1:
            total = term
            for k in range(3, df, 2):
                term *= c * c * (k - 1) / k
                total += term
        a = (2.0 / math.pi) * (theta + s * total)
    else:
        total, term = 1.0, 1.0
        for k in range(2, df, 2):
            term *= c * c * (k - 1) / k
            total += term
        a = s * total
    return 0.5 + 0.5 * a


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, df: int) -> float:
    """x with P(T <= x) = p, by bisection on ``t_cdf`` (cached: the rule asks for few)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


# --- the first run --------------------------------------------------------------------------


def one_run_bar(noise: NoiseModel, incumbent_runs: int) -> float:
    """The gain a single run must exceed to be promoted alone: the noise threshold, or the t
    quantile at ``ALPHA_ONE_RUN`` of the gain's own spread when that is stricter."""
    if incumbent_runs < 1:
        raise ValueError("the incumbent's score needs at least one run")
    k = max(SIGMAS, t_quantile(1.0 - ALPHA_ONE_RUN, max(1, noise.runs - 1)))
    spread = noise.cv * math.sqrt(1.0 + 1.0 / incumbent_runs)
    return max(noise.threshold, FLOOR, k * spread)


def first_run(gain: float, bar: float) -> FirstRun:
    """Promote beyond the bar, re-measure in (0, bar], close a candidate no faster."""
    if gain > bar:
        return "merge"
    if gain > 0.0:
        return "remeasure"
    return "close"


# --- the paired phase -----------------------------------------------------------------------


class PairedVerdict(BaseModel):
    """The paired rule's answer after n pairs."""

    decision: PairedDecision
    pairs: int
    mean: float | None = None
    """Mean paired relative difference (B / A - 1)."""
    se: float | None = None
    """Its standard error: the pairs' pooled with the calibration's (``standard_error``)."""
    bar: float | None = None
    """What the mean had to exceed: max(FLOOR, k_n x se)."""
    reason: str


def differences(pairs: Sequence[tuple[float, float]]) -> list[float]:
    """Paired relative differences B / A - 1 of (incumbent A, candidate B) scores."""
    if any(a <= 0 for a, _ in pairs):
        raise ValueError("paired scores need a positive incumbent score")
    return [b / a - 1.0 for a, b in pairs]


def _stdev(values: Sequence[float], mean: float) -> float:
    """Sample standard deviation (n - 1) in floats (``statistics.stdev`` is exact and slow)."""
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def spent(t: float, alpha: float = ALPHA_PAIRED) -> float:
    """Alpha spent by information fraction ``t`` (O'Brien-Fleming type, Lan-DeMets)."""
    if t <= 0.0:
        return 0.0
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    return 2.0 * (1.0 - NormalDist().cdf(z / math.sqrt(min(t, 1.0))))


def look_alpha(n: int, max_pairs: int) -> float:
    """The share of ``ALPHA_PAIRED`` the look after n pairs may spend."""
    if not MIN_PAIRS <= n <= max_pairs:
        raise ValueError(f"the rule looks at {MIN_PAIRS}..{max_pairs} pairs, not {n}")
    before = 0.0 if n == MIN_PAIRS else spent((n - 1) / max_pairs)
    return spent(n / max_pairs) - before


def paired_factor(n: int, max_pairs: int, df: int | None = None) -> float:
    """k_n: the multiple of the standard error the mean must exceed after n pairs, with ``df``
    degrees of freedom behind the standard error (default n - 1: the pairs alone)."""
    return max(SIGMAS, t_quantile(1.0 - look_alpha(n, max_pairs), df or max(1, n - 1)))


def standard_error(d: Sequence[float], mean: float, noise: NoiseModel | None) -> tuple[float, int]:
    """se of the mean difference and its degrees of freedom, pooled with the calibration's
    2 cv^2 when ``noise`` is given (never below the pairs' own)."""
    n = len(d)
    own = _stdev(d, mean)
    if noise is None or noise.runs < 2:
        return own / math.sqrt(n), n - 1
    df_cal = noise.runs - 1
    pooled = math.sqrt((df_cal * 2.0 * noise.cv**2 + (n - 1) * own**2) / (df_cal + n - 1))
    return max(pooled, own) / math.sqrt(n), df_cal + n - 1


def decide(
    pairs: Sequence[tuple[float, float]],
    *,
    max_pairs: int = MAX_PAIRS,
    noise: NoiseModel | None = None,
) -> PairedVerdict:
    """merge, close (the cap, or a mean that cannot reach the floor) or more pairs. ``noise``:
    the incumbent's calibrated noise, pooled into the standard error (None: the pairs alone)."""
    if max_pairs < MIN_PAIRS:
        raise ValueError(f"the pair cap must be at least {MIN_PAIRS}, got {max_pairs}")
    n = len(pairs)
    if n < MIN_PAIRS:
        return PairedVerdict(decision="more", pairs=n, reason=f"{n} of {MIN_PAIRS} pairs")
    d = differences(pairs)
    mean = statistics.fmean(d)
    se, df = standard_error(d, mean, noise)
    bar = max(FLOOR, paired_factor(min(n, max_pairs), max_pairs, df) * se)
    shown = f"{mean:+.1%} ± {se:.1%} over {n} pairs"
    verdict = {"pairs": n, "mean": mean, "se": se, "bar": bar}
    if mean > bar:
        return PairedVerdict(decision="merge", reason=f"{shown} beats {bar:.1%}", **verdict)
    upper = mean + t_quantile(0.975, df) * se
    if upper <= FLOOR:
        why = f"{shown}: even its 97.5% upper bound {upper:+.1%} is under {FLOOR:.0%}"
        return PairedVerdict(decision="close", reason=why, **verdict)
    if n >= max_pairs:
        why = f"{shown} does not beat {bar:.1%} within the {max_pairs}-pair cap"
        return PairedVerdict(decision="close", reason=why, **verdict)
    return PairedVerdict(decision="more", reason=f"{shown}: undecided", **verdict)


# --- the final confirmation ------------------------------------------------------------------


class Interval(BaseModel):
    """The winner's speedup over the baseline from interleaved pairs, with its interval."""

    pairs: int
    speedup: float
    """Mean of the paired ratios winner / baseline."""
    low: float | None
    high: float | None
    """The two-sided ``level`` confidence interval (None with fewer than two pairs)."""
    level: float = CONFIDENCE


def confidence_interval(
    pairs: Sequence[tuple[float, float]], *, level: float = CONFIDENCE
) -> Interval:
    """mean ratio ± t_{n-1}((1 + level) / 2) x its standard error, from (baseline, winner)."""
    if not pairs:
        raise ValueError("a confidence interval needs at least one pair")
    ratios = [1.0 + d for d in differences(pairs)]
    mean = statistics.fmean(ratios)
    if len(ratios) < 2:
        return Interval(pairs=1, speedup=mean, low=None, high=None, level=level)
    half = t_quantile((1.0 + level) / 2.0, len(ratios) - 1) * _stdev(ratios, mean)
    half /= math.sqrt(len(ratios))
    return Interval(pairs=len(ratios), speedup=mean, low=mean - half, high=mean + half, level=level)
