"""The executor of GitHub mode: benchmarks run as ``attune-bench.yml`` on a self-hosted runner.

The gate, the launch checks and the ledger are the local executor's (the same fixed code).
``launch`` dispatches the workflow for the trial's commit; ``finish`` waits for the run (a
``workflow_run`` webhook wakes it, polling is the fallback), downloads the ``attune-result-*``
artifact, validates it as untrusted input and charges the ledger with the result's
allocation/release times, kept within the run's own start and end, and never less than the
time the run's jobs held the runner (the Actions jobs API: GitHub's clock, not the artifact's).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from typing import Any

from bot.campaign.executor import LocalExecutor
from bot.checks import GATE_CHECK
from bot.github.client import RepoClient
from bot.github.pins import Pins, pins_of, verify_pins
from bot.github.records import CheckRun, WorkflowRun
from bot.github.results import MAX_RESULT_BYTES, check_result, read_result
from bot.interfaces import Role
from bot.state.fold import campaign_state
from gate.budget import LaunchRefusal
from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe, TrialResult
from runners.bench import Launch
from runners.local import RunHandle

BENCH_WORKFLOW = "attune-bench.yml"
GATE_WORKFLOW = "attune-gate.yml"
ACTIONS_APP = "github-actions"
"""The app every workflow job's check run belongs to. A check run of the same name posted by
anyone else (another App, a token with checks: write) is not the gate."""
DISPATCH_FILE = "dispatch.json"
"""Beside a trial's run: the ref, commit and actor of the dispatch, written before it is made,
so that only a run with exactly those is adopted (also after a restart)."""
CLOCK_SLACK_S = 120.0
"""How far a result's allocation/release may lie outside its run's start/end (runner clocks)."""


def run_title(campaign: str, trial: str) -> str:
    """The bench run's display title (``run-name`` in attune-bench.yml)."""
    return f"attune-bench {campaign} {trial}"


def _ts(value: datetime | None, default: float) -> float:
    return value.timestamp() if value is not None else default


class ActionsExecutor(LocalExecutor):
    """Gate locally, bench through the self-hosted runner workflow."""

    launches_here = False  # the runner's resources are checked by its own `attune bench`

    def __init__(
        self,
        *,
        repo: RepoClient,
        wake: threading.Event,
        poll_s: float,
        bot_login: str,
        run_timeout_s: float = 4 * 3600.0,
        gate_timeout_s: float = 3600.0,
        **local: Any,
    ) -> None:
        super().__init__(**local)
        self.bot_login = bot_login
        """The App's ``<slug>[bot]``: the actor of every run it dispatches."""
        self.gate_timeout_s = gate_timeout_s
        self.repo = repo
        self.wake = wake
        self.poll_s = poll_s
        self.run_timeout_s = run_timeout_s

    def _pins(self, trial: str) -> Pins:
        return pins_of(campaign_state(self.ledger, self.campaign), trial)

    def pinned_commit(self, trial: str) -> str:
        """The commit to benchmark, checked against GitHub (``pins.verify_pins``)."""
        return verify_pins(self.repo, self._pins(trial))

    def admit(self, trial: str, effective: EffectiveConfig) -> LaunchRefusal | None:
        """The local checks (budget, failed rerun), then, for a candidate, the ``attune/gate``
        check the gate workflow posts on its head: the benchmark is dispatched only after it
        passed."""
        refusal = super().admit(trial, effective)
        if refusal is not None or self._pins(trial).pr is None:
            return refusal
        sha = self.pinned_commit(trial)  # a tampered candidate stops here, before any wait
        conclusion, summary = self._workflow_gate(sha)
        if conclusion == "success":
            return None
        first = next((ln for ln in summary.splitlines() if ln.strip()), conclusion)
        refusal = LaunchRefusal(
            reason="gate_check",
            message=f"the {GATE_CHECK} check on {sha[:7]} is {conclusion}: {first}",
        )
        self.ledger.append(
            self.campaign,
            "launch_refused",
            {"trial": trial, "fingerprint": effective.fingerprint(), **refusal.model_dump()},
        )
        return refusal

    def _workflow_gate(self, sha: str) -> tuple[str, str]:
        """Conclusion and summary of the completed ``attune/gate`` check run on ``sha``."""
        deadline = time.time() + self.gate_timeout_s
        while True:
            for run in self.repo.check_runs(sha, GATE_CHECK):
                if run.status == "completed" and self._from_gate_workflow(run, sha):
                    return str(run.conclusion), run.summary
            if time.time() > deadline:
                return (
                    "missing",
                    f"no completed {GATE_CHECK} check within {self.gate_timeout_s:g} s",
                )
            self.wake.wait(self.poll_s)
            self.wake.clear()

    def _from_gate_workflow(self, check: CheckRun, sha: str) -> bool:
        """Whether a check run was posted by GitHub Actions, inside a run of the gate workflow
        on ``sha`` (its check suite is that run's)."""
        if check.app_slug != ACTIONS_APP:
            return False
        runs = self.repo.workflow_runs(GATE_WORKFLOW, head_sha=sha)
        return any(run.check_suite_id == check.check_suite_id for run in runs)

    def launch(
        self,
        trial: str,
        role: Role,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        profile: bool = False,
    ) -> Launch:
        """``prediction_made`` and ``trial_started``, then the workflow dispatch, then
        ``trial_launched``."""
        self.predictor.record(trial, effective)
        self.record_started(trial, role, recipe, effective, profile=profile)
        trial_dir = self.trial_dir(trial)
        trial_dir.mkdir(parents=True, exist_ok=True)
        allocated = time.time()
        if self._find_run(trial, since=allocated - self.run_timeout_s) is None:
            self.authorize("launch a benchmark")
            pins = self._pins(trial)
            sha = verify_pins(self.repo, pins)
            inputs = {
                "campaign": self.campaign,
                "trial": trial,
                "sha": sha,
                "recipe": pins.recipe_path,
                "steps": str(self.steps),
                "warmup": str(self.warmup),
                "profile": "true" if profile else "false",
            }
            ref = self.repo.default_branch
            dispatch = {
                "ref": ref,
                "ref_sha": self.repo.branch_sha(ref),
                "actor": self.bot_login,
                "sha": sha,
            }
            (trial_dir / DISPATCH_FILE).write_text(json.dumps(dispatch))
            if not self.repo.dispatch(BENCH_WORKFLOW, ref, inputs):
                raise AttuneError(f"{trial}: GitHub refused to dispatch {BENCH_WORKFLOW}")
        launch = Launch(
            recipe=recipe.name,
            framework=effective.framework,
            fingerprint=effective.fingerprint(),
            steps=self.steps,
            warmup=self.warmup,
            devices=effective.devices,
            profile_trace=None,
            handle=RunHandle(
                backend="github-actions", pid=0, workdir=str(trial_dir), allocated_at=allocated
            ),
        )
        self.record_launched(trial, launch)
        return launch

    def _dispatched(self, trial: str) -> dict[str, str] | None:
        path = self.trial_dir(trial) / DISPATCH_FILE
        return dict(json.loads(path.read_text())) if path.is_file() else None

    def _find_run(self, trial: str, *, since: float) -> WorkflowRun | None:
        """The bench run this trial dispatched: its title, and exactly the event, branch,
        commit and actor of the dispatch (a run someone else started with the same title,
        or one on another ref, is never adopted)."""
        dispatched = self._dispatched(trial)
        if dispatched is None:
            return None  # nothing was dispatched for this trial
        title = run_title(self.campaign, trial)
        for run in self.repo.workflow_runs(BENCH_WORKFLOW, event="workflow_dispatch"):
            if _ts(run.created_at, 0.0) < since - CLOCK_SLACK_S:
                break  # newest first: older runs are not this launch's
            if (
                run.display_title == title
                and run.path.endswith(BENCH_WORKFLOW)
                and run.event == "workflow_dispatch"
                and run.head_branch == dispatched["ref"]
                and run.head_sha == dispatched["ref_sha"]
                and run.actor == dispatched["actor"]
            ):
                return run
        return None

    def _wait(self, trial: str, launch: Launch) -> WorkflowRun:
        deadline = launch.handle.allocated_at + self.run_timeout_s
        while True:
            run = self._find_run(trial, since=launch.handle.allocated_at)
            if run is not None and run.status == "completed":
                return run
            if time.time() > deadline:
                raise AttuneError(f"{trial}: no completed {BENCH_WORKFLOW} run in time")
            self.wake.wait(self.poll_s)
            self.wake.clear()

    def finish(self, trial: str, launch: Launch, *, reconciled: bool = False) -> TrialResult:
        """Wait for the run, read its result artifact, charge it, return it."""
        run = self._wait(trial, launch)
        started = _ts(run.started_at or run.created_at, launch.handle.allocated_at)
        ended = _ts(run.updated_at, time.time())
        result = self._result(trial, run, launch, started, ended)
        self.record_finished(trial, result, run_id=run.id, reconciled=reconciled)
        return result

    def _result(
        self, trial: str, run: WorkflowRun, launch: Launch, started: float, ended: float
    ) -> TrialResult:
        """The run's result, charged at least the time its jobs held the runner."""
        result = self._read_result(trial, run, launch, started, ended)
        held = self.repo.job_seconds(run.id)
        if result.released_at - result.allocated_at < held:
            result.released_at = result.allocated_at + held  # the artifact claims less
        return result

    def _read_result(
        self, trial: str, run: WorkflowRun, launch: Launch, started: float, ended: float
    ) -> TrialResult:
        name = f"attune-result-{trial}"
        url = self.repo.artifact_urls(run.id).get(name)
        problem = None
        if url is None:
            problem = f"run {run.id} concluded {run.conclusion} without a {name} artifact"
        else:
            try:
                result = read_result(self.repo.download(url, limit=MAX_RESULT_BYTES))
                sha = (self._dispatched(trial) or {}).get("sha")
                problem = check_result(result, trial, sha, launch)
            except Exception as exc:  # untrusted bytes: whatever breaks, the trial failed
                text = str(exc) if isinstance(exc, AttuneError) else f"{type(exc).__name__}: {exc}"
                problem = f"run {run.id}: {text}"
            else:
                if problem is not None:
                    problem = f"run {run.id}: {problem}"
                else:
                    low, high = started - CLOCK_SLACK_S, ended + CLOCK_SLACK_S
                    result.allocated_at = min(max(result.allocated_at, low), high)
                    result.released_at = min(max(result.released_at, result.allocated_at), high)
                    result.devices = launch.devices
                    return result
        return TrialResult(
            recipe=launch.recipe,
            fingerprint=launch.fingerprint,
            status="failed",
            error=problem,
            warmup=launch.warmup,
            allocated_at=started,
            released_at=max(ended, started),
            devices=launch.devices,
        )
