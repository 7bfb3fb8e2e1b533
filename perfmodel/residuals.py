"""What the calibrated model still gets wrong, lever by lever: a campaign's learned residuals.

The calibration (``perfmodel.calibration``) fits three group factors, so it can only scale
compute, communication and the bubble as a whole. A real cluster is off the model lever by
lever too: this cluster's expert all-to-all is slower than the model's, that kernel pays off
less at this size. ``fit_residuals`` learns that from the campaign's own measurements, on the
log of each measured layout's score over the calibrated prediction (both relative to the
campaign's baseline layout)::

    log(measured_j / predicted_j) ~ sum over the lever values j sets away from the baseline
                                     of effect[lever, value]   (+ noise)

a Bayesian linear model with independent effects, each a priori N(0, ``EFFECT_SD``^2): an
effect nobody measured stays at 0 with its whole prior spread, one measured once moves most of
the way to its residual. ``Residuals.step`` then says what a move from one layout to another
gains by the calibrated model corrected by the learned effects, and how uncertain that is: the
posterior spread of the effects the move changes, plus ``CONTEXT_SD`` for what an additive
model cannot say (a lever's effect depends on the others). Pure; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from perfmodel.calibration import PRIOR_LOG_ERROR, solve

Feature = tuple[str, str]
"""(lever, value as text): one lever set to one value away from the baseline's."""

EFFECT_SD = PRIOR_LOG_ERROR / math.sqrt(2)
"""Prior spread of one lever value's log effect: a one-lever move changes two effects (the
old value's and the new one's), so an unmeasured move is as uncertain as one prediction of the
prior (``PRIOR_LOG_ERROR``, its error on published runs)."""
MEASURE_SD = 0.05
"""Log spread of one measured residual: run noise (about 3%) and the interactions an additive
model leaves out."""
SAME_LEVER_CORRELATION = 0.5
"""Prior correlation of two values' effects of one lever: where the model misprices a
mechanism (the expert all-to-all, the recompute's extra forward), it misprices every value of
that lever in the same direction, by different amounts."""
CONTEXT_SD = 0.04
"""Log spread added to every move: a lever's effect measured beside other levers may differ."""


def features(levers: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[Feature]:
    return sorted((k, repr(v)) for k, v in levers.items() if baseline.get(k) != v)


class Residuals(BaseModel):
    """The posterior of the lever effects (mean and covariance over every lever value)."""

    model_config = ConfigDict(frozen=True)
    baseline: dict[str, Any]
    names: list[Feature] = []
    mean: list[float] = []
    cov: list[list[float]] = []
    measured: int = 0
    """Measured layouts it was fitted on (the baseline's own runs excluded)."""

    def step(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> tuple[float, float]:
        """(mean, sd) of the log correction of a move from ``start`` to ``end`` (what the
        calibrated model's log gain of the move is missing)."""
        delta: dict[Feature, float] = {}
        for f in features(end, self.baseline):
            delta[f] = delta.get(f, 0.0) + 1.0
        for f in features(start, self.baseline):
            delta[f] = delta.get(f, 0.0) - 1.0
        known = [(self.names.index(f), c) for f, c in delta.items() if c and f in self.names]
        unknown = sum(c * c for f, c in delta.items() if f not in self.names)
        mean = sum(self.mean[i] * c for i, c in known)
        var = sum(ci * cj * self.cov[i][j] for i, ci in known for j, cj in known)
        var += unknown * EFFECT_SD**2 + CONTEXT_SD**2
        return mean, math.sqrt(max(var, 0.0))


def _prior(names: list[Feature]) -> list[list[float]]:
    """The effects' prior covariance: EFFECT_SD^2 each, SAME_LEVER_CORRELATION between two
    values of one lever."""
    return [
        [
            EFFECT_SD**2 * (1.0 if f == g else SAME_LEVER_CORRELATION if f[0] == g[0] else 0.0)
            for g in names
        ]
        for f in names
    ]


def _inverse(a: list[list[float]]) -> list[list[float]]:
    n = len(a)
    columns = [solve(a, [1.0 if i == j else 0.0 for i in range(n)]) for j in range(n)]
    return [[columns[j][i] for j in range(n)] for i in range(n)]


def fit_residuals(
    baseline: Mapping[str, Any],
    measured: Sequence[tuple[Mapping[str, Any], float]],
    universe: Iterable[Mapping[str, Any]] = (),
) -> Residuals:
    """The posterior from ``measured``: (a layout's levers, log(measured / predicted) of its
    score relative to the baseline's). ``universe`` (the layouts of the space) names the
    effects that are not measured but correlate with measured ones (another value of a
    measured lever). The baseline itself carries no effect."""
    rows = [(features(levers, baseline), r) for levers, r in measured]
    rows = [(fs, r) for fs, r in rows if fs]
    names = sorted(
        {f for fs, _ in rows for f in fs}
        | {f for levers in universe for f in features(levers, baseline)}
    )
    if not names:
        return Residuals(baseline=dict(baseline))
    n = len(names)
    index = {f: i for i, f in enumerate(names)}
    precision = _inverse(_prior(names))
    weighted = [0.0] * n
    for fs, r in rows:
        for f in fs:
            weighted[index[f]] += r / MEASURE_SD**2
            for g in fs:
                precision[index[f]][index[g]] += 1.0 / MEASURE_SD**2
    cov = _inverse(precision)
    mean = [sum(cov[i][j] * weighted[j] for j in range(n)) for i in range(n)]
    return Residuals(baseline=dict(baseline), names=names, mean=mean, cov=cov, measured=len(rows))


def expected_improvement(gain: float, sd: float, bar: float) -> float:
    """E[max(0, G - bar)] for G ~ N(gain, sd^2): how much a move is expected to clear the bar
    by, counting the chance that it does not (then 0)."""
    if sd <= 0:
        return max(0.0, gain - bar)
    z = (gain - bar) / sd
    pdf = math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1 + math.erf(z / math.sqrt(2)))
    return (gain - bar) * cdf + sd * pdf
