"""A campaign's calibration of the step-time model: the statistical fidelity.

The prior (``predict_step``) is physics and published figures; a campaign measures. ``fit``
takes every finished trial's prior breakdown and its measured step time and fits a few
multiplicative factors, one per *group* of components (``GROUPS``: compute, communication,
pipeline bubble), on log step time::

    log(measured_i) ~ log(sum_g exp(theta_g) * prior_i[g])

by Gauss-Newton with a ridge on each theta_g (a group factor is a priori 1, within a factor of
about e^FACTOR_SD): one trial moves mostly the group that dominates its step, several trials
that differ in their mix separate the groups.

The error band is the model's relative (log) error of one prediction, pooled from the prior's
published error (``PRIOR_LOG_ERROR``, counted as ``PRIOR_WEIGHT`` observations) and the fit's
residuals; it shrinks toward the residuals (run noise and what the groups cannot express) as
trials accumulate. A prediction ``p`` is trusted to ``p * exp(+-band)``.

Out-of-memory runs are not step-time observations: they are censored memory observations of
the memory model's calibration (``gate.memory.calibration_from``), which the campaign applies
as before. Pure: no I/O.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from perfmodel.step import COMPONENTS, StepPrediction

GROUPS: dict[str, tuple[str, ...]] = {
    "compute": ("compute", "optimizer", "other"),
    "communication": ("tp", "cp", "ep", "pp_p2p", "dp"),
    "bubble": ("bubble",),
}
"""The fitted factors and the components each multiplies (every component in one group)."""

PRIOR_LOG_ERROR = 0.15
"""The prior's typical log error on held-out published runs (docs/perf-model.md: median 7.8%,
p90 22.9% absolute error): the band before any trial."""
PRIOR_WEIGHT = 2.0
"""How many measured trials the prior's error counts as in the pooled band."""
FACTOR_SD = 0.5
"""Prior spread of a group's log factor: the ridge keeps unidentified groups at 1."""
NOISE_LOG_SD = 0.03
"""Expected run-to-run log noise of a measurement: the ridge's scale (weight of the prior on a
factor is (NOISE_LOG_SD / FACTOR_SD)^2 per observation's squared error)."""

assert sorted(c for g in GROUPS.values() for c in g) == sorted(COMPONENTS)


class Observation(BaseModel):
    """One finished trial: its prior breakdown (seconds per component) and what it measured."""

    model_config = ConfigDict(frozen=True)
    breakdown: dict[str, float]
    measured_step_s: float


class Calibration(BaseModel):
    """Fitted group factors and the band of a corrected prediction."""

    model_config = ConfigDict(frozen=True)
    factors: dict[str, float] = {g: 1.0 for g in GROUPS}
    """Group -> multiplicative factor (1: the prior)."""
    runs: int = 0
    """Finished trials it was fitted on."""
    band: float = PRIOR_LOG_ERROR
    """One prediction's relative (log) error: trusted to x exp(+-band)."""

    @property
    def component_factors(self) -> dict[str, float]:
        return {c: self.factors.get(g, 1.0) for g, comps in GROUPS.items() for c in comps}

    def apply(self, prediction: StepPrediction) -> StepPrediction:
        """The prediction with its components multiplied by their group's factor."""
        return prediction.corrected(self.component_factors)

    def corrected_step_s(self, breakdown: dict[str, float]) -> float:
        factors = self.component_factors
        return sum(v * factors.get(k, 1.0) for k, v in breakdown.items())


def observation(prediction: StepPrediction, tokens_per_s_per_device: float) -> Observation:
    """A prediction and the measured score of the same run (tokens/s/device) as an observation."""
    step_s = prediction.tokens_per_step / prediction.world / tokens_per_s_per_device
    return Observation(breakdown=dict(prediction.breakdown), measured_step_s=step_s)


def _grouped(breakdown: dict[str, float]) -> list[float]:
    return [sum(breakdown.get(c, 0.0) for c in comps) for comps in GROUPS.values()]


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the ridge keeps ``a`` positive definite)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(col + 1, n):
            f = m[r][col] / m[col][col]
            for c in range(col, n + 1):
                m[r][c] -= f * m[col][c]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][c] * x[c] for c in range(r + 1, n))) / m[r][r]
    return x


def fit(observations: list[Observation], *, iterations: int = 30) -> Calibration:
    """Group factors fitted on log step time over ``observations`` (see the module doc)."""
    rows = [
        (_grouped(o.breakdown), math.log(o.measured_step_s))
        for o in observations
        if o.measured_step_s > 0 and sum(o.breakdown.values()) > 0
    ]
    if not rows:
        return Calibration()
    k = len(GROUPS)
    ridge = (NOISE_LOG_SD / FACTOR_SD) ** 2
    theta = [0.0] * k
    for _ in range(iterations):
        jtj = [[ridge if i == j else 0.0 for j in range(k)] for i in range(k)]
        jtr = [-ridge * t for t in theta]
        for groups, target in rows:
            scaled = [g * math.exp(t) for g, t in zip(groups, theta, strict=True)]
            total = sum(scaled)
            residual = target - math.log(total)
            grad = [s / total for s in scaled]
            for i in range(k):
                jtr[i] += grad[i] * residual
                for j in range(k):
                    jtj[i][j] += grad[i] * grad[j]
        step = solve(jtj, jtr)
        theta = [t + s for t, s in zip(theta, step, strict=True)]
        if max(abs(s) for s in step) < 1e-9:
            break
    residuals = [
        target - math.log(sum(g * math.exp(t) for g, t in zip(groups, theta, strict=True)))
        for groups, target in rows
    ]
    pooled = PRIOR_WEIGHT * PRIOR_LOG_ERROR**2 + sum(r * r for r in residuals)
    band = math.sqrt(pooled / (PRIOR_WEIGHT + len(rows)))
    return Calibration(
        factors={g: math.exp(t) for g, t in zip(GROUPS, theta, strict=True)},
        runs=len(rows),
        band=band,
    )


def expected_band(runs: int, residual: float = NOISE_LOG_SD) -> float:
    """The band after ``runs`` finished runs whose residuals are ``residual`` (the run noise
    when the factors explain the rest): what a plan expects once calibration has run."""
    pooled = PRIOR_WEIGHT * PRIOR_LOG_ERROR**2 + runs * residual**2
    return math.sqrt(pooled / (PRIOR_WEIGHT + runs))


def log_error(predicted: float, measured: float) -> float:
    """Signed relative error of a prediction, as log(predicted / measured)."""
    return math.log(predicted / measured)


def move_fields(
    incumbent: StepPrediction, move: StepPrediction, calibration: Calibration, *, steps: int
) -> dict[str, float | int | None]:
    """What the calibrated model says of a move from ``incumbent`` to ``move`` (both priors):
    the gain in tokens/s/device (percent), the band (percent), the move's tokens/s/device, one
    trial's device-seconds over ``steps`` steps and its predicted peak memory. The names are
    ``bot.interfaces.Probe``'s."""
    after, before = calibration.apply(move), calibration.apply(incumbent)
    gain = after.tokens_per_s_per_device / before.tokens_per_s_per_device - 1
    return {
        "predicted_gain_pct": 100 * gain,
        "band_pct": 100 * math.expm1(calibration.band),
        "predicted_tokens_per_s": after.tokens_per_s_per_device,
        "predicted_trial_device_s": after.step_time_s * after.world * steps,
        "predicted_peak_bytes": move.peak_memory_bytes,
    }
