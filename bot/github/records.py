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
