"""The GitHub App: a FastAPI webhook endpoint that turns PR comments into campaign work.

``POST /webhook`` refuses a body over 25 MiB before reading it, verifies the signature over the
raw body (constant time), and writes the delivery and the command it carries to the durable
inbox (``bot/github/inbox.py``) before answering: GitHub gives a webhook 10 s, and an app killed
after its 202 must not lose the command. Workers drain the inbox. ``GET /healthz`` is open;
``GET /campaigns`` (JSON status) needs the operator token and is off without one.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from bot.github.client import RepoClients
from bot.github.commands import CommandError, parse
from bot.github.handlers import CampaignService, CommandHandler, CommandWorkers
from bot.github.inbox import Delivery, GroupCommit, Inbox
from bot.github.settings import Settings
from bot.github.signature import verify

log = logging.getLogger("attune.github")

MAX_BODY_BYTES = 25 * 1024 * 1024
"""GitHub caps webhook payloads at 25 MB; anything larger is not GitHub's and is never read."""


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


def create_app(settings: Settings, campaigns: CampaignService, clients: RepoClients) -> FastAPI:
    inbox = Inbox(settings.state_dir / "inbox.db", retention_s=settings.delivery_retention_s)
    group = GroupCommit(inbox)
    workers = CommandWorkers(inbox, CommandHandler(campaigns, clients), settings.workers)

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
