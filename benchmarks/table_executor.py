"""An executor whose runs are served from the machine's measured table (``OptimumTable``).

The tuner benchmark runs many campaigns of each agent at equal budget; on a shared 2-core
machine running each of their trials live would take hours and measure mostly the other
users. So the campaigns run through everything real (ledger, local forge, pre-launch gate,
budget and failed-rerun checks, noise calibration, post-launch gate, judgement, agents) and
only the benchmark run itself is replayed: a layout's score is its median measured score
times a seeded log-normal draw of the measured run-to-run noise, and its charge is its measured
device-seconds, on a simulated clock. A layout the table lacks (a profile run the sweep never
did, a layout outside the swept space) is measured live, once, and added to the table.

``--live`` in ``benchmarks/tuner.py`` uses the real ``LocalExecutor`` instead.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any, cast

from benchmarks.optimum_table import Measurement, OptimumTable
from bot.agents.levers.layout_space import Layout, layout_of
from bot.campaign.executor import LocalExecutor
from bot.interfaces import Role
from gate.models import EffectiveConfig, Recipe, StepRecord, TrialResult, TrialStatus
from gate.throughput import tokens_per_second_per_device
from runners.bench import Launch
from runners.local import RunHandle

LiveRun = Callable[[Layout, bool], Measurement]
"""(layout, profile) -> one real run of it: what the table lacks is measured live."""


class TableExecutor(LocalExecutor):
    """``LocalExecutor`` with the launch replayed from the table (see the module's text)."""

    def __init__(
        self,
        *,
        table: OptimumTable,
        noise_cv: float,
        seed: str,
        live: LiveRun,
        on_change: Callable[[OptimumTable], Any] = lambda _table: None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.noise_cv = noise_cv
        self.seed = seed
        self.live = live
        self.on_change = on_change
        self.clock = 1_800_000_000.0
        """Simulated unix time: each run advances it by its duration."""
        self.layouts: dict[str, tuple[Layout, bool]] = {}
        self.estimated: list[str] = []
        """Trials whose layout was estimated (compile=true from its twin), not measured."""

    def launch(
        self,
        trial: str,
        role: Role,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        profile: bool = False,
    ) -> Launch:
        self.authorize("launch a benchmark")
        self.record_started(trial, role, recipe, effective, profile=profile)
        self.trial_dir(trial).mkdir(parents=True, exist_ok=True)
        self.layouts[trial] = (layout_of(effective.values), profile)
        launch = Launch(
            recipe=recipe.name,
            framework=recipe.framework,
            fingerprint=effective.fingerprint(),
            steps=self.steps,
            warmup=self.warmup,
            devices=effective.devices,
            profile_trace=None,
            handle=RunHandle(
                backend="table", pid=0, workdir=str(self.trial_dir(trial)), allocated_at=self.clock
            ),
        )
        self.record_launched(trial, launch)
        return launch

    def measurement(self, layout: Layout, profile: bool) -> tuple[Measurement, bool]:
        """The table's entry for ``layout`` (measured live when missing) and whether it is an
        estimate."""
        found = self.table.lookup(layout)
        if found is None or (profile and found[0].profile is None):
            one = self.live(layout, profile)
            entry = self.table.get(layout) or one
            if entry is not one and one.ok:
                entry.profile, entry.profile_seconds = one.profile, one.profile_seconds
            self.table.put(entry)
            self.on_change(self.table)
            return entry, False
        return found

    def reference_steps(self) -> list[StepRecord]:
        """The step records every replayed run reports (a layout-only change keeps the losses
        and gradient norms; the post-launch checks read them): the baseline layout's first
        run's, measured live once when the table has none."""
        entry = self.table.get(self.table.baseline)
        if entry is None or not entry.steps:
            one = self.live(self.table.baseline, False)
            if entry is None:
                entry = one
            entry.steps = one.steps
            self.table.put(entry)
            self.on_change(self.table)
        return entry.steps

    def finish(self, trial: str, launch: Launch, *, reconciled: bool = False) -> TrialResult:
        layout, profile = self.layouts[trial]
        entry, estimated = self.measurement(layout, profile)
        if estimated:
            self.estimated.append(trial)
        draw = random.Random(f"{self.seed}:{trial}").gauss(0.0, 1.0)
        seconds = (entry.profile_seconds or entry.seconds) if profile else entry.seconds
        start, self.clock = self.clock, self.clock + seconds / launch.devices
        score = entry.score * noise_factor(self.noise_cv, draw) if entry.score else None
        steps = retimed(self.reference_steps(), score, launch) if score else []
        result = TrialResult(
            recipe=launch.recipe,
            fingerprint=launch.fingerprint,
            status=cast(TrialStatus, entry.status),
            error=entry.error,
            steps=steps,
            warmup=launch.warmup,
            score=score_of(steps, launch) if steps else score,
            step1_loss=entry.step1_loss,
            allocated_at=start,
            released_at=self.clock,
            devices=launch.devices,
            profile=entry.profile if profile else None,
        )
        self.record_finished(trial, result, reconciled=reconciled)
        return result


def retimed(steps: list[StepRecord], score: float, launch: Launch) -> list[StepRecord]:
    """``steps`` with each step's time set so that the run scores ``score`` tokens/s/device
    (warm-up steps twice as slow as the scored ones, as a first step of allocation is)."""
    rate = score * launch.devices
    out = []
    for record in steps[: launch.steps]:
        seconds = record.tokens / rate * (2.0 if record.step <= launch.warmup else 1.0)
        out.append(record.model_copy(update={"step_seconds": seconds}))
    return out


def score_of(steps: list[StepRecord], launch: Launch) -> float | None:
    """The score the harness computes from ``steps`` (None when none is scored)."""
    try:
        return tokens_per_second_per_device(steps, warmup=launch.warmup, devices=launch.devices)
    except ValueError:
        return None


def noise_factor(cv: float, z: float) -> float:
    """A log-normal factor of mean 1 and coefficient of variation ``cv`` for the standard
    normal draw ``z``: always positive, however large the noise."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return math.exp(sigma * z - sigma * sigma / 2)
