"""Noise calibration and the promotion rule: beat the incumbent by more than the noise."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from gate.models import NoiseModel

MIN_RUNS = 5
"""Baseline runs needed before the noise model is trusted."""
FLOOR = 0.03
"""Smallest threshold whatever the measured noise (3%)."""
SIGMAS = 3.0
"""Threshold in units of the coefficient of variation."""
RULE = f"max({FLOOR:.0%}, {SIGMAS:g} x cv)"
"""The threshold rule as every report, comment and console line writes it."""


def calibrate(
    scores: Sequence[float], *, floor: float = FLOOR, sigmas: float = SIGMAS
) -> NoiseModel:
    """Noise model from >= MIN_RUNS baseline scores; threshold = max(floor, sigmas x cv)."""
    if len(scores) < MIN_RUNS:
        raise ValueError(f"noise calibration needs at least {MIN_RUNS} runs, got {len(scores)}")
    if any(s <= 0 for s in scores):
        raise ValueError("noise calibration needs positive scores")
    mean = statistics.fmean(scores)
    std = statistics.stdev(scores)  # sample standard deviation (n - 1)
    cv = std / mean
    return NoiseModel(
        runs=len(scores), mean=mean, std=std, cv=cv, threshold=max(floor, sigmas * cv)
    )


def relative_gain(candidate: float, incumbent: float) -> float:
    """candidate / incumbent - 1."""
    return candidate / incumbent - 1.0


def beats(candidate: float, incumbent: float, noise: NoiseModel) -> bool:
    """True only when the candidate is faster than the incumbent by more than the threshold."""
    return relative_gain(candidate, incumbent) > noise.threshold


VARIANCE_KEYS = frozenset({"threads", "data_parallel_size", "nproc_per_node", "OMP_NUM_THREADS"})
"""Layout keys that change how noisy a run is, not only how fast: how many threads and ranks
share the machine (and so contend with whatever else runs there). A merge that moves one has
the new incumbent's noise recalibrated (``docs/judgement.md``)."""
VARIANCE_SUFFIXES = ("_parallel_size", "_parallel_degree", "_replicate_degree", "_shard_degree")
"""Any parallel split (ranks per dimension) changes the variance too, whatever the framework."""


def variance_keys(keys: Iterable[str]) -> list[str]:
    """The keys among ``keys`` whose change calls for recalibrating the noise."""
    return sorted(
        k for k in keys if k.rsplit(".", 1)[-1] in VARIANCE_KEYS or k.endswith(VARIANCE_SUFFIXES)
    )
