"""Webhook deliveries as GitHub sends them, built from recorded payloads and the fake's state.

Each builder starts from a recorded delivery in the fixtures' ``webhooks/`` folder, re-points
its URLs at the fake, and overwrites every field the fake knows (repository, installation,
sender, issue/pull request/comment/run ids, shas and URLs) with the same bodies the REST API
returns. ``FakeGitHub.webhooks`` is a ``Webhooks`` bound to that fake::

    payload = fake.webhooks.issue_comment(pr_number, "alice", "/attune tune")
    payload = fake.webhooks.pull_request("opened", number)
    payload = fake.webhooks.workflow_run_completed(run_id)
    response = deliver(url, "issue_comment", payload, secret)   # or fake.webhooks.deliver(...)

``sign(body, secret)`` is the ``X-Hub-Signature-256`` value.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from .openapi import fixtures_dir
from .render import fit, node_id, retarget_hosts
from .render_actions import Renderer

if TYPE_CHECKING:
    from .server import FakeGitHub

HOOKSHOT_AGENT = "GitHub-Hookshot/7b3d2f1"


@cache
def _recorded(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def recorded(name: str, fixtures: Path | None = None) -> dict[str, Any]:
    """A fresh copy of ``webhooks/<name>`` from the fixtures."""
    folder = (fixtures or fixtures_dir()) / "webhooks"
    payload: dict[str, Any] = json.loads(_recorded(str(folder / name)))
    return payload


def sign(body: bytes, secret: str) -> str:
    """``X-Hub-Signature-256``: ``sha256=`` + HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode("utf-8")


def delivery_headers(
    event: str, body: bytes, secret: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """The headers GitHub sends with a delivery."""
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature": "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest(),
        "X-Hub-Signature-256": sign(body, secret),
        "Content-Type": "application/json",
        "User-Agent": HOOKSHOT_AGENT,
        **(extra or {}),
    }


def deliver(
    url: str,
    event: str,
    payload: dict[str, Any],
    secret: str,
    *,
    client: httpx.Client | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST ``payload`` to ``url`` the way GitHub delivers ``event``. ``client`` may be any
    httpx client (a Starlette ``TestClient`` too, with ``url`` then a path)."""
    body = encode(payload)
    sent = delivery_headers(event, body, secret, headers)
    if client is not None:
        return client.post(url, content=body, headers=sent)
    with httpx.Client(timeout=30) as fresh:
        return fresh.post(url, content=body, headers=sent)


class Webhooks:
    """Payload builders bound to one fake (``fake.webhooks``)."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake

    def _render(self) -> Renderer:
        return Renderer(self.fake, self.fake.spec, self.fake.url)

    def _common(self, payload: dict[str, Any], repo: str, sender: str) -> dict[str, Any]:
        render = self._render()
        target = self.fake.repo(repo)
        if self.fake.user(target.owner).type != "Organization":
            payload.pop("organization", None)
        payload["repository"] = fit(payload["repository"], render.repo(target))
        payload["sender"] = fit(payload["sender"], render.user(sender))
        installation = self.fake.installation_id
        payload["installation"] = {
            "id": installation,
            "node_id": node_id("IntegrationInstallation", installation),
        }
        return payload

    def issue_comment(
        self,
        pr_number: int,
        user: str,
        body: str,
        action: str = "created",
        comment_id: int | None = None,
        repo: str | None = None,
    ) -> dict[str, Any]:
        """``issue_comment`` on pull request ``pr_number``. ``created`` (without
        ``comment_id``) first adds the comment to the state, as GitHub would have."""
        with self.fake.lock:
            full = self.fake.repo(repo).full_name
            pr = self.fake.pull(pr_number, full)
            changes: dict[str, Any] | None = None
            if comment_id is None:
                comment = self.fake.add_comment(pr_number, body, user, full)
            else:
                comment = self.fake.comment(comment_id)
                if action == "edited" and comment.body != body:
                    changes = {"body": {"from": comment.body}}
                    comment.body = body
            render = self._render()
            payload = retarget_hosts(
                recorded("issue_comment.created.pull_request.json", self.fake.fixtures), render.base
            )
            payload["action"] = action
            payload["issue"] = fit(payload["issue"], render.issue(pr))
            payload["comment"] = fit(payload["comment"], render.comment(comment))
            if changes is not None:
                payload["changes"] = changes
            return self._common(payload, full, user)

    def pull_request(
        self, action: str, number: int, sender: str | None = None, repo: str | None = None
    ) -> dict[str, Any]:
        """``pull_request`` ``action`` for pull request ``number`` (the recorded delivery of
        that action when there is one, else the ``opened`` one relabelled)."""
        with self.fake.lock:
            full = self.fake.repo(repo).full_name
            pr = self.fake.pull(number, full)
            name = f"pull_request.{action}.json"
            if not (self.fake.fixtures / "webhooks" / name).exists():
                name = "pull_request.opened.json"
            render = self._render()
            payload = retarget_hosts(recorded(name, self.fake.fixtures), render.base)
            payload["action"] = action
            payload["number"] = number
            payload["pull_request"] = fit(payload["pull_request"], render.pull(pr))
            if action == "synchronize":
                parents = self.fake.get_commit(pr.head_sha).parents
                payload["before"] = parents[0] if parents else pr.head_sha
                payload["after"] = pr.head_sha
            return self._common(payload, full, sender or pr.user)

    def workflow_run_completed(self, run_id: int) -> dict[str, Any]:
        """``workflow_run`` ``completed`` for a run (complete it first with ``complete_run``)."""
        with self.fake.lock:
            run = self.fake.run(run_id)
            render = self._render()
            payload = retarget_hosts(
                recorded("workflow_run.completed.json", self.fake.fixtures), render.base
            )
            payload["workflow_run"] = fit(payload["workflow_run"], render.workflow_run(run))
            workflow = next(w for w in self.fake.workflows(run.repo) if w.id == run.workflow_id)
            payload["workflow"] = fit(payload["workflow"], render.workflow(workflow))
            return self._common(payload, run.repo, run.actor)

    def deliver(
        self,
        url: str,
        event: str,
        payload: dict[str, Any],
        secret: str,
        *,
        client: httpx.Client | None = None,
        delivery: str | None = None,
    ) -> httpx.Response:
        """``deliver`` with the App hook headers (``X-GitHub-Hook-Installation-Target-*``);
        ``delivery`` fixes the ``X-GitHub-Delivery`` id (a redelivery reuses it)."""
        extra = {
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self.fake.app_id),
        }
        if delivery is not None:
            extra["X-GitHub-Delivery"] = delivery
        return deliver(url, event, payload, secret, client=client, headers=extra)
