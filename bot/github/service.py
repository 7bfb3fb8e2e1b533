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

from bot.campaign_setup import DEFAULT_STEPS, DEFAULT_WARMUP, build_campaign, open_campaign
from bot.campaign_state import CampaignParams, CampaignState, fold
from bot.forges.github import GitHubForge, PullContext
from bot.github.client import GitHubError, RepoClient, RepoClients, app_slug
from bot.github.commands import Command
from bot.github.executor import ActionsExecutor
from bot.github.permissions import PermissionLost, require_write
from bot.github.repo_config import CONFIG_PATH, read_config
from bot.github.settings import Settings
from bot.interfaces import ForgeError, HeadMoved
from bot.render import replies
from gate.errors import AttuneError
from gate.events import StopReason
from gate.ledger import Ledger
from gate.registry import Registry

log = logging.getLogger("attune.github")

GUARDED = ("gate/", "registry/", ".github/")
"""Paths a tuned or candidate pull request may never change (CODEOWNERS guards them)."""
RESUMABLE: frozenset[StopReason] = frozenset({"requested", "error", "permission"})
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
            return fold(campaign, ledger.events(campaign))

    def _alive(self, repo: str, number: int) -> Running | None:
        with self._lock:
            run = self.running.get((repo, number))
            return run if run is not None and run.alive() else None

    def status_text(self, campaign: str, *, running: bool) -> str:
        return replies.status(self._state(campaign), running=running)

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
        pull = ctx.client.pull(ctx.number)
        screened = ctx.head_sha or pull.head_sha
        files = ctx.client.pull_files(ctx.number)
        guarded = [f.filename for f in files if f.filename.startswith(GUARDED)]
        if guarded:
            return replies.guarded_paths(guarded)
        try:
            config = read_config(ctx.client)  # the default branch's, never this pull request's
        except AttuneError as exc:
            return replies.broken_config(str(exc))
        recipes = [
            f.filename for f in files if config.is_recipe(f.filename) and f.status != "removed"
        ]
        if len(recipes) != 1:
            return replies.not_one_recipe(recipes, config.recipes, CONFIG_PATH)
        path, head = recipes[0], screened
        try:
            text = ctx.client.text(path, head)
        except GitHubError:
            raise
        except ForgeError:
            return replies.is_a_directory(path)
        now = ctx.client.pull(ctx.number).head_sha
        if text is None or now != head or pull.head_sha != head:
            return replies.moved_while_screening(head, now)
        budget = command.budget_hours or self.settings.default_budget
        steps = command.steps or DEFAULT_STEPS
        campaign = campaign_prefix(ctx.repo_name, ctx.number) + str(
            len(self._campaigns(ctx.repo_name, ctx.number)) + 1
        )
        with Ledger(self.settings.ledger_path) as ledger:
            try:
                self._open(ledger, ctx, campaign, path, head, text, command, budget, steps)
            except AttuneError as exc:
                return replies.not_a_recipe(path, head, str(exc))
        self._start_for(ctx, campaign)
        return replies.started(campaign, path, head, budget, steps)

    def _open(
        self,
        ledger: Ledger,
        ctx: PullContext,
        campaign: str,
        path: str,
        head: str,
        text: str,
        command: Command,
        budget: float,
        steps: int,
    ) -> None:
        open_campaign(
            ledger,
            campaign,
            recipe_text=text,
            recipe_path=path,
            budget_hours=budget,
            steps=steps,
            warmup=min(DEFAULT_WARMUP, steps - 1),
            agent=command.agent or "rules",
            origin={
                "repo": ctx.repo_name,
                "pr": ctx.number,
                "head_sha": head,
                "by": ctx.user,
                "installation": ctx.installation_id,
                "comment_id": ctx.comment_id,
            },
        )

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
            if stopped.get("reason") not in RESUMABLE:
                return replies.finished(campaign, str(stopped.get("reason")))
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

    def _actor(self, campaign: str) -> str:
        """Who the campaign acts for: the user who started it, or who last resumed it."""
        actor = ""
        with Ledger(self.settings.ledger_path) as ledger:
            for event in ledger.events(campaign):
                if event.kind in ("campaign_opened", "campaign_resumed"):
                    actor = str(event.payload.get("by") or actor)
        return actor

    def bot_login(self, repo: str) -> str:
        """The App's own login (``<slug>[bot]``): the actor of the runs it dispatches."""
        if self._bot_login is None:
            self._bot_login = f"{app_slug(self.settings, repo)}[bot]"
        return self._bot_login

    def _check_start(self, repo: RepoClient, number: int, campaign: str) -> None:
        """Before a campaign (re)starts: the tuned head is the one it is bound to (screened by
        the command, or moved since only by the campaign's own merges), and whoever it acts
        for may still write."""
        state = self._state(campaign)
        params = state.params
        expected = state.pinned_sha or (params.head_sha if params else None)
        found = repo.pull(number).head_sha
        if expected is not None and found != expected:
            raise HeadMoved(
                f"the head of #{number} moved from {expected[:7]} to {found[:7]} since the "
                "campaign was bound to it; nothing more runs on it"
            )
        require_write(repo, self._actor(campaign), "carry on with the campaign")

    def _run(self, repo_name: str, number: int, installation: int, running: Running) -> None:
        campaign = running.campaign
        repo = self.clients(installation, repo_name)

        def authorize(action: str) -> None:
            require_write(repo, self._actor(campaign), action)

        forge = GitHubForge(repo, number, authorize=authorize)
        try:
            self._check_start(repo, number, campaign)
            with Ledger(self.settings.ledger_path) as ledger:

                def actions(registry: Registry, params: CampaignParams) -> ActionsExecutor:
                    return ActionsExecutor(
                        repo=repo,
                        wake=running.wake,
                        poll_s=self.settings.poll_seconds,
                        authorize=authorize,
                        bot_login=self.bot_login(repo_name),
                        ledger=ledger,
                        campaign=campaign,
                        registry=registry,
                        workdir=self.settings.state_dir / "campaigns" / campaign,
                        budget_device_seconds=params.budget_device_hours * 3600,
                        steps=params.steps,
                        warmup=params.warmup,
                        default_forecast_s=self.settings.forecast_seconds,
                    )

                build_campaign(
                    ledger,
                    campaign,
                    forge=forge,
                    executor=actions,
                    stop_requested=running.stop.is_set,
                ).run()
        except AttuneError as exc:
            reason: StopReason = (
                "head_moved"
                if isinstance(exc, HeadMoved)
                else "permission"
                if isinstance(exc, PermissionLost)
                else "error"
            )
            log.error("campaign %s stopped (%s): %s", campaign, reason, exc)
            with Ledger(self.settings.ledger_path) as ledger:
                if fold(campaign, ledger.events(campaign)).stopped is None:
                    ledger.append(
                        campaign, "campaign_stopped", {"reason": reason, "evidence": [str(exc)]}
                    )
            reply = replies.campaign_stopped(campaign, str(exc), resumable=reason in RESUMABLE)
            repo.comment(number, reply)
        except Exception:
            log.exception("campaign %s crashed", campaign)
