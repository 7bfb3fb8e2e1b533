"""Carrying out queued commands: one handler per verb, behind one screening of who may start
or stop work. Workers drain the inbox; each command gets an ``eyes`` reaction and one reply."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from bot.forges.github import PullContext
from bot.github.client import GitHubError, RepoClients
from bot.github.commands import USAGE, Command, CommandError, Verb, parse
from bot.github.inbox import Inbox, QueuedCommand
from bot.github.payloads import CommentEvent
from bot.github.permissions import may_write
from bot.render import replies

log = logging.getLogger("attune.github")


class CampaignService(Protocol):
    """What the app asks of campaigns; every method returns the reply to post."""

    def tune(self, ctx: PullContext, command: Command) -> str: ...
    def status(self, ctx: PullContext) -> str: ...
    def stop(self, ctx: PullContext) -> str: ...
    def resume(self, ctx: PullContext) -> str: ...
    def overview(self) -> list[dict[str, Any]]: ...
    def recover(self) -> list[str]:
        """Start again the campaigns that were running when the app stopped."""

    def wake(self, repo: str) -> None:
        """A workflow run or check run of ``repo`` completed: waiting campaigns look again."""


QUIET_WAIT_S = 1.0
"""How long a worker lets requests in flight go first before it starts a command anyway."""


class CommandWorkers:
    """Threads that drain the inbox: each command is handled, then marked done.

    Acknowledging comes first: a worker starts its next command once no request is in flight
    (``busy``), or after QUIET_WAIT_S at most. Its GitHub calls are Python that holds the
    interpreter's lock, and a burst of deliveries would otherwise wait on them for their 202.
    """

    def __init__(
        self,
        inbox: Inbox,
        handle: Callable[[QueuedCommand], None],
        count: int,
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self.inbox, self.handle, self.count, self.busy = inbox, handle, count, busy
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for n in range(self.count):
            thread = threading.Thread(target=self._loop, name=f"attune-commands-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        self.inbox.ready.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def _after_the_acks(self) -> None:
        deadline = time.monotonic() + QUIET_WAIT_S
        while self.busy() and time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.005)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._after_the_acks()
            item = self.inbox.take()
            if item is None:
                self.inbox.ready.wait(1.0)
                continue
            _guarded(functools.partial(self.handle, item), item.delivery)
            self.inbox.done(item.seq)


class CommandHandler:
    """What a queued comment command does: eyes, then the one reply."""

    def __init__(self, campaigns: CampaignService, clients: RepoClients) -> None:
        self.campaigns, self.clients = campaigns, clients
        self.verbs: dict[Verb, Callable[[PullContext, Command], str]] = {
            "help": lambda _ctx, _command: USAGE,
            "status": lambda ctx, _command: campaigns.status(ctx),
            "tune": campaigns.tune,
            "stop": lambda ctx, _command: campaigns.stop(ctx),
            "resume": lambda ctx, _command: campaigns.resume(ctx),
        }
        """One handler per verb."""

    def __call__(self, item: QueuedCommand) -> None:
        event = CommentEvent.model_validate(item.payload)  # its shape was checked at the door
        try:
            command, problem = parse(event.comment.body or ""), None
        except CommandError as exc:
            command, problem = None, str(exc)
        if command is None and problem is None:
            return
        installation = event.installation.id
        ctx = PullContext(
            self.clients(installation, event.repository.full_name),
            event.issue.number,
            event.comment.user.login,
            installation,
            comment_id=item.comment_id,
            commented_at=_when(event.comment.created_at),
        )
        if item.comment_id is not None:
            ctx.client.react(ctx.number, item.comment_id, "eyes")
        if problem is not None:
            ctx.reply(replies.malformed(ctx.user, problem))
            return
        assert command is not None
        ctx.reply(self.answer(ctx, command))

    def answer(self, ctx: PullContext, command: Command) -> str:
        """Verbs that start or stop work are screened first (permission, fork, the head they
        bind to); then the verb's own handler answers."""
        if command.needs_write:
            refusal = self._screen(ctx, command)
            if refusal is not None:
                return refusal
        return self.verbs[command.verb](ctx, command)

    def _screen(self, ctx: PullContext, command: Command) -> str | None:
        permission = ctx.client.permission(ctx.user)
        if not may_write(permission):
            return replies.needs_write(ctx.user, command.verb, permission)
        pull = ctx.client.pull(ctx.number)
        if pull.head_repo != pull.base_repo:
            return replies.fork_refused(ctx.user)
        ctx.head_sha = pull.head_sha
        return None


def _when(value: object) -> datetime | None:
    """A payload's ISO 8601 time (``2026-12-03T14:45:25Z``), or None."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _guarded(work: Callable[[], None], delivery: str) -> None:
    """Run ``work``; a failure is logged with the delivery, never lost silently."""
    try:
        work()
    except GitHubError as exc:
        log.error("delivery %s: %s", delivery, exc)
    except Exception:
        log.exception("delivery %s failed", delivery)
