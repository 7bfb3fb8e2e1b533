"""The records the fake keeps: plain dataclasses, mutated only under ``FakeState.lock``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

Permission = Literal["admin", "maintain", "write", "triage", "read", "none"]
PERMISSIONS: tuple[str, ...] = ("admin", "maintain", "write", "triage", "read", "none")

REACTIONS: tuple[str, ...] = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime | None) -> str | None:
    """GitHub's timestamp form, ``2024-05-01T12:00:00Z``."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class User:
    login: str
    id: int
    type: Literal["User", "Bot", "Organization"] = "User"


@dataclass
class Label:
    id: int
    name: str
    color: str
    description: str = ""


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    private: bool
    created_at: datetime
    branches: dict[str, str] = field(default_factory=dict)
    """Branch name -> head sha."""
    permissions: dict[str, str] = field(default_factory=dict)
    """Login -> role (admin/maintain/write/triage/read/none)."""
    labels: dict[str, Label] = field(default_factory=dict)
    parent: str | None = None
    """Full name of the repository this one is a fork of."""
    next_number: int = 1
    pushed_at: datetime | None = None
    codeowners_errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class PullRequest:
    repo: str
    """Full name of the base repository."""
    number: int
    id: int
    title: str
    body: str
    head: str
    """Head branch name (in ``head_repo``)."""
    head_repo: str
    base: str
    user: str
    head_sha: str
    """Head commit: follows the head branch while the pull request is open."""
    created_at: datetime
    updated_at: datetime
    state: Literal["open", "closed"] = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_at: datetime | None = None
    merged_by: str | None = None
    closed_at: datetime | None = None
    labels: list[str] = field(default_factory=list)
    draft: bool = False
    merged_base: str | None = None
    """The base head the pull request was merged onto (its files stay diffed against it)."""

    @property
    def fork(self) -> bool:
        return self.head_repo != self.repo


@dataclass
class Comment:
    id: int
    repo: str
    issue_number: int
    body: str
    user: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Reaction:
    id: int
    comment_id: int
    content: str
    user: str
    created_at: datetime


@dataclass
class CheckRun:
    id: int
    repo: str
    name: str
    head_sha: str
    status: str = "queued"
    conclusion: str | None = None
    title: str | None = None
    summary: str | None = None
    text: str | None = None
    details_url: str | None = None
    external_id: str = ""
    started_at: datetime | None = None
    completed_at: datetime | None = None
    app_id: int = 0
    actions: bool = False
    """Posted by a workflow job (app ``github-actions``), not through the REST API."""
    check_suite_id: int = 0
    """The workflow run's check suite, for a job's check run; 0: a suite of its own."""


@dataclass
class Workflow:
    id: int
    repo: str
    path: str
    """``.github/workflows/<file>``."""
    name: str
    run_name: str | None = None
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``on.workflow_dispatch.inputs``: name -> {description, required, default, type}."""
    dispatchable: bool = True
    inputs_declared: bool = True
    """False for a workflow registered without inputs: a dispatch may pass any."""
    created_at: datetime = field(default_factory=now)

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class Dispatch:
    repo: str
    workflow: str
    """Workflow file name."""
    ref: str
    inputs: dict[str, Any]
    run_id: int
    created_at: datetime


@dataclass
class WorkflowRun:
    id: int
    repo: str
    workflow_id: int
    name: str
    display_title: str
    event: str
    head_sha: str
    head_branch: str | None
    path: str
    run_number: int
    actor: str
    created_at: datetime
    updated_at: datetime
    inputs: dict[str, Any] = field(default_factory=dict)
    status: str = "queued"
    conclusion: str | None = None
    run_started_at: datetime | None = None
    check_suite_id: int = 0


@dataclass
class Artifact:
    id: int
    run_id: int
    repo: str
    name: str
    files: dict[str, bytes]
    """Members of the zip served on download."""
    created_at: datetime

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())


@dataclass
class RequestRecord:
    """One request the server answered."""

    method: str
    path: str
    query: str
    status: int
    template: str | None
    """The matched path template (``/repos/{owner}/{repo}/pulls``), ``None`` when unknown."""
    request_body: Any
    response_body: Any
    headers: dict[str, str]
    """Request headers, lower-case names."""
    response_headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Violation:
    """A request the real GitHub would refuse or that the fake does not know."""

    method: str
    path: str
    status: int
    reason: str
