"""A campaign's thread in GitHub mode: checks, then the campaign, then why it stopped.

Before the campaign (re)starts, its tuned head must be the one it is bound to and whoever it
acts for must still have write permission; a launch or merge checks that again. An error
stops the campaign with its reason in the ledger and a reply on the pull request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.campaign.executor import LocalExecutor
from bot.campaign.setup import build_campaign
from bot.forges.github import GitHubForge
from bot.github.client import RepoClient
from bot.github.executor import ActionsExecutor
from bot.github.permissions import PermissionLost, require_write
from bot.github.public_text import for_the_pull_request
from bot.github.settings import Settings
from bot.interfaces import HeadMoved
from bot.render import replies
from bot.state.fold import campaign_state
from bot.state.model import CampaignParams, CampaignState
from gate.errors import AttuneError
from gate.events import RESUMABLE, StopReason
from gate.ledger import Ledger
from gate.registry import Registry
from runners.backends import make_backend

log = logging.getLogger("attune.github")


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


def _state(settings: Settings, campaign: str) -> CampaignState:
    with Ledger(settings.ledger_path) as ledger:
        return campaign_state(ledger, campaign)


def check_start(repo: RepoClient, number: int, state: CampaignState) -> None:
    """Before a campaign (re)starts: the tuned head is the one it is bound to (screened by
    the command, or moved since only by the campaign's own merges), and whoever it acts for
    may still write."""
    params = state.params
    expected = state.pinned_sha or (params.head_sha if params else None)
    found = repo.pull(number).head_sha
    if expected is not None and found != expected:
        raise HeadMoved(
            f"the head of #{number} moved from {expected[:7]} to {found[:7]} since the "
            "campaign was bound to it; nothing more runs on it"
        )
    require_write(repo, state.acting_for or "", "carry on with the campaign")


def make_executor(
    settings: Settings,
    *,
    repo: RepoClient,
    running: Running,
    authorize: Callable[[str], None],
    bot_login: Callable[[], str],
    ledger: Ledger,
    campaign: str,
    registry: Registry,
    params: CampaignParams,
) -> LocalExecutor:
    """Where the campaign's trials run: Slurm jobs the bot submits itself when its settings
    name a cluster, else the bench workflow on a self-hosted runner. Never the simulated
    cluster: a pull request is told measurements only."""
    if params.backend == "sim" or params.simulation is not None:
        raise AttuneError("GitHub mode runs no simulated campaign (--backend sim is local only)")
    common: dict[str, Any] = {
        "ledger": ledger,
        "campaign": campaign,
        "registry": registry,
        "workdir": settings.state_dir / "campaigns" / campaign,
        "budget_device_seconds": params.budget_device_hours * 3600,
        "steps": params.steps,
        "warmup": params.warmup,
        "default_forecast_s": settings.forecast_seconds,
    }
    if settings.slurm_url:
        backend = make_backend("slurm", should_stop=running.stop.is_set)
        # the bot submits the jobs itself: what runs is the recipe text in its own ledger
        return LocalExecutor(authorize=authorize, backend=backend, **common)
    return ActionsExecutor(
        repo=repo,
        wake=running.wake,
        poll_s=settings.poll_seconds,
        authorize=authorize,
        bot_login=bot_login(),
        **common,
    )


def run_campaign(
    settings: Settings,
    repo: RepoClient,
    number: int,
    running: Running,
    bot_login: Callable[[], str],
) -> None:
    """The thread's body: the campaign on pull request ``number`` until it stops."""
    campaign = running.campaign

    def authorize(action: str) -> None:
        require_write(repo, _state(settings, campaign).acting_for or "", action)

    forge = GitHubForge(repo, number, authorize=authorize)
    try:
        check_start(repo, number, _state(settings, campaign))
        with Ledger(settings.ledger_path) as ledger:

            def executor(registry: Registry, params: CampaignParams) -> LocalExecutor:
                return make_executor(
                    settings,
                    repo=repo,
                    running=running,
                    authorize=authorize,
                    bot_login=bot_login,
                    ledger=ledger,
                    campaign=campaign,
                    registry=registry,
                    params=params,
                )

            build_campaign(
                ledger, campaign, forge=forge, executor=executor, stop_requested=running.stop.is_set
            ).run()
    except Exception as exc:
        if not isinstance(exc, AttuneError):  # a bug: its traceback goes to the log
            log.exception("campaign %s crashed", campaign)
        try:
            _stopped(settings, repo, number, campaign, exc)
        except Exception:  # the ledger or GitHub failing too: the log is all that is left
            log.exception("campaign %s: its stop could not be recorded or posted", campaign)


def _stopped(
    settings: Settings, repo: RepoClient, number: int, campaign: str, exc: Exception
) -> None:
    """A campaign thread that ended on an error: an ``error`` (or ``head_moved``,
    ``permission``) stop in the ledger unless it already stopped, and a reply on the pull
    request, so a crash is never silent."""
    reason: StopReason = (
        "head_moved"
        if isinstance(exc, HeadMoved)
        else "permission"
        if isinstance(exc, PermissionLost)
        else "error"
    )
    with Ledger(settings.ledger_path) as ledger:
        if campaign_state(ledger, campaign).stopped is None:
            ledger.append(campaign, "campaign_stopped", {"reason": reason, "evidence": [str(exc)]})
    # the pull request gets a short line; the bot's log, the whole error (stderr, URLs)
    problem = for_the_pull_request(log, f"campaign {campaign} stopped ({reason})", exc)
    reply = replies.campaign_stopped(campaign, problem, resumable=reason in RESUMABLE)
    repo.comment(number, reply)
