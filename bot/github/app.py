"""The GitHub App: a FastAPI webhook endpoint that turns PR comments into campaign work.

``POST /webhook`` verifies the signature over the raw body (constant time), drops redeliveries,
answers at once and handles the event in a background thread: GitHub gives a webhook 10 s.
``GET /healthz`` and ``GET /campaigns`` (JSON status) are for operators.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from github import Auth, Github, GithubException

from bot.github.commands import USAGE, Command, CommandError, parse
from bot.github.deliveries import DeliveryLog
from bot.github.settings import Settings
from bot.github.signature import verify

log = logging.getLogger("attune.github")

WRITE_PERMISSIONS = frozenset({"admin", "write"})
"""The collaborator-permission endpoint reports maintain as write."""


class PullContext:
    """The pull request a command was given on, and an authenticated client for its repo."""

    def __init__(
        self, github: Github, repo: str, number: int, user: str, installation_id: int
    ) -> None:
        self.installation_id = installation_id
        self.repo_name = repo
        self.number = number
        self.user = user
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


def create_app(
    settings: Settings, campaigns: CampaignService, github_for: GithubFactory
) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        for name in campaigns.recover():
            log.info("resumed campaign %s from the ledger", name)
        yield

    app = FastAPI(title="attune", docs_url=None, redoc_url=None, lifespan=lifespan)
    deliveries = DeliveryLog(settings.state_dir / "deliveries.db")
    secret = settings.webhook_secret.get_secret_value()
    allowed = set(settings.allowed_repositories)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/campaigns")
    def campaigns_status() -> list[dict[str, Any]]:
        return campaigns.overview()

    @app.post("/webhook")
    async def webhook(request: Request) -> JSONResponse:
        body = await request.body()
        if not verify(body, request.headers.get("x-hub-signature-256"), secret):
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
        if not deliveries.first_time(delivery, event):
            return JSONResponse({"status": "duplicate delivery, ignored"})
        repo = str((payload.get("repository") or {}).get("full_name", ""))
        if event == "ping":
            return JSONResponse({"status": "pong"})
        if repo not in allowed:
            log.warning("delivery %s for %r: repository not allowed", delivery, repo)
            return JSONResponse({"status": "repository not allowed, ignored"})
        work = route(event, payload)
        if work is None:
            return JSONResponse({"status": "ignored"})
        threading.Thread(target=_guarded, args=(work, delivery), daemon=True).start()
        return JSONResponse({"status": "accepted"}, status_code=202)

    def route(event: str, payload: dict[str, Any]) -> Callable[[], None] | None:
        action = payload.get("action")
        if event == "issue_comment" and action == "created":
            if "pull_request" not in (payload.get("issue") or {}):
                return None  # comments on plain issues are not commands
            return lambda: handle_comment(payload)
        if event in ("workflow_run", "check_run") and action == "completed":
            repo = str(payload["repository"]["full_name"])
            return lambda: campaigns.wake(repo)
        return None  # edited/deleted comments and other events are never commands

    def handle_comment(payload: dict[str, Any]) -> None:
        body = str(payload["comment"]["body"] or "")
        try:
            command = parse(body)
            problem = None
        except CommandError as exc:
            command, problem = None, str(exc)
        if command is None and problem is None:
            return
        installation = int(payload["installation"]["id"])
        ctx = PullContext(
            github_for(installation),
            str(payload["repository"]["full_name"]),
            int(payload["issue"]["number"]),
            str(payload["comment"]["user"]["login"]),
            installation,
        )
        comment = ctx.repo.get_issue(ctx.number).get_comment(int(payload["comment"]["id"]))
        comment.create_reaction("eyes")
        if problem is not None:
            ctx.reply(f"@{ctx.user} {problem}")
            return
        assert command is not None
        ctx.reply(answer(ctx, command))

    def answer(ctx: PullContext, command: Command) -> str:
        if command.verb == "help":
            return USAGE
        if command.verb == "status":
            return campaigns.status(ctx)
        permission = ctx.repo.get_collaborator_permission(ctx.user)
        if permission not in WRITE_PERMISSIONS:
            return (
                f"Sorry @{ctx.user}, `/attune {command.verb}` needs write, maintain or admin "
                f"permission on this repository (yours: {permission}). `/attune status` and "
                "`/attune help` are open to everyone."
            )
        pull = ctx.repo.get_pull(ctx.number)
        head_repo = pull.head.repo
        if head_repo is None or head_repo.full_name != pull.base.repo.full_name:
            return (
                f"Sorry @{ctx.user}, attune never benchmarks pull requests from forks: their "
                "code would run on the self-hosted GPU runners. Push the branch to this "
                "repository and open the pull request from there."
            )
        if command.verb == "tune":
            return campaigns.tune(ctx, command)
        if command.verb == "stop":
            return campaigns.stop(ctx)
        return campaigns.resume(ctx)

    app.state.deliveries = deliveries
    return app


def _guarded(work: Callable[[], None], delivery: str) -> None:
    """Run ``work``; a failure is logged with the delivery, never lost silently."""
    try:
        work()
    except GithubException as exc:
        log.error("delivery %s: GitHub answered %s: %s", delivery, exc.status, exc.data)
    except Exception:
        log.exception("delivery %s failed", delivery)
