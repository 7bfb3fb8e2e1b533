"""Campaigns on pull requests: one at a time per pull request, each in a thread of its own.

Every campaign lives in the one ledger (``Settings.ledger_path``); the service keeps only which
threads run. A restarted app knows nothing running, and ``/attune resume`` picks a campaign up
from the ledger like ``attune tune --resume`` does.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from bot.campaign.setup import DEFAULT_STEPS, DEFAULT_WARMUP, agent_problem, open_campaign
from bot.forges.github import PullContext
from bot.github.campaign_thread import Running, run_campaign
from bot.github.client import RepoClients, app_slug
from bot.github.commands import Command, over_the_caps
from bot.github.public_text import for_the_pull_request
from bot.github.screening import bound_head, screen_recipe
from bot.github.settings import Settings
from bot.render import replies
from bot.state.fold import campaign_state
from bot.state.model import CampaignState
from gate.errors import AttuneError
from gate.events import RESUMABLE
from gate.ledger import Ledger

log = logging.getLogger("attune.github")


def campaign_prefix(repo: str, number: int) -> str:
    return f"{repo.replace('/', '-')}-pr{number}-"


class GitHubCampaigns:
    """The app's CampaignService."""

    def __init__(self, settings: Settings, clients: RepoClients) -> None:
        self.settings = settings
        self.clients = clients
        self.running: dict[tuple[str, int], Running] = {}
        self._starting: set[tuple[str, int]] = set()
        """Pull requests whose ``/attune tune`` or ``resume`` is being screened right now."""
        self._lock = threading.Lock()
        self._bot_login: str | None = (
            f"{settings.app_slug}[bot]" if settings.app_slug is not None else None
        )
        settings.ledger_path.parent.mkdir(parents=True, exist_ok=True)

    # --- reads ---

    def _campaigns(self, repo: str, number: int) -> list[str]:
        with Ledger(self.settings.ledger_path) as ledger:
            prefix = campaign_prefix(repo, number)
            return [c for c in ledger.campaigns() if c.startswith(prefix)]

    def _state(self, campaign: str) -> CampaignState:
        with Ledger(self.settings.ledger_path) as ledger:
            return campaign_state(ledger, campaign)

    def _alive(self, repo: str, number: int) -> Running | None:
        with self._lock:
            run = self.running.get((repo, number))
            return run if run is not None and run.alive() else None

    def status_text(self, campaign: str, *, running: bool) -> str:
        return replies.status(self._state(campaign), running=running)

    def overview(self) -> list[dict[str, Any]]:
        with Ledger(self.settings.ledger_path) as ledger:
            names = ledger.campaigns()
            states = [campaign_state(ledger, name) for name in names]
        alive = {r.campaign for r in self.running.values() if r.alive()}
        return [
            {
                "campaign": s.campaign,
                "running": s.campaign in alive,
                "tuned_pr": s.tuned_pr,
                "stopped": s.stopped.reason if s.stopped else None,
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
            return replies.NO_CAMPAIGN
        alive = self._alive(ctx.repo_name, ctx.number)
        return self.status_text(names[-1], running=alive is not None)

    def _claim(self, repo: str, number: int) -> bool:
        """Take the pull request for a start (before any slow screening): False when a
        campaign runs there or another command is starting one."""
        with self._lock:
            run = self.running.get((repo, number))
            if (repo, number) in self._starting or (run is not None and run.alive()):
                return False
            self._starting.add((repo, number))
            return True

    def _release(self, repo: str, number: int) -> None:
        with self._lock:
            self._starting.discard((repo, number))

    def tune(self, ctx: PullContext, command: Command) -> str:
        if not self._claim(ctx.repo_name, ctx.number):
            alive = self._alive(ctx.repo_name, ctx.number)
            if alive is None:
                return replies.BEING_STARTED
            return replies.already_running(self.status_text(alive.campaign, running=True))
        try:
            return self._tune(ctx, command)
        finally:
            self._release(ctx.repo_name, ctx.number)

    def _opened_by_comment(self, ctx: PullContext) -> str | None:
        """The campaign this very comment opened already (a command redelivered or retried)."""
        if ctx.comment_id is None:
            return None
        for name in self._campaigns(ctx.repo_name, ctx.number):
            params = self._state(name).params
            if params is not None and params.comment_id == ctx.comment_id:
                return name
        return None

    def _tune(self, ctx: PullContext, command: Command) -> str:
        done = self._opened_by_comment(ctx)
        if done is not None:
            return replies.started_by_this_comment(done)
        capped = over_the_caps(
            command,
            max_budget_hours=self.settings.max_budget_hours,
            max_steps=self.settings.max_steps,
        )
        if capped is not None:
            return capped
        problem = agent_problem(command.agent or "rules")  # agent=claude without its key
        if problem:
            return replies.agent_unavailable(command.agent or "rules", problem)
        refusal = bound_head(ctx, command.sha)
        if refusal is not None:
            return refusal
        screened = screen_recipe(ctx)
        if isinstance(screened, str):
            return screened
        path, head = screened.path, screened.head
        budget = command.budget_hours or self.settings.default_budget
        steps = command.steps or DEFAULT_STEPS
        campaign = campaign_prefix(ctx.repo_name, ctx.number) + str(
            len(self._campaigns(ctx.repo_name, ctx.number)) + 1
        )
        origin = {
            "repo": ctx.repo_name,
            "pr": ctx.number,
            "head_sha": head,
            "by": ctx.user,
            "installation": ctx.installation_id,
            "comment_id": ctx.comment_id,
        }
        with Ledger(self.settings.ledger_path) as ledger:
            try:
                open_campaign(
                    ledger,
                    campaign,
                    recipe_text=screened.text,
                    recipe_path=path,
                    budget_hours=budget,
                    steps=steps,
                    warmup=min(DEFAULT_WARMUP, steps - 1),
                    agent=command.agent or "rules",
                    origin=origin,
                    lessons=command.lessons is not False,
                )
            except AttuneError as exc:
                problem = for_the_pull_request(log, f"{campaign}: {path} refused", exc)
                return replies.not_a_recipe(path, head, problem)
        self._start_for(ctx, campaign)
        return replies.started(campaign, path, head, budget, steps)

    def stop(self, ctx: PullContext) -> str:
        alive = self._alive(ctx.repo_name, ctx.number)
        if alive is None:
            return replies.NOT_RUNNING
        alive.stop.set()
        alive.wake.set()
        return replies.stopping(alive.campaign)

    def resume(self, ctx: PullContext) -> str:
        if not self._claim(ctx.repo_name, ctx.number):
            return replies.ALREADY_RUNNING
        try:
            return self._resume(ctx)
        finally:
            self._release(ctx.repo_name, ctx.number)

    def _resume(self, ctx: PullContext) -> str:
        names = self._campaigns(ctx.repo_name, ctx.number)
        if not names:
            return replies.NOTHING_TO_RESUME
        campaign = names[-1]
        stopped = self._state(campaign).stopped
        if stopped is not None:
            if stopped.reason not in RESUMABLE:
                return replies.finished(campaign, stopped.reason)
            with Ledger(self.settings.ledger_path) as ledger:
                ledger.append(campaign, "campaign_resumed", {"by": ctx.user})
        self._start_for(ctx, campaign)
        return replies.resuming(campaign)

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
            ledger.require_intact("recover its campaigns")
            states = [campaign_state(ledger, name) for name in ledger.campaigns()]
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
        client = self.clients(installation, repo)
        running.thread = threading.Thread(
            target=run_campaign,
            args=(self.settings, client, number, running, lambda: self.bot_login(repo)),
            name=campaign,
            daemon=True,
        )
        with self._lock:
            self.running[(repo, number)] = running
        running.thread.start()

    def bot_login(self, repo: str) -> str:
        """The App's own login (``<slug>[bot]``): the actor of the runs it dispatches."""
        if self._bot_login is None:
            self._bot_login = f"{app_slug(self.settings, repo)}[bot]"
        return self._bot_login
