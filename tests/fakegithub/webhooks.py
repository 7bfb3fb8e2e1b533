"""Webhook deliveries: a recorded one (the fixtures' ``webhooks/``) relinked to the fake, with its
repository, sender, installation and subject as the REST API shows them; signed and POSTed."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from .state import fit, hosted, node_id, relink

if TYPE_CHECKING:
    from .server import FakeGitHub


@cache
def recorded(path: Path) -> Any:
    """A recorded delivery, read once (``hosted`` copies it)."""
    return json.loads(path.read_text(encoding="utf-8"))


def sign(body: bytes, secret: str) -> str:
    """``X-Hub-Signature-256``: ``sha256=`` and the HMAC-SHA256 of the raw body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def deliver(url: str, event: str, payload: Any, secret: str, **options: Any) -> httpx.Response:
    """POST ``payload`` as GitHub delivers ``event``; options: ``client``, extra ``headers``."""
    body = json.dumps(payload).encode()
    sha1 = "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
    sent = {"X-GitHub-Event": event, "X-GitHub-Delivery": str(uuid.uuid4())}
    sent |= {"X-Hub-Signature": sha1, "X-Hub-Signature-256": sign(body, secret)}
    sent |= {"Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/7b3d2f1"}
    sent |= options.get("headers") or {}
    with httpx.Client(timeout=30) as fresh:
        client = options.get("client") or fresh
        response: httpx.Response = client.post(url, content=body, headers=sent)
    return response


class Webhooks:
    """Payload builders bound to one fake (``fake.webhooks``)."""

    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake

    def _payload(self, name: str, repo: str, sender: str, ids: dict[str, str]) -> Any:
        """The recording ``name`` relinked, with the fake's repository, sender, installation."""
        original = recorded(self.fake.fixtures / "webhooks" / name)
        ids = {original["repository"]["full_name"]: repo} | ids
        payload = relink(hosted(original, self.fake.url), ids)
        payload.pop("organization", None)  # the fake's owners are users
        repository = self.fake.repo_json(self.fake.repo(repo))
        payload["repository"] = fit(payload["repository"], repository)
        payload["sender"] = fit(payload["sender"], self.fake.user_json(sender))
        ident = self.fake.installation_id
        payload["installation"] = {"id": ident, "node_id": node_id("Installation", ident)}
        return payload

    def issue_comment(self, number: int, user: str, body: str, action: str = "created") -> Any:
        """``issue_comment`` on pull request ``number`` (the comment is made first)."""
        pr, comment = self.fake.pull(number), self.fake.add_comment(number, body, user)
        ids = {"2": str(number), "222": str(comment.id)}
        payload = self._payload("issue_comment.created.pull_request.json", pr.repo, user, ids)
        pull = self.fake.pull_json(pr)
        issue = {k: v for k, v in pull.items() if k not in ("id", "node_id", "url")}
        payload.update(action=action, issue=fit(payload["issue"], issue))
        payload["issue"]["pull_request"]["merged_at"] = pull["merged_at"]
        payload["comment"] = fit(payload["comment"], self.fake.comment_json(comment))
        return payload

    def pull_request(self, action: str, number: int) -> Any:
        """``pull_request`` ``action`` (from the recording of that action, else ``opened``)."""
        pr, name = self.fake.pull(number), f"pull_request.{action}.json"
        if not (self.fake.fixtures / "webhooks" / name).exists():
            name = "pull_request.opened.json"
        payload = self._payload(name, pr.repo, pr.user, {"2": str(number)})
        pull = fit(payload["pull_request"], self.fake.pull_json(pr))
        return payload | {"action": action, "number": number, "pull_request": pull}

    def workflow_run_completed(self, run_id: int) -> Any:
        """``workflow_run`` ``completed`` (complete the run first with ``complete_run``)."""
        run = self.fake.run(run_id)
        payload = self._payload("workflow_run.completed.json", run.repo, run.actor, {})
        payload["workflow_run"] = fit(payload["workflow_run"], self.fake.run_json(run))
        workflow = next(w for w in self.fake.workflows(run.repo) if w.id == run.workflow_id)
        payload["workflow"] = fit(payload["workflow"], self.fake.workflow_json(workflow))
        return payload

    def deliver(self, url: str, event: str, payload: Any, secret: str, **options: Any) -> Any:
        """``deliver`` as an App's hook; option ``delivery``: a redelivery's id."""
        headers = {"X-GitHub-Hook-ID": "1", "X-GitHub-Hook-Installation-Target-Type": "integration"}
        headers["X-GitHub-Hook-Installation-Target-ID"] = str(self.fake.app_id)
        headers |= {"X-GitHub-Delivery": options.pop("delivery")} if "delivery" in options else {}
        return deliver(url, event, payload, secret, headers=headers, **options)
