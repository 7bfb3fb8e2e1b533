"""The GitHub App: a FastAPI webhook endpoint that turns PR comments into campaign work.

``POST /webhook`` refuses a body over ``ATTUNE_MAX_BODY_BYTES`` (1 MiB) before reading it all,
holds bodies within a budget shared by all connections (``http_limits.py``, with the read deadline
and the connection limits), verifies the signature over the raw body (constant time), checks that
the payload has the fields the app reads (``payloads.py``: 400 otherwise), and writes the
delivery and the command it carries to the durable inbox (``bot/github/inbox.py``) before
answering: GitHub gives a webhook 10 s, and an app killed after its 202 must not lose the
command. Workers drain the inbox. ``GET /healthz`` is open; ``GET /campaigns`` (JSON status)
needs the operator token and is off without one.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from bot.github.client import RepoClients
from bot.github.commands import command_line
from bot.github.handlers import CampaignService, CommandHandler, CommandWorkers
from bot.github.http_limits import BufferBudget
from bot.github.inbox import Delivery, GroupCommit, Inbox
from bot.github.payloads import CommentEvent, MalformedPayload, check_payload
from bot.github.settings import Settings
from bot.github.signature import verify

log = logging.getLogger("attune.github")

MAX_DELIVERY_ID = 100
"""``X-GitHub-Delivery`` is a GUID; anything much longer is not GitHub's."""


class InFlight:
    """How many HTTP requests the app is serving right now (read by the command workers)."""

    def __init__(self) -> None:
        self.count = 0

    def busy(self) -> bool:
        return self.count > 0

    class Counting:
        """Pure ASGI middleware that keeps ``counter.count``."""

        def __init__(self, app: Any, counter: InFlight) -> None:
            self.app, self.counter = app, counter

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await self.app(scope, receive, send)
                return
            self.counter.count += 1
            try:
                await self.app(scope, receive, send)
            finally:
                self.counter.count -= 1


def _from_a_bot(payload: dict[str, Any]) -> bool:
    """Comments by bots (this App's own replies included) are never commands."""
    user = (payload.get("comment") or {}).get("user") or {}
    return user.get("type") == "Bot" or str(user.get("login", "")).endswith("[bot]")


class _Refused(Exception):
    """The body is not read further: the answer is ``status`` with ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


async def _read_capped(
    request: Request, limit: int, budget: BufferBudget, deadline: float
) -> tuple[bytes, int]:
    """The body and the budget bytes it holds (the caller gives them back). Refused (413) as
    soon as it is known to exceed ``limit``, declared or streamed; refused (503) when the
    bodies of all connections leave no room for it before ``deadline``."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise _Refused(413, f"body over {limit} bytes")
    body, held = bytearray(), 0
    try:
        if declared is not None and int(declared) > 0:  # reserve what is announced, at once
            if not await budget.take(int(declared), deadline):
                raise _Refused(503, "too many bodies in flight, try again")
            held = int(declared)
        async for chunk in request.stream():
            if len(body) + len(chunk) > limit:
                raise _Refused(413, f"body over {limit} bytes")
            if len(body) + len(chunk) > held:
                more = len(body) + len(chunk) - held
                if not await budget.take(more, deadline):
                    raise _Refused(503, "too many bodies in flight, try again")
                held += more
            body += chunk
    except BaseException:
        await budget.give(held)
        raise
    return bytes(body), held


def create_app(settings: Settings, campaigns: CampaignService, clients: RepoClients) -> FastAPI:
    inbox = Inbox(settings.state_dir / "inbox.db", retention_s=settings.delivery_retention_s)
    group = GroupCommit(inbox)
    in_flight = InFlight()
    workers = CommandWorkers(
        inbox, CommandHandler(campaigns, clients), settings.workers, busy=in_flight.busy
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        for name in campaigns.recover():
            log.info("resumed campaign %s from the ledger", name)
        workers.start()  # commands accepted before a restart run now
        yield
        workers.stop()

    # no OpenAPI schema and no docs pages: the endpoints are GitHub's and the operator's
    app = FastAPI(
        title="attune", openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan
    )
    budget = BufferBudget(settings.max_buffered_bytes)
    app.state.buffer_budget = budget
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
        deadline = time.monotonic() + settings.read_timeout_s
        try:
            body, held = await _read_capped(request, settings.max_body_bytes, budget, deadline)
        except _Refused as refused:
            return JSONResponse({"detail": refused.detail}, status_code=refused.status)
        except ClientDisconnect:  # gone, or closed at the read deadline: nobody to answer
            return JSONResponse({"detail": "client disconnected"}, status_code=400)
        try:
            return await handle(request, body, signature)
        finally:
            await budget.give(held)

    async def handle(request: Request, body: bytes, signature: str) -> JSONResponse:
        if not verify(body, signature, secret):
            return JSONResponse({"detail": "invalid or missing signature"}, status_code=401)
        event = request.headers.get("x-github-event", "")
        delivery = request.headers.get("x-github-delivery", "")
        if not event or not delivery or len(delivery) > MAX_DELIVERY_ID:
            return JSONResponse({"detail": "missing X-GitHub-Event or X-GitHub-Delivery"}, 400)
        try:
            payload = json.loads(body)
        except RecursionError:
            return JSONResponse({"detail": "body is nested too deeply"}, status_code=400)
        except ValueError:
            return JSONResponse({"detail": "body is not JSON"}, status_code=400)
        if not isinstance(payload, dict):
            return JSONResponse({"detail": "body is not a JSON object"}, status_code=400)
        try:
            check_payload(event, payload)
        except MalformedPayload as exc:
            log.warning("delivery %s: %s", delivery, exc)
            return JSONResponse({"detail": str(exc)}, status_code=400)
        repo = str((payload.get("repository") or {}).get("full_name", ""))
        if event != "ping" and repo not in allowed:
            log.warning("delivery %s for %r: repository not allowed", delivery, repo)
            return JSONResponse({"status": "repository not allowed, ignored"})
        command = _command(event, payload)
        comment_id = CommentEvent.model_validate(payload).comment.id if command else None
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
    app.add_middleware(InFlight.Counting, counter=in_flight)
    return app


def _command(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The payload, when it carries a command for attune: a created comment on a pull request,
    by a person, addressed to ``/attune`` (well formed or not: a malformed one gets a reply)."""
    if event != "issue_comment" or payload.get("action") != "created":
        return None  # edited/deleted comments are never commands
    if "pull_request" not in (payload.get("issue") or {}) or _from_a_bot(payload):
        return None
    if command_line(str((payload.get("comment") or {}).get("body") or "")) is None:
        return None
    return payload  # well formed or not: the worker parses it once and replies either way
