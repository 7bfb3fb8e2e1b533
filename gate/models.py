"""pydantic models at the gate's boundaries: recipes, effective configs, findings, trials."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

KeyClass = Literal["layout", "semantic", "known_bug", "unknown", "invalid"]
"""How the gate classifies a changed key. The registry uses the first four; ``invalid`` is the
gate's own: the framework's validation refused the candidate (``gate.prelaunch.refused``)."""

Verdict = Literal["allow", "reject", "review"]
"""Pre-launch outcome: launch, refuse, or launch but flag for a human."""

TrialStatus = Literal["ok", "failed", "oom", "timeout", "nan", "hang", "comm_timeout", "rank_died"]
"""How a benchmark run ended. ``ok``: every step ran; ``failed``: it crashed; ``nan``: a NaN or
Inf loss or gradient norm; ``timeout``: past its wall-clock limit; ``hang``: no step line for
too long; ``comm_timeout``: a collective timed out (NCCL watchdog); ``rank_died``: one rank
exited and took the job down; ``oom``: out of device or host memory."""


def device_seconds(allocated_at: float, released_at: float, devices: int) -> float:
    """What a run is charged: (release - allocation) x devices, the one formula of spend (a
    run's result and its ledger event, ``gate.budget.charge``, both use it)."""
    return max(0.0, released_at - allocated_at) * devices


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the input of every hash we compute."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class Recipe(BaseModel):
    """A recipe file as written: the framework name and its framework-specific body.

    Each framework adapter validates ``body`` with its own options model.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    framework: str
    """Which adapter resolves and launches it (``embedded``, ``megatron``, ``torchtitan``)."""
    name: str
    """Short human name, used in logs, branch names and reports."""
    path: str
    """Where the recipe was read from, for error messages."""
    body: dict[str, Any]
    """Everything else in the file, validated by the adapter."""


class ValidationWarning(BaseModel):
    """A warning the framework raised while validating a recipe (``warnings.warn``, a logger
    warning, a printed ``WARNING`` line), as its resolve worker collected it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    message: str
    category: str = "UserWarning"
    """The warning's class name (``UserWarning``, ``DeprecationWarning``) or ``logging`` /
    ``printed`` for one that was logged or printed."""
    source: str = "-"
    """``path:line`` (relative to the framework package) of the code that warned, or ``-``."""


class EffectiveConfig(BaseModel):
    """What the framework will really run, after its own validation and derivations."""

    model_config = ConfigDict(extra="forbid")

    framework: str
    """Adapter name."""
    framework_version: str
    """Version of the code that resolved it (validation rules differ across versions)."""
    values: dict[str, Any]
    """Flat key -> value after validation, derived keys included."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment variables the framework reads, as the launch will see them."""
    explicit: list[str] = Field(default_factory=list)
    """Keys the recipe set itself; the others are defaults or derived by validation."""
    devices: int
    """Devices (processes) one run occupies: the unit GPU-hours are charged in."""
    warnings: list[ValidationWarning] = Field(default_factory=list)
    """Warnings the framework's validation raised; not part of what runs (nor the
    fingerprint), but the gate judges the ones a candidate introduces."""

    def flat(self) -> dict[str, Any]:
        """Values and environment in one namespace; environment keys get an ``env.`` prefix."""
        merged = dict(self.values)
        merged.update({f"env.{k}": v for k, v in self.env.items()})
        return merged

    def fingerprint(self) -> str:
        """Stable hash of what would run: equal fingerprints mean an exact rerun."""
        payload = {"framework": self.framework, "config": self.flat()}
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()[:16]


class ConfigChange(BaseModel):
    """One key whose effective value differs between baseline and candidate."""

    key: str
    baseline: Any
    candidate: Any


class Finding(BaseModel):
    """The registry's judgement of one changed key."""

    model_config = ConfigDict(populate_by_name=True)

    key: str
    """Effective-config key (``env.NAME`` for environment variables)."""
    baseline: Any
    """Baseline's effective value (``None`` when absent)."""
    candidate: Any
    """Candidate's effective value (``None`` when absent)."""
    key_class: KeyClass = Field(alias="class")
    """Registry class after conditions were applied."""
    reason: str
    """Why the key has this class."""
    source: str
    """``path:line`` of the code that consumes the key, or ``-`` when unknown."""
    derived: bool = False
    """True when the recipe did not set the key itself: validation changed it as a side effect."""


class GateReport(BaseModel):
    """Pre-launch gate outcome: the verdict and one finding per changed key."""

    verdict: Verdict
    findings: list[Finding]

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape of ``attune gate check --json``."""
        return {
            "verdict": self.verdict,
            "findings": [
                {
                    "key": f.key,
                    "baseline": f.baseline,
                    "candidate": f.candidate,
                    "class": f.key_class,
                    "reason": f.reason,
                    "source": f.source,
                    "derived": f.derived,
                }
                for f in self.findings
            ],
        }


class StepRecord(BaseModel):
    """One training step as the workload logs it (one JSON line)."""

    step: int
    """1-based step number."""
    loss: float | None
    """Mean loss over the global batch (all ranks, all micro-batches); None for a step the
    framework skipped (no update, no loss accumulated)."""
    grad_norm: float | None
    """Global L2 norm of the gradients before clipping; None where the framework logged none
    (a skipped step)."""
    tokens: int
    """Tokens processed by all devices in this step."""
    step_seconds: float
    """Wall time of the step, measured after the last collective of the step."""
    peak_memory_bytes: int
    """Peak memory so far (bytes): resident memory of rank 0 for the embedded workload, the
    largest max-allocated device memory any rank reported for a GPU framework."""
    skipped: bool = False
    """The framework skipped this step's update (fp16 loss-scale overflow): reported, never
    scored."""
    nan_iterations: int = 0
    """Iterations the framework itself counted as NaN in this step."""
    framework_tflops: float | None = None
    """TFLOP/s per device as the framework reports it: a cross-check, never the score."""
    framework_tokens_per_second: float | None = None
    """Tokens/s per device as the framework reports it: a cross-check, never the score."""

    def finite(self) -> bool:
        loss_ok = self.loss is None or math.isfinite(self.loss)
        grad_ok = self.grad_norm is None or math.isfinite(self.grad_norm)
        return loss_ok and grad_ok and self.nan_iterations == 0


class RankBreakdown(BaseModel):
    """One rank's split of its profiled steps (from its own trace); fractions sum to 1."""

    rank: int
    compute: float
    communication: float
    memory_copy: float = 0.0
    cpu: float
    idle: float
    step_seconds: float
    steps: int
    trace_path: str | None = None


class ProfileBreakdown(BaseModel):
    """Where a step's wall time went, from profiler trace events; fractions sum to 1."""

    compute: float
    communication: float
    cpu: float
    """Host-side work outside operators: Python, dispatch, data loading, optimizer glue."""
    idle: float
    step_seconds: float
    """Mean profiled step wall time (s)."""
    steps: int
    """How many profiled steps the fractions average over."""
    trace_path: str | None = None
    memory_copy: float = 0.0
    """GPU traces: device memcpy/memset not overlapped by kernels (0 for CPU traces)."""
    ranks: list[RankBreakdown] | None = None
    """Multi-rank profiles: each rank's own split; the fractions above are their mean."""

    @model_serializer(mode="wrap")
    def _omit_unset_extensions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Payloads of CPU profiles stay as attune 0.1 wrote them (ledger hashes, old readers).
        data: dict[str, Any] = handler(self)
        if self.memory_copy == 0.0:
            data.pop("memory_copy", None)
        if self.ranks is None:
            data.pop("ranks", None)
        return data


class TrialResult(BaseModel):
    """Everything one benchmark run produced; what ``attune bench --out`` writes."""

    recipe: str
    """Recipe name."""
    fingerprint: str
    """Effective-config fingerprint of what ran."""
    status: TrialStatus
    error: str | None = None
    """Last lines of the failure, when status is not ok."""
    steps: list[StepRecord] = Field(default_factory=list)
    warmup: int
    """Leading steps excluded from the score."""
    score: float | None = None
    """Mean tokens per second per device over the scored steps; None unless status is ok."""
    step1_loss: float | None = None
    has_nonfinite: bool = False
    """True when any step logged a NaN or Inf loss or gradient norm."""
    allocated_at: float
    """Unix time the devices were taken."""
    released_at: float
    """Unix time the devices were given back."""
    devices: int
    log_path: str | None = None
    profile: ProfileBreakdown | None = None
    nodes: list[str] | None = None
    """The machines that ran it, when the backend knows (a cluster's node names)."""
    interrupted: bool = False
    """Ended by something other than the recipe (stop, shutdown, a lost node, preemption)."""
    trial: str | None = None
    """The trial id a dispatched bench run was given (``attune bench --trial``), echoed back."""
    sha: str | None = None
    """The commit a dispatched bench run read the recipe from (``attune bench --sha``)."""

    @property
    def device_seconds(self) -> float:
        """Charge of this run, whatever its status (``device_seconds``)."""
        return device_seconds(self.allocated_at, self.released_at, self.devices)


class NoiseModel(BaseModel):
    """Run-to-run noise of the baseline and the promotion threshold derived from it."""

    runs: int
    mean: float
    """Mean score (tokens/s/device)."""
    std: float
    cv: float
    """std / mean."""
    threshold: float
    """Relative gain a candidate must exceed: max(floor, sigmas x cv)."""
