"""The local executor: a trial's phases on this machine, each written to the ledger before it
acts: ``gate`` (the pre-launch gate), ``admit`` (the ledger's launch checks), ``launch`` (the
benchmark, through a backend) and ``finish`` (its result and charge). The campaign's steps call
them one at a time, so it can stop between any two and a restarted bot can pick up a launch it
did not start (``finish`` with a stored ``Launch``); the post-launch gate is the judgement's
(``bot/campaign/judgement.py``)."""

from __future__ import annotations

from collections.abc import Callable
from hashlib import sha256
from pathlib import Path
from typing import Any

from bot.campaign.launch_paths import located, stored
from bot.campaign.memory_guard import MemoryGuard
from bot.campaign.predictions import StepPredictor
from bot.interfaces import Role
from gate import budget, prelaunch
from gate.budget import LaunchRefusal
from gate.errors import AttuneError, FrameworkRefusal
from gate.events import TrialFinished, TrialStarted
from gate.events_campaign import CampaignOpened
from gate.ledger import Ledger
from gate.models import EffectiveConfig, GateReport, Recipe, TrialResult, canonical_json
from gate.registry import Registry
from runners.adapters import get_adapter
from runners.bench import Launch, collect, resource_refusal, start_bench
from runners.local import Backend, LocalBackend

LIMIT_MARGIN = 3.0
"""A run may take this many times its expected wall-clock (at least ``timeout_s``)."""


class LocalExecutor:
    """Gate and bench trials on this machine, charging ``ledger`` under ``campaign``."""

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
        backend: Backend | None = None,
        authorize: Callable[[str], None] = lambda _action: None,
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
        """Forecast of a trial's device-seconds per device before any trial finished."""
        self.backend: Backend = backend or LocalBackend()
        self.memory = MemoryGuard(ledger, campaign)
        self.predictor = StepPredictor(ledger, campaign, steps=steps)
        """The step-time model, calibrated on the campaign's finished trials."""
        self.budget_limited: dict[str, float] = {}
        """Trials launched with a wall-clock limit cut to the budget left, and that limit."""
        self.authorize = authorize
        """Called before a launch; raises when whoever the campaign acts for may no longer
        start work (GitHub mode: write permission, re-checked before every trial)."""

    def resolve(self, recipe: Recipe) -> EffectiveConfig:
        return get_adapter(recipe.framework, path=recipe.path).resolve(recipe)

    def forecast(self, effective: EffectiveConfig) -> float:
        """Device-seconds a run of ``effective`` costs (``budget.forecast_device_seconds``)."""
        runs, step_s = self.predictor.step_seconds(effective)
        default = self.default_forecast_s * effective.devices
        events = self.ledger.events(self.campaign)
        return budget.forecast_device_seconds(
            events, default=default, devices=effective.devices, step_s=runs, next_step_s=step_s
        )

    def memory_verdict(self, effective: EffectiveConfig) -> tuple[bool, str] | None:
        """Whether the memory model expects ``effective`` to fit the device, and why; None
        without a model or a known capacity."""
        return self.memory.verdict(effective)

    launches_here = True
    """Whether ``backend`` runs the launches; False where a subclass hands them to another
    machine (GitHub mode's self-hosted runner), whose resources this one cannot tell."""

    def machine_refusal(self, effective: EffectiveConfig) -> str | None:
        """Why ``effective`` cannot run on this executor's backend's machine (threads x ranks,
        memory); None when it fits or runs elsewhere."""
        if not self.launches_here:
            return None
        return resource_refusal(effective, self.backend)

    def admit(self, trial: str, effective: EffectiveConfig) -> LaunchRefusal | None:
        """Machine, memory (candidates only), budget and failed-rerun checks; a refusal is
        written to the ledger. A proposal predicted not to fit is refused before it takes an id
        (``candidates.propose``): memory refuses here only a candidate an older bot proposed."""
        fingerprint = effective.fingerprint()
        memory = self.memory_verdict(effective) if self.memory.is_candidate(trial) else None
        too_big = self.machine_refusal(effective)
        if too_big is not None:
            refusal: LaunchRefusal | None = LaunchRefusal(reason="resources", message=too_big)
        elif memory is not None and not memory[0]:
            refusal = LaunchRefusal(reason="predicted_oom", message=memory[1])
        else:
            refusal = budget.check_launch(
                self.ledger.events(self.campaign),
                budget_device_seconds=self.budget_device_seconds,
                fingerprint=fingerprint,
                forecast_device_seconds=self.forecast(effective),
            )
        if refusal is not None:
            self.ledger.append(
                self.campaign,
                "launch_refused",
                {"trial": trial, "fingerprint": fingerprint, **refusal.model_dump()},
            )
        return refusal

    def gate(
        self, trial: str, candidate: Recipe, *, baseline: EffectiveConfig
    ) -> tuple[EffectiveConfig | None, GateReport]:
        """Pre-launch gate, written to the ledger as ``gate_checked``. A candidate the
        framework's own validation refuses has no effective config: it is rejected with an
        ``invalid`` finding (and a fingerprint of its recipe), never an error."""
        effective: EffectiveConfig | None
        try:
            effective = self.resolve(candidate)
        except FrameworkRefusal as exc:
            effective, report = None, prelaunch.refused(exc)
            fingerprint = "refused-" + sha256(canonical_json(candidate.body).encode()).hexdigest()
        else:
            report = prelaunch.judge(baseline, effective, self.registry)
            fingerprint = effective.fingerprint()
        self.ledger.append(
            self.campaign,
            "gate_checked",
            {
                "trial": trial,
                "recipe": candidate.name,
                "fingerprint": fingerprint[:24],
                **report.to_json(),
            },
        )
        return effective, report

    def launch(
        self,
        trial: str,
        role: Role,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        profile: bool = False,
    ) -> Launch:
        """``prediction_made`` and ``trial_started`` first, then the launch, then its handle as
        ``trial_launched``."""
        self.authorize("launch a benchmark")
        self.predictor.record(trial, effective)
        self.record_started(trial, role, recipe, effective, profile=profile)
        # calibration measures the cluster: each baseline run steers clear of the nodes the
        # earlier ones ran on (a backend with one node, or none to choose from, ignores it)
        avoid = self.nodes_used("calibration") if role == "calibration" else None
        launch = start_bench(
            recipe,
            steps=self.steps,
            warmup=self.warmup,
            workdir=self.trial_dir(trial),
            profile=profile,
            timeout_s=self.limit_s(
                trial, effective.devices, expected_s=self.predictor.run_seconds(effective, profile)
            ),
            effective=effective,
            backend=self.backend,
            avoid_nodes=avoid,
        )
        self.record_launched(trial, launch)
        return launch

    def limit_s(self, trial: str, devices: int, *, expected_s: float = 0.0) -> float:
        """The run's wall-clock limit: ``LIMIT_MARGIN`` x ``expected_s`` (at least
        ``timeout_s``: a fixed one killed a 70B recipe's runs), or shorter so that the run cannot
        spend more than the budget has left (killed and charged at the limit, never beyond)."""
        spent = budget.spent_device_seconds(self.ledger.events(self.campaign))
        left_s = (self.budget_device_seconds - spent) / max(devices, 1)
        limit = max(self.timeout_s, LIMIT_MARGIN * expected_s)
        if left_s >= limit:
            return limit
        self.budget_limited[trial] = max(left_s, 1.0)
        return self.budget_limited[trial]

    def nodes_used(self, role: Role) -> list[str]:
        """The nodes the finished runs of ``role`` ran on, oldest first (from the ledger)."""
        kinds = ("trial_started", "trial_finished")
        typed = [e.event for e in self.ledger.events(self.campaign) if e.kind in kinds]
        roles = {t.trial: t.role for t in typed if isinstance(t, TrialStarted)}
        return [
            node
            for t in typed
            if isinstance(t, TrialFinished) and roles.get(t.trial) == role
            for node in t.nodes or []
        ]

    def trial_dir(self, trial: str) -> Path:
        """Where a trial's logs, launch handle and result live."""
        return self.workdir / "trials" / trial

    def record_started(
        self, trial: str, role: Role, recipe: Recipe, effective: EffectiveConfig, *, profile: bool
    ) -> None:
        """``trial_started``: written before anything is launched."""
        self.ledger.append(
            self.campaign,
            "trial_started",
            {
                "trial": trial,
                "role": role,
                "recipe": recipe.name,
                "fingerprint": effective.fingerprint(),
                "devices": effective.devices,
                "forecast_device_seconds": self.forecast(effective),
                "profile": profile,
                "predicted_peak_bytes": getattr(
                    self.memory.predict(effective), "total_bytes", None
                ),
            },
        )

    def record_launched(self, trial: str, launch: Launch) -> None:
        """The launch's handle, beside the run (for a bot killed before the handle reached the
        ledger) and as ``trial_launched``, its paths relative to the campaign directory."""
        kept = stored(launch, self.workdir)
        Path(launch.handle.workdir, "launch.json").write_text(kept.model_dump_json())
        self.ledger.append(
            self.campaign, "trial_launched", {"trial": trial, **kept.model_dump(mode="json")}
        )

    def record_finished(self, trial: str, result: TrialResult, **extra: object) -> None:
        """The result beside the run, and its charge as ``trial_finished``."""
        self.trial_dir(trial).mkdir(parents=True, exist_ok=True)
        (self.trial_dir(trial) / "result.json").write_text(result.model_dump_json(indent=2))
        fields = budget.trial_finished_payload(result)
        fields["profile"] = result.profile.model_dump() if result.profile else None
        self.ledger.append(self.campaign, "trial_finished", {"trial": trial, **fields, **extra})

    def finish(self, trial: str, launch: Launch, *, reconciled: bool = False) -> TrialResult:
        """Wait for the launch (possibly started by an earlier bot), charge it, return it."""
        if launch.handle.backend != self.backend.name:
            raise AttuneError(
                f"trial {trial} was launched on the {launch.handle.backend} backend; this "
                f"campaign runs on {self.backend.name}"
            )
        launch = located(launch, self.workdir)  # stored paths are the campaign dir's
        outcome = self.backend.wait(launch.handle)
        result = collect(launch, outcome)
        limit = self.budget_limited.pop(trial, None)
        if limit is not None and result.status == "timeout":  # the budget ended it, not the recipe
            result.interrupted = True
            result.error = f"stopped at the budget's limit ({limit:.0f} s): {result.error}"
        self.record_finished(trial, result, reconciled=reconciled)
        if not outcome.submitted and not reconciled:  # the cluster is out of reach: stop now
            raise AttuneError(
                f"trial {trial} could not be submitted ({outcome.failure}); it is recorded as "
                "failed and charged nothing; `attune tune --resume` carries on"
            )
        return result


def campaign_executor(
    ledger: Ledger,
    campaign: str,
    workdir: Path,
    *,
    make: Callable[..., LocalExecutor] = LocalExecutor,
    **options: Any,
) -> Callable[[Registry, CampaignOpened], LocalExecutor]:
    """The executor factory ``build_campaign`` takes, for a campaign run on this machine: its
    budget, steps and warm-up from the campaign's parameters; ``options`` (a backend, limits)
    passed on to ``make`` (``LocalExecutor`` or a subclass)."""

    def executor(registry: Registry, params: CampaignOpened) -> LocalExecutor:
        return make(
            ledger=ledger,
            campaign=campaign,
            registry=registry,
            workdir=workdir,
            budget_device_seconds=params.budget_device_hours * 3600,
            steps=params.steps,
            warmup=params.warmup,
            **options,
        )

    return executor
