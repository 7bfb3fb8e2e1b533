"""What the GitHub client hands back: plain, immutable records of GitHub's objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Pull:
    number: int
    title: str
    body: str
    state: str
    """``open`` or ``closed`` (a merged pull request is closed and ``merged``)."""
    merged: bool
    base_ref: str
    head_ref: str
    head_sha: str
    base_repo: str
    head_repo: str | None
    """The head's repository (``None`` when a fork was deleted): a fork when not base_repo."""
    labels: list[str]
    merge_commit_sha: str | None
    changed_files: int | None = None
    """How many files the pull request changes, as GitHub counts them (read by ``pull``
    only: its list of files stops at 3,000)."""


@dataclass(frozen=True)
class ChangedFile:
    filename: str
    status: str
    patch: str


@dataclass(frozen=True)
class CheckRun:
    id: int
    name: str
    status: str
    conclusion: str | None
    summary: str
    app_slug: str | None
    check_suite_id: int | None


@dataclass(frozen=True)
class WorkflowRun:
    id: int
    display_title: str
    path: str
    event: str
    head_branch: str | None
    head_sha: str
    actor: str | None
    status: str
    conclusion: str | None
    created_at: datetime | None
    started_at: datetime | None
    updated_at: datetime | None
    check_suite_id: int | None


@dataclass(frozen=True)
class IssueComment:
    id: int
    body: str
    raw: Any = field(repr=False, compare=False)
    """PyGithub's comment, kept to edit it without fetching it again."""


def pull_record(p: Any, changed_files: int | None = None) -> Pull:
    """A PyGithub pull request as a ``Pull`` (PyGithub's objects are read, never imported)."""
    return Pull(
        number=p.number,
        title=p.title,
        body=p.body or "",
        state=p.state,
        merged=bool(p.merged),
        base_ref=p.base.ref,
        head_ref=p.head.ref,
        head_sha=p.head.sha,
        base_repo=p.base.repo.full_name,
        head_repo=p.head.repo.full_name if p.head.repo is not None else None,
        labels=[label.name for label in p.labels],
        merge_commit_sha=p.merge_commit_sha,
        changed_files=changed_files,
    )


def check_record(run: Any) -> CheckRun:
    return CheckRun(
        id=run.id,
        name=run.name,
        status=run.status,
        conclusion=run.conclusion,
        summary=(run.output.summary if run.output else None) or "",
        app_slug=run.app.slug if run.app is not None else None,
        check_suite_id=run.check_suite.id if run.check_suite is not None else None,
    )


def run_record(run: Any) -> WorkflowRun:
    return WorkflowRun(
        id=run.id,
        display_title=run.display_title,
        path=run.path,
        event=run.event,
        head_branch=run.head_branch,
        head_sha=run.head_sha,
        actor=run.actor.login if run.actor is not None else None,
        status=run.status,
        conclusion=run.conclusion,
        created_at=run.created_at,
        started_at=run.run_started_at,
        updated_at=run.updated_at,
        check_suite_id=run.check_suite_id,
    )
