"""The executor of GitHub mode: benchmarks run as ``attune-bench.yml`` on a self-hosted runner.

The gate, the launch checks and the ledger are the local executor's (the same fixed code).
``launch`` dispatches the workflow for the trial's commit; ``finish`` waits for the run (a
``workflow_run`` webhook wakes it, polling is the fallback), downloads the ``attune-result-*``
artifact, validates it as untrusted input and charges the ledger with the result's
allocation/release times, kept within the run's own start and end.
"""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from collections.abc import Callable
from datetime import datetime
from typing import Any

from github.Repository import Repository
from github.WorkflowRun import WorkflowRun
from pydantic import ValidationError

from bot.executor import LocalExecutor
from bot.interfaces import HeadMoved, Role
from gate.budget import LaunchRefusal
from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe, TrialResult
from gate.throughput import tokens_per_second_per_device
from runners.bench import Launch
from runners.local import RunHandle

BENCH_WORKFLOW = "attune-bench.yml"
GATE_WORKFLOW = "attune-gate.yml"
GATE_CHECK = "attune/gate"
"""The check run attune-gate.yml posts on a candidate's head."""
ACTIONS_APP = "github-actions"
"""The app every workflow job's check run belongs to. A check run of the same name posted by
anyone else (another App, a token with checks: write) is not the gate."""
DISPATCH_FILE = "dispatch.json"
"""Beside a trial's run: the ref, commit and actor of the dispatch, written before it is made,
so that only a run with exactly those is adopted (also after a restart)."""
RESULT_FILE = "result.json"
MAX_RESULT_BYTES = 8 * 1024 * 1024
"""A result artifact larger than this (zipped or not) is refused, not read."""
CLOCK_SLACK_S = 120.0
"""How far a result's allocation/release may lie outside its run's start/end (runner clocks)."""


def run_title(campaign: str, trial: str) -> str:
    """The bench run's display title (``run-name`` in attune-bench.yml)."""
    return f"attune-bench {campaign} {trial}"


def _ts(value: datetime | None, default: float) -> float:
    return value.timestamp() if value is not None else default


def read_result(archive: bytes) -> TrialResult:
    """The TrialResult inside a result artifact's zip; AttuneError for anything else."""
    if len(archive) > MAX_RESULT_BYTES:
        raise AttuneError(f"result artifact is {len(archive)} bytes (limit {MAX_RESULT_BYTES})")
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zf:
            info = zf.getinfo(RESULT_FILE)
            if info.file_size > MAX_RESULT_BYTES:
                raise AttuneError(f"{RESULT_FILE} unpacks to {info.file_size} bytes")
            text = zf.read(info)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise AttuneError(f"result artifact is not a zip holding {RESULT_FILE}: {exc}") from None
    try:
        return TrialResult.model_validate_json(text)
    except ValidationError as exc:
        raise AttuneError(f"{RESULT_FILE} is not a TrialResult: {exc.errors()[0]['msg']}") from None


class ActionsExecutor(LocalExecutor):
    """Gate locally, bench through the self-hosted runner workflow."""

    def __init__(
        self,
        *,
        repo: Repository,
        wake: threading.Event,
        poll_s: float,
        bot_login: str,
        authorize: Callable[[str], None] = lambda _action: None,
        run_timeout_s: float = 4 * 3600.0,
        gate_timeout_s: float = 3600.0,
        **local: Any,
    ) -> None:
        super().__init__(**local)
        self.bot_login = bot_login
        """The App's ``<slug>[bot]``: the actor of every run it dispatches."""
        self.authorize = authorize
        """Called before a dispatch; raises when the campaign's user may no longer write."""
        self.gate_timeout_s = gate_timeout_s
        self.repo = repo
        self.wake = wake
        self.poll_s = poll_s
        self.run_timeout_s = run_timeout_s

    def _pins(self, trial: str) -> tuple[tuple[str, str], tuple[str, str] | None]:
        """(tuned branch, its pinned head) when ``trial`` was opened (moved only by the
        campaign's own merges) and, for a candidate, (its branch, its commit)."""
        pinned: tuple[str, str] | None = None
        for event in self.ledger.events(self.campaign):
            p = event.payload
            if event.kind == "forge_ready":
                pinned = (str(p["tuned_branch"]), str(p["base_sha"]))
            elif event.kind == "pr_merged" and pinned is not None:
                pinned = (pinned[0], str(p["sha"]))
            elif event.kind == "pr_opened" and p["trial"] == trial and pinned is not None:
                return pinned, (str(p["branch"]), str(p["head_sha"]))
        if pinned is None:
            raise AttuneError(f"{trial}: no commit to benchmark (forge not ready)")
        return pinned, None

    def _commit_of(self, trial: str) -> tuple[str, str]:
        """The branch and commit a trial benchmarks: its candidate's, else the tuned head."""
        tuned, candidate = self._pins(trial)
        return candidate or tuned

    def pinned_commit(self, trial: str) -> str:
        """The commit to benchmark, after checking its branch still points at it (a push to
        the tuned or candidate branch during the campaign stops it) and, for a candidate, that
        its pull request changes the recipe and nothing else."""
        pr = self._candidate_pr(trial)
        if pr is not None:
            changed = sorted(f.filename for f in self.repo.get_pull(pr).get_files())
            if changed != [self._recipe_path()]:
                raise AttuneError(
                    f"candidate #{pr} changes {', '.join(changed)}: a candidate may change "
                    f"{self._recipe_path()} only; nothing was launched"
                )
        tuned, candidate = self._pins(trial)
        for branch, sha in (tuned, candidate) if candidate else (tuned,):
            found = self.repo.get_git_ref(f"heads/{branch}").object.sha
            if found != sha:
                raise HeadMoved(
                    f"the head of {branch} moved from {sha[:7]} to {found[:7]} during the "
                    "campaign; nothing was launched"
                )
        if candidate is None:
            return tuned[1]
        parents = [p.sha for p in self.repo.get_commit(candidate[1]).parents]
        if parents != [tuned[1]]:
            raise HeadMoved(
                f"candidate {candidate[0]} ({candidate[1][:7]}) is not one commit on the pinned "
                f"{tuned[0]} ({tuned[1][:7]}): its parents are "
                f"{', '.join(p[:7] for p in parents) or 'none'}; nothing was launched"
            )
        return candidate[1]

    def admit(self, trial: str, effective: EffectiveConfig) -> LaunchRefusal | None:
        """The local checks (budget, failed rerun), then, for a candidate, the ``attune/gate``
        check the gate workflow posts on its head: the benchmark is dispatched only after it
        passed."""
        refusal = super().admit(trial, effective)
        if refusal is not None or self._candidate_pr(trial) is None:
            return refusal
        self.pinned_commit(trial)  # a tampered candidate stops here, before any wait
        _branch, sha = self._commit_of(trial)
        conclusion, summary = self._workflow_gate(sha)
        if conclusion == "success":
            return None
        first = next((ln for ln in summary.splitlines() if ln.strip()), conclusion)
        refusal = LaunchRefusal(
            reason="gate_check",
            message=f"the attune/gate check on {sha[:7]} is {conclusion}: {first}",
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
            for run in self.repo.get_commit(sha).get_check_runs(check_name=GATE_CHECK):
                if run.status == "completed" and self._from_gate_workflow(run.app.slug, sha, run):
                    summary = (run.output.summary if run.output else None) or ""
                    return str(run.conclusion), summary
            if time.time() > deadline:
                return (
                    "missing",
                    f"no completed {GATE_CHECK} check within {self.gate_timeout_s:g} s",
                )
            self.wake.wait(self.poll_s)
            self.wake.clear()

    def _from_gate_workflow(self, app: str | None, sha: str, check: Any) -> bool:
        """Whether a check run was posted by GitHub Actions, inside a run of the gate workflow
        on ``sha`` (its check suite is that run's)."""
        if app != ACTIONS_APP:
            return False
        suite = check.check_suite.id
        runs = self.repo.get_workflow(GATE_WORKFLOW).get_runs(head_sha=sha)
        return any(run.check_suite_id == suite for run in runs)

    def _candidate_pr(self, trial: str) -> int | None:
        for event in self.ledger.events(self.campaign):
            if event.kind == "pr_opened" and event.payload["trial"] == trial:
                return int(event.payload["pr"])
        return None

    def _recipe_path(self) -> str:
        opened = self.ledger.events(self.campaign)[0].payload
        return str(opened["recipe_path"])

    def launch(
        self,
        trial: str,
        role: Role,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        profile: bool = False,
    ) -> Launch:
        """``trial_started``, then the workflow dispatch, then ``trial_launched``."""
        self.record_started(trial, role, recipe, effective, profile=profile)
        trial_dir = self.trial_dir(trial)
        trial_dir.mkdir(parents=True, exist_ok=True)
        allocated = time.time()
        if self._find_run(trial, since=allocated - self.run_timeout_s) is None:
            self.authorize("launch a benchmark")
            sha = self.pinned_commit(trial)
            inputs = {
                "campaign": self.campaign,
                "trial": trial,
                "sha": sha,
                "recipe": self._recipe_path(),
                "steps": str(self.steps),
                "warmup": str(self.warmup),
                "profile": "true" if profile else "false",
            }
            ref = self.repo.default_branch
            dispatch = {
                "ref": ref,
                "ref_sha": self.repo.get_git_ref(f"heads/{ref}").object.sha,
                "actor": self.bot_login,
                "sha": sha,
            }
            (trial_dir / DISPATCH_FILE).write_text(json.dumps(dispatch))
            workflow = self.repo.get_workflow(BENCH_WORKFLOW)
            if not workflow.create_dispatch(ref, inputs):
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
        runs = self.repo.get_workflow(BENCH_WORKFLOW).get_runs(event="workflow_dispatch")
        for run in runs:
            if _ts(run.created_at, 0.0) < since - CLOCK_SLACK_S:
                break  # newest first: older runs are not this launch's
            if (
                run.display_title == title
                and run.path.endswith(BENCH_WORKFLOW)
                and run.event == "workflow_dispatch"
                and run.head_branch == dispatched["ref"]
                and run.head_sha == dispatched["ref_sha"]
                and run.actor is not None
                and run.actor.login == dispatched["actor"]
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
        started = _ts(run.run_started_at or run.created_at, launch.handle.allocated_at)
        ended = _ts(run.updated_at, time.time())
        result = self._result(trial, run, launch, started, ended)
        self.record_finished(trial, result, run_id=run.id, reconciled=reconciled)
        return result

    def _result(
        self, trial: str, run: WorkflowRun, launch: Launch, started: float, ended: float
    ) -> TrialResult:
        name = f"attune-result-{trial}"
        artifact = next((a for a in run.get_artifacts() if a.name == name), None)
        problem = None
        if artifact is None:
            problem = f"run {run.id} concluded {run.conclusion} without a {name} artifact"
        else:
            try:
                result = read_result(self._download(artifact.archive_download_url))
                problem = self._untrusted(result, trial, launch)
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

    def _untrusted(self, result: TrialResult, trial: str, launch: Launch) -> str | None:
        """What is wrong with a result artifact, or None. Everything the bot decides on is
        recomputed here from the step records, never taken from the artifact's own summary."""
        sha = (self._dispatched(trial) or {}).get("sha")
        if result.trial != trial or result.sha != sha:
            return (
                f"the result is for trial {result.trial} at {str(result.sha)[:7]}, "
                f"not {trial} at {str(sha)[:7]}"
            )
        if result.fingerprint != launch.fingerprint:
            return f"benchmarked config {result.fingerprint}, not {launch.fingerprint}"
        if result.warmup != launch.warmup:
            return f"the result scores after {result.warmup} warm-up steps, not {launch.warmup}"
        numbers = [s.step for s in result.steps]
        if numbers != list(range(1, len(numbers) + 1)):
            return "its step records are not steps 1, 2, 3, ... in order"
        if result.status == "ok" and len(numbers) != launch.steps:
            return f"it ran {len(numbers)} steps, not the {launch.steps} dispatched"
        if len(numbers) > launch.steps:
            return f"it logged {len(numbers)} steps, more than the {launch.steps} dispatched"
        nonfinite = [s.step for s in result.steps if not s.finite()]
        if result.status == "ok" and nonfinite:
            return f"it claims ok, but step {nonfinite[0]} logged NaN/Inf"
        result.devices = launch.devices
        result.step1_loss = result.steps[0].loss if result.steps else None
        result.has_nonfinite = result.has_nonfinite or bool(nonfinite)
        result.score = None
        if result.status == "ok":
            result.score = tokens_per_second_per_device(
                result.steps, warmup=launch.warmup, devices=launch.devices
            )
        return None

    def _download(self, url: str) -> bytes:
        """The artifact's zip (GitHub redirects to short-lived storage; PyGithub follows)."""
        _status, _headers, chunks = self.repo.requester.getStream(url, chunk_size=64 * 1024)
        data = bytearray()
        for chunk in chunks:
            data += chunk
            if len(data) > MAX_RESULT_BYTES:
                raise AttuneError(f"result artifact exceeds {MAX_RESULT_BYTES} bytes")
        return bytes(data)
