"""Campaigns on pull requests: one at a time per pull request, each in a thread of its own.

Every campaign lives in the one ledger (``Settings.ledger_path``); the service keeps only which
threads run. A restarted app knows nothing running, and ``/attune resume`` picks a campaign up
from the ledger like ``attune tune --resume`` does.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from github import GithubException

from bot.agents.rules import RulesAgent
from bot.campaign import Campaign
from bot.campaign_state import CampaignState, fold
from bot.forges.github import GitHubForge
from bot.github.app import GithubFactory, PullContext
from bot.github.commands import Command
from bot.github.executor import ActionsExecutor
from bot.github.settings import Settings
from bot.render import noise_line
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.recipe import parse_recipe
from gate.registry import load_registry
from runners.adapter import get_adapter

log = logging.getLogger("attune.github")

RECIPE_SUFFIXES = (".yaml", ".yml")
GUARDED = ("gate/", "registry/", ".github/")
"""Paths a tuned or candidate pull request may never change (CODEOWNERS guards them)."""
DEFAULT_STEPS = 12
DEFAULT_WARMUP = 3
RESUMABLE = frozenset({"requested", "error"})
"""Stop reasons ``/attune resume`` may undo; the others mean the campaign is finished."""


@dataclass
class Running:
    """A campaign thread and the two events it listens to."""

    campaign: str
    wake: threading.Event = field(default_factory=threading.Event)
    """Set by webhooks: a run or check completed, look again now."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set by ``/attune stop``: stop after the current trial."""
    thread: threading.Thread | None = None

    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def campaign_prefix(repo: str, number: int) -> str:
    return f"{repo.replace('/', '-')}-pr{number}-"


class GitHubCampaigns:
    """The app's CampaignService."""

    def __init__(self, settings: Settings, github_for: GithubFactory) -> None:
        self.settings = settings
        self.github_for = github_for
        self.running: dict[tuple[str, int], Running] = {}
        self._lock = threading.Lock()
        settings.ledger_path.parent.mkdir(parents=True, exist_ok=True)

    # --- reads ---

    def _campaigns(self, repo: str, number: int) -> list[str]:
        with Ledger(self.settings.ledger_path) as ledger:
            prefix = campaign_prefix(repo, number)
            return [c for c in ledger.campaigns() if c.startswith(prefix)]

    def _state(self, campaign: str) -> CampaignState:
        with Ledger(self.settings.ledger_path) as ledger:
            return fold(campaign, ledger.events(campaign))

    def _alive(self, repo: str, number: int) -> Running | None:
        with self._lock:
            run = self.running.get((repo, number))
            return run if run is not None and run.alive() else None

    def status_text(self, campaign: str, *, running: bool) -> str:
        state = self._state(campaign)
        params = state.params
        budget = params.budget_device_hours if params else 0.0
        lines = [f"**attune campaign `{campaign}`**: {'running' if running else 'not running'}"]
        if state.stopped:
            lines.append(f"stopped: {state.stopped.get('reason')}")
        lines.append(
            f"{len(state.candidates)} candidate(s), {len(state.trials)} trial(s); "
            f"{state.spent_device_seconds / 3600:.4f} of {budget:.4f} GPU-hours spent"
        )
        if state.noise:
            lines.append(f"noise: {noise_line(state.noise)}")
        if state.noise and state.incumbent_score:
            lines.append(
                f"incumbent: {state.incumbent}, "
                f"{state.incumbent_score / state.noise.mean:.2f}x the baseline"
            )
        return "\n\n".join(lines)

    def overview(self) -> list[dict[str, Any]]:
        with Ledger(self.settings.ledger_path) as ledger:
            names = ledger.campaigns()
            states = [fold(name, ledger.events(name)) for name in names]
        alive = {r.campaign for r in self.running.values() if r.alive()}
        return [
            {
                "campaign": s.campaign,
                "running": s.campaign in alive,
                "tuned_pr": s.tuned_pr,
                "stopped": (s.stopped or {}).get("reason"),
                "candidates": len(s.candidates),
                "trials": len(s.trials),
                "spent_gpu_hours": round(s.spent_device_seconds / 3600, 6),
                "budget_gpu_hours": s.params.budget_device_hours if s.params else None,
            }
            for s in states
        ]

    # --- commands ---

    def status(self, ctx: PullContext) -> str:
        names = self._campaigns(ctx.repo_name, ctx.number)
        if not names:
            return "No attune campaign on this pull request yet: `/attune tune` starts one."
        alive = self._alive(ctx.repo_name, ctx.number)
        return self.status_text(names[-1], running=alive is not None)

    def tune(self, ctx: PullContext, command: Command) -> str:
        alive = self._alive(ctx.repo_name, ctx.number)
        if alive is not None:
            return "A campaign is already running here.\n\n" + self.status_text(
                alive.campaign, running=True
            )
        pull = ctx.repo.get_pull(ctx.number)
        files = list(pull.get_files())
        guarded = [f.filename for f in files if f.filename.startswith(GUARDED)]
        if guarded:
            return (
                "Refused: this pull request changes "
                + ", ".join(f"`{g}`" for g in guarded)
                + ". attune never benchmarks changes to the gate, the registry or the "
                "workflows; they go through CODEOWNERS review on their own."
            )
        recipes = [
            f.filename
            for f in files
            if f.filename.endswith(RECIPE_SUFFIXES) and f.status != "removed"
        ]
        if len(recipes) != 1:
            found = ", ".join(f"`{r}`" for r in recipes) or "none"
            return (
                "`/attune tune` tunes the one recipe a pull request changes; this one changes "
                f"{len(recipes)} recipe file(s) ({found})."
            )
        path, head = recipes[0], pull.head.sha
        content = ctx.repo.get_contents(path, ref=head)
        if isinstance(content, list):
            return f"`{path}` is a directory."
        text = content.decoded_content.decode()
        try:
            recipe = parse_recipe(text, path=path)
            get_adapter(recipe.framework, path=path).resolve(recipe)
        except AttuneError as exc:
            return f"`{path}` at {head[:7]} is not a recipe attune can tune: {exc}"
        budget = command.budget_hours or self.settings.default_budget
        steps = command.steps or DEFAULT_STEPS
        campaign = campaign_prefix(ctx.repo_name, ctx.number) + str(
            len(self._campaigns(ctx.repo_name, ctx.number)) + 1
        )
        with Ledger(self.settings.ledger_path) as ledger:
            ledger.append(
                campaign,
                "campaign_opened",
                {
                    "baseline": recipe.name,
                    "recipe_path": path,
                    "recipe_text": text,
                    "framework": recipe.framework,
                    "budget_device_hours": budget,
                    "steps": steps,
                    "warmup": min(DEFAULT_WARMUP, steps - 1),
                    "agent": command.agent or "rules",
                    "calibration_runs": 5,
                    "max_trials": 20,
                    "repo": ctx.repo_name,
                    "pr": ctx.number,
                    "head_sha": head,
                    "by": ctx.user,
                    "installation": ctx.installation_id,
                },
            )
        self._start_for(ctx, campaign)
        return (
            f"Started campaign `{campaign}` on `{path}` at {head[:7]}: budget {budget:g} "
            f"GPU-hours, {steps} steps per trial. Candidates arrive as pull requests into this "
            "branch; one comment here keeps the trials table, noise model and budget up to date."
        )

    def stop(self, ctx: PullContext) -> str:
        alive = self._alive(ctx.repo_name, ctx.number)
        if alive is None:
            return "No campaign is running on this pull request."
        alive.stop.set()
        alive.wake.set()
        return f"Stopping `{alive.campaign}` after its current trial."

    def resume(self, ctx: PullContext) -> str:
        if self._alive(ctx.repo_name, ctx.number) is not None:
            return "A campaign is already running here: `/attune status` shows it."
        names = self._campaigns(ctx.repo_name, ctx.number)
        if not names:
            return "Nothing to resume: `/attune tune` starts a campaign."
        campaign = names[-1]
        stopped = self._state(campaign).stopped
        if stopped is not None:
            if stopped.get("reason") not in RESUMABLE:
                return (
                    f"`{campaign}` finished ({stopped.get('reason')}); `/attune tune` starts "
                    "a new campaign."
                )
            with Ledger(self.settings.ledger_path) as ledger:
                ledger.append(campaign, "campaign_resumed", {"by": ctx.user})
        self._start_for(ctx, campaign)
        return f"Resuming `{campaign}` from the ledger."

    def wake(self, repo: str) -> None:
        """A run or check finished: wake the campaigns of that repository waiting on one."""
        with self._lock:
            for (name, _), running in self.running.items():
                if name == repo:
                    running.wake.set()

    # --- the campaign threads ---

    def recover(self) -> list[str]:
        """Start again every campaign of the ledger that was running when the app stopped
        (opened by a command, never stopped): a restarted app carries on by itself. Returns
        their names."""
        with Ledger(self.settings.ledger_path) as ledger:
            states = [fold(name, ledger.events(name)) for name in ledger.campaigns()]
        resumed = []
        for state in states:
            params = state.params
            if state.stopped is not None or params is None or params.installation is None:
                continue  # finished, stopped on request, or not a GitHub campaign
            assert params.repo is not None and params.pr is not None
            if self._alive(params.repo, params.pr) is None:
                self._start(params.repo, params.pr, params.installation, state.campaign)
                resumed.append(state.campaign)
        return resumed

    def _start_for(self, ctx: PullContext, campaign: str) -> None:
        self._start(ctx.repo_name, ctx.number, ctx.installation_id, campaign)

    def _start(self, repo: str, number: int, installation: int, campaign: str) -> None:
        running = Running(campaign=campaign)
        running.thread = threading.Thread(
            target=self._run, args=(repo, number, installation, running), name=campaign, daemon=True
        )
        with self._lock:
            self.running[(repo, number)] = running
        running.thread.start()

    def _run(self, repo_name: str, number: int, installation: int, running: Running) -> None:
        campaign = running.campaign
        github = self.github_for(installation)
        repo = github.get_repo(repo_name)
        forge = GitHubForge(repo, number)
        try:
            with Ledger(self.settings.ledger_path) as ledger:
                opened = ledger.events(campaign)[0].payload
                recipe = parse_recipe(str(opened["recipe_text"]), path=str(opened["recipe_path"]))
                effective = get_adapter(recipe.framework).resolve(recipe)
                registry = load_registry(effective.framework, effective.framework_version)
                executor = ActionsExecutor(
                    repo=repo,
                    wake=running.wake,
                    poll_s=self.settings.poll_seconds,
                    ledger=ledger,
                    campaign=campaign,
                    registry=registry,
                    workdir=self.settings.state_dir / "campaigns" / campaign,
                    budget_device_seconds=float(opened["budget_device_hours"]) * 3600,
                    steps=int(opened["steps"]),
                    warmup=int(opened["warmup"]),
                    default_forecast_s=self.settings.forecast_seconds,
                )
                Campaign(
                    name=campaign,
                    ledger=ledger,
                    forge=forge,
                    executor=executor,
                    agent=RulesAgent(),
                    registry=registry,
                    stop_requested=running.stop.is_set,
                ).run()
        except (AttuneError, GithubException) as exc:
            log.error("campaign %s stopped: %s", campaign, exc)
            with Ledger(self.settings.ledger_path) as ledger:
                if fold(campaign, ledger.events(campaign)).stopped is None:
                    stopped = {"reason": "error", "evidence": [str(exc)]}
                    ledger.append(campaign, "campaign_stopped", stopped)
            forge.repo.get_issue(number).create_comment(
                f"attune campaign `{campaign}` stopped: {exc}\n\n`/attune resume` continues it."
            )
        except Exception:
            log.exception("campaign %s crashed", campaign)
