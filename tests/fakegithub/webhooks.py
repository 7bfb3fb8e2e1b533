"""Webhook deliveries as GitHub sends them: a recorded delivery (the fixtures' ``webhooks/``)
relinked to the fake, its repository, sender, installation and subject filled in from the same
bodies the REST API answers with. ``fake.webhooks`` builds them for one fake::

    payload = fake.webhooks.issue_comment(pr_number, "alice", "/attune tune")
    payload = fake.webhooks.pull_request("opened", number)
    payload = fake.webhooks.workflow_run_completed(run_id)
    response = fake.webhooks.deliver(url, "issue_comment", payload, secret)
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

from .render import Renderer, fit, hosted, node_id, relink

if TYPE_CHECKING:
    from .server import FakeGitHub


@cache
def recorded(path: Path, base: str) -> tuple[str, str]:
    """A recorded delivery's repository and text, hosts swapped for ``base``."""
    payload = json.loads(path.read_text(encoding="utf-8"))
    return payload["repository"]["full_name"], hosted(payload, base)


def sign(body: bytes, secret: str) -> str:
    """``X-Hub-Signature-256``: ``sha256=`` and the HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(
    url: str,
    event: str,
    payload: dict[str, Any],
    secret: str,
    *,
    client: httpx.Client | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST ``payload`` to ``url`` as GitHub delivers ``event``; ``client``: any httpx client
    (a Starlette ``TestClient`` too, ``url`` then a path)."""
    body = json.dumps(payload).encode()
    sent = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature": "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest(),
        "X-Hub-Signature-256": sign(body, secret),
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/7b3d2f1",
        **(headers or {}),
    }
    if client is not None:
        return client.post(url, content=body, headers=sent)
    with httpx.Client(timeout=30) as fresh:
        return fresh.post(url, content=body, headers=sent)


class Webhooks:
    """Payload builders bound to one fake."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake

    def _payload(
        self, name: str, repo: str, sender: str, ids: dict[str, str]
    ) -> tuple[dict[str, Any], Renderer]:
        """The recording ``name`` relinked (``ids`` and its repository's name), with this
        fake's repository, sender and installation."""
        render = self.fake.render
        recorded_repo, text = recorded(self.fake.fixtures / "webhooks" / name, render.base)
        payload: dict[str, Any] = relink(text, {recorded_repo: repo, **ids})
        payload.pop("organization", None)  # the fake's owners are users
        payload["repository"] = fit(payload["repository"], render.repo(self.fake.repo(repo)))
        payload["sender"] = fit(payload["sender"], render.user(sender))
        installation = self.fake.installation_id
        payload["installation"] = {
            "id": installation,
            "node_id": node_id("IntegrationInstallation", installation),
        }
        return payload, render

    def issue_comment(
        self, pr_number: int, user: str, body: str, action: str = "created", repo: str | None = None
    ) -> dict[str, Any]:
        """``issue_comment`` on a pull request; the comment is added to the state first, as on
        GitHub."""
        with self.fake.lock:
            pr = self.fake.pull(pr_number, repo)
            comment = self.fake.add_comment(pr_number, body, user, pr.repo)
            ids = {"2": str(pr.number), "222": str(comment.id)}
            payload, render = self._payload(
                "issue_comment.created.pull_request.json", pr.repo, user, ids
            )
            pull = render.pull(pr)
            payload["action"] = action
            payload["issue"] = fit(
                payload["issue"],
                {k: v for k, v in pull.items() if k not in ("id", "node_id", "url")},
            )
            payload["issue"]["pull_request"]["merged_at"] = pull["merged_at"]
            payload["comment"] = fit(payload["comment"], render.comment(comment))
            return payload

    def pull_request(
        self, action: str, number: int, sender: str | None = None, repo: str | None = None
    ) -> dict[str, Any]:
        """``pull_request`` ``action`` (the recording of that action, else of ``opened``)."""
        with self.fake.lock:
            pr = self.fake.pull(number, repo)
            name = f"pull_request.{action}.json"
            if not (self.fake.fixtures / "webhooks" / name).exists():
                name = "pull_request.opened.json"
            payload, render = self._payload(name, pr.repo, sender or pr.user, {"2": str(number)})
            payload.update(
                action=action,
                number=number,
                pull_request=fit(payload["pull_request"], render.pull(pr)),
            )
            return payload

    def workflow_run_completed(self, run_id: int) -> dict[str, Any]:
        """``workflow_run`` ``completed`` (complete the run first with ``complete_run``)."""
        with self.fake.lock:
            run = self.fake.run(run_id)
            payload, render = self._payload("workflow_run.completed.json", run.repo, run.actor, {})
            payload["workflow_run"] = fit(payload["workflow_run"], render.workflow_run(run))
            workflow = next(w for w in self.fake.workflows(run.repo) if w.id == run.workflow_id)
            payload["workflow"] = fit(payload["workflow"], render.workflow(workflow))
            return payload

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
        """``deliver`` with an App hook's headers; ``delivery`` fixes ``X-GitHub-Delivery`` (a
        redelivery reuses it)."""
        headers = {
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self.fake.app_id),
        }
        headers |= {"X-GitHub-Delivery": delivery} if delivery else {}
        return deliver(url, event, payload, secret, client=client, headers=headers)
