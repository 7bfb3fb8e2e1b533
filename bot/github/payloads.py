"""The parts of GitHub's webhook payloads the app reads, validated at the door.

A signed delivery is GitHub's, but its body is still checked before anything reads it: a body
without the fields the app uses, or with the wrong types, is answered 400 with the first
problem, never a 500 from deep inside a handler or a worker. Fields the app does not read are
ignored (GitHub adds fields over time).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Repository(_Part):
    full_name: str


class Addressed(_Part):
    """Any other event: the repository it is about, when it names one (``installation``
    events name none), is ``{"full_name": str, ...}``."""

    repository: Repository | None = None


class User(_Part):
    login: str
    type: str = "User"


class Comment(_Part):
    id: int
    body: str | None
    user: User
    created_at: str | None = None


class Issue(_Part):
    number: int
    pull_request: dict[str, Any] | None = None


class Installation(_Part):
    id: int


class CommentEvent(_Part):
    """``issue_comment``: everything a command's handler reads later, in a worker."""

    action: str
    issue: Issue
    comment: Comment
    repository: Repository
    installation: Installation


class ActionEvent(_Part):
    """``workflow_run`` and ``check_run``: only their action is read."""

    action: str
    repository: Repository


SHAPES: dict[str, type[_Part]] = {
    "issue_comment": CommentEvent,
    "workflow_run": ActionEvent,
    "check_run": ActionEvent,
}


class MalformedPayload(ValueError):
    """A payload without the fields the app reads; the message is the 400's short reason."""


def check_payload(event: str, payload: dict[str, Any]) -> None:
    """Raise MalformedPayload when ``payload`` lacks what the app reads of ``event``."""
    if event == "ping":
        return
    shape = SHAPES.get(event, Addressed)
    try:
        shape.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise MalformedPayload(f"{event} payload: {where}: {first['msg']}"[:200]) from None
