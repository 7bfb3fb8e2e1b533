"""The GitHub App: a FastAPI webhook endpoint that turns PR comments into campaign work.

``POST /webhook`` refuses a body over 25 MiB before reading it, verifies the signature over the
raw body (constant time), and writes the delivery and the command it carries to the durable
inbox (``bot/github/inbox.py``) before answering: GitHub gives a webhook 10 s, and an app killed
after its 202 must not lose the command. Workers drain the inbox. ``GET /healthz`` is open;
``GET /campaigns`` (JSON status) needs the operator token and is off without one.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from github import Auth, Github, GithubException

from bot.github.commands import USAGE, Command, CommandError, parse
from bot.github.inbox import Delivery, GroupCommit, Inbox, QueuedCommand
from bot.github.permissions import may_write, permission_of
from bot.github.settings import Settings
from bot.github.signature import verify
from bot.render import replies

log = logging.getLogger("attune.github")

MAX_BODY_BYTES = 25 * 1024 * 1024
"""GitHub caps webhook payloads at 25 MB; anything larger is not GitHub's and is never read."""


class PullContext:
    """The pull request a command was given on, and an authenticated client for its repo."""

    def __init__(
        self,
        github: Github,
        repo: str,
        number: int,
        user: str,
        installation_id: int,
        comment_id: int | None = None,
    ) -> None:
        self.installation_id = installation_id
        self.repo_name = repo
        self.number = number
        self.user = user
        self.comment_id = comment_id
        """The comment that carried the command: a command is carried out once per comment."""
        self.head_sha: str | None = None
        """The head the command was screened at (fork, permission); a campaign is bound to it."""
        self.repo = github.withLazy(True).get_repo(repo)

    def reply(self, body: str) -> None:
        self.repo.get_issue(self.number).create_comment(body)


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


GithubFactory = Callable[[int], Github]
"""Installation id -> a client authenticated as that installation."""


def installation_client(settings: Settings, **github_kwargs: Any) -> GithubFactory:
    """App auth: a JWT signed with the App's key is exchanged for installation tokens (PyGithub
    refreshes them). ``github_kwargs`` go to ``Github`` (tests turn retries and throttling off)."""
    app_auth = Auth.AppAuth(settings.app_id, settings.private_key())

    def client(installation_id: int) -> Github:
        auth = app_auth.get_installation_auth(installation_id)
        return Github(base_url=settings.github_api_url, auth=auth, **github_kwargs)

    return client


def _from_a_bot(payload: dict[str, Any]) -> bool:
    """Comments by bots (this App's own replies included) are never commands."""
    user = (payload.get("comment") or {}).get("user") or {}
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


async def _read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed ``limit`` (declared or streamed)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


class CommandWorkers:
    """Threads that drain the inbox: each command is handled, then marked done."""

    def __init__(self, inbox: Inbox, handle: Callable[[QueuedCommand], None], count: int) -> None:
        self.inbox, self.handle, self.count = inbox, handle, count
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

    def _loop(self) -> None:
        while not self._stop.is_set():
            item = self.inbox.take()
            if item is None:
                self.inbox.ready.wait(1.0)
                continue
            _guarded(functools.partial(self.handle, item), item.delivery)
            self.inbox.done(item.seq)


class CommandHandler:
    """What a queued comment command does: eyes, then the one reply."""

    def __init__(self, campaigns: CampaignService, github_for: GithubFactory) -> None:
        self.campaigns, self.github_for = campaigns, github_for

    def __call__(self, item: QueuedCommand) -> None:
        payload = item.payload
        try:
            command, problem = parse(str(payload["comment"]["body"] or "")), None
        except CommandError as exc:
            command, problem = None, str(exc)
        if command is None and problem is None:
            return
        ctx = PullContext(
            self.github_for(int(payload["installation"]["id"])),
            str(payload["repository"]["full_name"]),
            int(payload["issue"]["number"]),
            str(payload["comment"]["user"]["login"]),
            int(payload["installation"]["id"]),
            comment_id=item.comment_id,
        )
        if item.comment_id is not None:
            issue = ctx.repo.get_issue(ctx.number)
            issue.get_comment(item.comment_id).create_reaction("eyes")
        if problem is not None:
            ctx.reply(replies.malformed(ctx.user, problem))
            return
        assert command is not None
        ctx.reply(self.answer(ctx, command))

    def answer(self, ctx: PullContext, command: Command) -> str:
        if command.verb == "help":
            return USAGE
        if command.verb == "status":
            return self.campaigns.status(ctx)
        permission = permission_of(ctx.repo, ctx.user)
        if not may_write(permission):
            return replies.needs_write(ctx.user, command.verb, permission)
        pull = ctx.repo.get_pull(ctx.number)
        head_repo = pull.head.repo
        if head_repo is None or head_repo.full_name != pull.base.repo.full_name:
            return replies.fork_refused(ctx.user)
        ctx.head_sha = pull.head.sha
        if command.verb == "tune":
            return self.campaigns.tune(ctx, command)
        if command.verb == "stop":
            return self.campaigns.stop(ctx)
        return self.campaigns.resume(ctx)


def create_app(
    settings: Settings, campaigns: CampaignService, github_for: GithubFactory
) -> FastAPI:
    inbox = Inbox(settings.state_dir / "inbox.db", retention_s=settings.delivery_retention_s)
    group = GroupCommit(inbox)
    workers = CommandWorkers(inbox, CommandHandler(campaigns, github_for), settings.workers)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        for name in campaigns.recover():
            log.info("resumed campaign %s from the ledger", name)
        workers.start()  # commands accepted before a restart run now
        yield
        workers.stop()

    app = FastAPI(title="attune", docs_url=None, redoc_url=None, lifespan=lifespan)
    secret = settings.webhook_secret.get_secret_value()
    operator = settings.operator_token.get_secret_value() if settings.operator_token else ""
    allowed = set(settings.allowed_repositories)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/campaigns", response_model=None)
    def campaigns_status(request: Request) -> list[dict[str, Any]] | JSONResponse:
        if not operator:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        if not hmac.compare_digest(given.encode(), operator.encode()):
            return JSONResponse({"detail": "operator token required"}, status_code=401)
        return campaigns.overview()

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        signature = request.headers.get("x-hub-signature-256")
        if not signature or not signature.startswith("sha256="):  # refused before reading
            return JSONResponse({"detail": "invalid or missing signature"}, status_code=401)
        body = await _read_capped(request, MAX_BODY_BYTES)
        if body is None:
            return JSONResponse({"detail": "body over 25 MiB"}, status_code=413)
        if not verify(body, signature, secret):
            return JSONResponse({"detail": "invalid or missing signature"}, status_code=401)
        event = request.headers.get("x-github-event", "")
        delivery = request.headers.get("x-github-delivery", "")
        if not event or not delivery:
            return JSONResponse({"detail": "missing X-GitHub-Event or X-GitHub-Delivery"}, 400)
        try:
            payload = json.loads(body)
        except ValueError:
            return JSONResponse({"detail": "body is not JSON"}, status_code=400)
        if not isinstance(payload, dict):
            return JSONResponse({"detail": "body is not a JSON object"}, status_code=400)
        repo = str((payload.get("repository") or {}).get("full_name", ""))
        if event != "ping" and repo not in allowed:
            log.warning("delivery %s for %r: repository not allowed", delivery, repo)
            return JSONResponse({"status": "repository not allowed, ignored"})
        command = _command(event, payload)
        comment_id = int(payload["comment"]["id"]) if command is not None else None
        outcome = await group.accept(Delivery(delivery, event, command, comment_id))
        if outcome == "duplicate delivery":
            return JSONResponse({"status": "duplicate delivery, ignored"})
        if outcome == "duplicate comment":
            return JSONResponse({"status": "command already received, ignored"})
        if outcome == "queued":
            return JSONResponse({"status": "accepted"}, status_code=202)
        if event == "ping":
            return JSONResponse({"status": "pong"})
        if event in ("workflow_run", "check_run") and payload.get("action") == "completed":
            campaigns.wake(repo)
            return JSONResponse({"status": "accepted"}, status_code=202)
        return JSONResponse({"status": "ignored"})

    app.state.inbox = inbox
    return app


def _command(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The payload, when it carries a command for attune: a created comment on a pull request,
    by a person, addressed to ``/attune`` (well formed or not: a malformed one gets a reply)."""
    if event != "issue_comment" or payload.get("action") != "created":
        return None  # edited/deleted comments are never commands
    if "pull_request" not in (payload.get("issue") or {}) or _from_a_bot(payload):
        return None
    try:
        if parse(str((payload.get("comment") or {}).get("body") or "")) is None:
            return None
    except CommandError:
        pass
    return payload


def _guarded(work: Callable[[], None], delivery: str) -> None:
    """Run ``work``; a failure is logged with the delivery, never lost silently."""
    try:
        work()
    except GithubException as exc:
        log.error("delivery %s: GitHub answered %s: %s", delivery, exc.status, exc.data)
    except Exception:
        log.exception("delivery %s failed", delivery)
