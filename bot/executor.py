"""Run one candidate through the pre-launch gate, the ledger's launch checks, the benchmark and
the post-launch gate, writing each transition to the ledger before acting on it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from gate import budget, postlaunch, prelaunch
from gate.budget import LaunchRefusal
from gate.ledger import Ledger
from gate.models import EffectiveConfig, GateReport, Recipe, TrialResult
from gate.postlaunch import PostLaunchReport
from gate.registry import Registry
from runners.adapter import get_adapter
from runners.bench import run_bench


class TrialOutcome(BaseModel):
    """Everything that happened to one candidate."""

    trial: str
    recipe: str
    effective: EffectiveConfig
    gate: GateReport
    refusal: LaunchRefusal | None = None
    result: TrialResult | None = None
    post: PostLaunchReport | None = None

    @property
    def launched(self) -> bool:
        return self.result is not None


class LocalExecutor:
    """Gate and bench candidates on this machine, charging ``ledger`` under ``campaign``."""

    def __init__(
        self,
        *,
        ledger: Ledger,
        campaign: str,
        registry: Registry,
        workdir: Path,
        budget_device_seconds: float,
        steps: int,
        warmup: int,
        timeout_s: float = 600.0,
        default_forecast_s: float = 60.0,
    ) -> None:
        self.ledger = ledger
        self.campaign = campaign
        self.registry = registry
        self.workdir = workdir
        self.budget_device_seconds = budget_device_seconds
        self.steps = steps
        self.warmup = warmup
        self.timeout_s = timeout_s
        self.default_forecast_s = default_forecast_s
        """Forecast of a trial's device-seconds before any trial of the campaign finished."""

    def run(
        self,
        trial: str,
        candidate: Recipe,
        *,
        baseline: EffectiveConfig,
        baseline_step1_loss: float | None,
    ) -> TrialOutcome:
        effective = get_adapter(candidate.framework, path=candidate.path).resolve(candidate)
        report = prelaunch.judge(baseline, effective, self.registry)
        fingerprint = effective.fingerprint()
        self.ledger.append(
            self.campaign,
            "gate_checked",
            {
                "trial": trial,
                "recipe": candidate.name,
                "fingerprint": fingerprint,
                **report.to_json(),
            },
        )
        outcome = TrialOutcome(trial=trial, recipe=candidate.name, effective=effective, gate=report)
        if report.verdict == "reject":
            return outcome

        events = self.ledger.events(self.campaign)
        forecast = budget.forecast_device_seconds(
            events, default=self.default_forecast_s * effective.devices
        )
        refusal = budget.check_launch(
            events,
            budget_device_seconds=self.budget_device_seconds,
            fingerprint=fingerprint,
            forecast_device_seconds=forecast,
        )
        if refusal is not None:
            self.ledger.append(
                self.campaign,
                "launch_refused",
                {"trial": trial, "fingerprint": fingerprint, **refusal.model_dump()},
            )
            outcome.refusal = refusal
            return outcome

        self.ledger.append(
            self.campaign,
            "trial_started",
            {
                "trial": trial,
                "recipe": candidate.name,
                "fingerprint": fingerprint,
                "devices": effective.devices,
                "forecast_device_seconds": forecast,
            },
        )
        trial_dir = self.workdir / "trials" / trial
        result = run_bench(
            candidate,
            steps=self.steps,
            warmup=self.warmup,
            workdir=trial_dir,
            timeout_s=self.timeout_s,
            effective=effective,
        )
        (trial_dir / "result.json").write_text(result.model_dump_json(indent=2))
        self.ledger.append(
            self.campaign,
            "trial_finished",
            {"trial": trial, **budget.trial_finished_payload(result)},
        )
        outcome.result = result
        if baseline_step1_loss is not None:
            outcome.post = postlaunch.check(result, baseline_step1_loss=baseline_step1_loss)
        return outcome
