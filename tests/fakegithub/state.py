"""What the fake GitHub knows, and the Python API tests arrange and inspect it with.

``FakeGitHub`` (server.py) is a ``FakeState``. ``repo=None`` means the first repository created,
``repo="owner/name"`` another one (a fork, say). Git lives in a real bare repository
(gitstore.py); the rest is plain records, changed under ``lock`` only. Arranging::

    create_repo(owner, name, files=None, default_branch="main", private=False) -> Repo
    fork_repo(user, repo=None) -> Repo               # copies the branches on first call
    set_permission(login, permission, repo=None)     # admin/maintain/write/triage/read/none
    commit(branch, files, message="Update files", author="octocat", repo=None) -> sha
    create_branch(name, from_sha=None, repo=None) -> sha
    move_branch(repo, branch, sha)                   # a push behind the bot's back
    open_pull(head, base, title, body="", user="octocat", fork=False, repo=None) -> number
    add_comment(number, body, user="octocat", repo=None) -> Comment
    issue_token() -> (token, expires_at)             # an installation token without a JWT

GitHub Actions: nothing runs. The workflows are the default branch's ``.github/workflows/*.yml``
files; a dispatch records a queued run (see ``dispatches()``) and the test plays the runner::

    create_run(workflow_file, ref, event="push", inputs=None, actor=None, repo=None)
    start_run(run_id); complete_run(run_id, conclusion="success", artifacts=None)
    job_check_run(run_id, name, conclusion, summary="")  # a job's check run, as Actions posts it

``artifacts`` maps a name to bytes (a zip of one file so named) or to ``{member: bytes}``.
Looking: ``head``, ``files_at``, ``get_commit``, ``permission``, ``pull(s)``, ``comments``,
``reactions``, ``check_runs``, ``workflow(s)``, ``dispatches``, ``run(s)``, and the
``requests``, ``violations`` and ``response_problems`` the server records.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import yaml

from .gitstore import Commit, FileChange, GitStore

PERMISSIONS = ("none", "read", "triage", "write", "maintain", "admin")
WORKFLOWS = ".github/workflows/"


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class User:
    login: str
    id: int

    @property
    def type(self) -> str:
        return "Bot" if self.login.endswith("[bot]") else "User"


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    private: bool
    created_at: datetime
    pushed_at: datetime
    parent: str | None = None
    """Full name of the repository this one is a fork of."""
    branches: dict[str, str] = field(default_factory=dict)
    """Branch -> head sha (kept as refs in the git repository too)."""
    permissions: dict[str, str] = field(default_factory=dict)
    """Lower-case login -> role."""
    labels: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Lower-case name -> (name, id)."""
    next_number: int = 1

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class PullRequest:
    repo: str
    number: int
    id: int
    title: str
    body: str
    head: str
    """Head branch name, in ``head_repo``."""
    head_repo: str
    base: str
    user: str
    head_sha: str
    """Follows the head branch while the pull request is open."""
    created_at: datetime
    updated_at: datetime
    state: str = "open"
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_at: datetime | None = None
    merged_by: str | None = None
    closed_at: datetime | None = None
    merged_base: str | None = None
    """The base head it was merged onto: its files stay diffed against that."""
    labels: list[str] = field(default_factory=list)

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
    check_suite_id: int = 0
    """A workflow run's suite for a job's check run (app ``github-actions``); 0: the App's."""


@dataclass
class Workflow:
    id: int
    repo: str
    path: str
    name: str
    run_name: str | None
    inputs: dict[str, Any]
    """``on.workflow_dispatch.inputs``: name -> {description, required, default, type}."""
    dispatchable: bool
    created_at: datetime

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
    check_suite_id: int
    status: str = "queued"
    conclusion: str | None = None
    run_started_at: datetime | None = None


@dataclass
class Artifact:
    id: int
    run_id: int
    repo: str
    name: str
    files: dict[str, bytes]
    """Members of the zip served on download."""
    created_at: datetime


@dataclass
class RequestRecord:
    """One request the server answered."""

    method: str
    path: str
    query: str
    status: int
    template: str | None
    """The matched path template, ``None`` when unknown."""
    request_body: Any
    response_body: Any
    headers: dict[str, str]
    """Request headers, lower-case names."""
    response_headers: dict[str, str]


@dataclass
class Violation:
    """A request the real GitHub would refuse, or that the fake does not know."""

    method: str
    path: str
    status: int
    reason: str


@cache
def parse_workflow(path: str, text: str) -> dict[str, Any]:
    """``name``, ``run_name``, ``inputs`` and ``dispatchable`` of a workflow file."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        return {"name": path, "run_name": None, "inputs": {}, "dispatchable": False}
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    dispatch = on.get("workflow_dispatch", False) if isinstance(on, dict) else None
    if isinstance(on, str | list):
        dispatch = {} if "workflow_dispatch" in on else False
    inputs = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    return {
        "name": str(doc.get("name") or path),
        "run_name": doc.get("run-name"),
        "inputs": dict(inputs) if isinstance(inputs, dict) else {},
        "dispatchable": dispatch is not False,
    }


def render_expression(template: str, context: dict[str, Any]) -> str:
    """``${{ inputs.x }}`` substitution from dotted names (``inputs.x``, ``github.ref_name``);
    an unknown expression renders empty, as on GitHub."""

    def one(match: re.Match[str]) -> str:
        value = context.get(match.group(1).replace("github.event.inputs.", "inputs."))
        return ("true" if value else "false") if isinstance(value, bool) else str(value or "")

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, template)


class FakeState:
    """Everything the fake GitHub knows (see the module docstring for the API)."""

    def __init__(self, *, app_id: int, app_slug: str, installation_id: int) -> None:
        self.lock = threading.RLock()
        self.app_id, self.app_slug, self.installation_id = app_id, app_slug, installation_id
        self.git = GitStore()
        self.tokens: dict[str, datetime] = {}
        self.users: dict[str, User] = {}
        self.repos: dict[str, Repo] = {}
        self.pull_requests: dict[tuple[str, int], PullRequest] = {}
        self.all_comments: dict[int, Comment] = {}
        self.all_reactions: list[Reaction] = []
        self.all_check_runs: dict[int, CheckRun] = {}
        self.workflow_ids: dict[tuple[str, str], int] = {}
        self.all_dispatches: list[Dispatch] = []
        self.all_runs: dict[int, WorkflowRun] = {}
        self.all_artifacts: dict[int, Artifact] = {}
        self.requests: list[RequestRecord] = []
        self.violations: list[Violation] = []
        self.response_problems: list[str] = []
        self._ids = itertools.count(1_000_001)
        self._secret = secrets.token_bytes(16)
        self.user(self.bot_login)

    def next_id(self) -> int:
        return next(self._ids)

    @property
    def bot_login(self) -> str:
        """The App's user, author of everything the bot writes (``attune[bot]``)."""
        return f"{self.app_slug}[bot]"

    def issue_token(self) -> tuple[str, datetime]:
        """A fresh installation token (``ghs_...``) and its expiry, as the token endpoint
        hands out."""
        with self.lock:
            token = "ghs_" + secrets.token_urlsafe(27).replace("-", "a").replace("_", "b")
            self.tokens[token] = now() + timedelta(hours=1)
            return token, self.tokens[token]

    def token_valid(self, token: str) -> bool:
        return self.tokens.get(token, now()) > now()

    def sign(self, text: str) -> str:
        """An unguessable signature for ``text`` (artifact download URLs)."""
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()[:32]

    def user(self, login: str) -> User:
        """The user ``login``, created on first mention."""
        with self.lock:
            if login.lower() not in self.users:
                self.users[login.lower()] = User(login, self.next_id())
            return self.users[login.lower()]

    def email(self, login: str) -> str:
        return f"{self.user(login).id}+{login}@users.noreply.github.com"

    # -- repositories and git ------------------------------------------------------------------

    def create_repo(
        self,
        owner: str,
        name: str,
        files: dict[str, str] | None = None,
        default_branch: str = "main",
        private: bool = False,
    ) -> Repo:
        """A repository whose default branch holds one commit with ``files``."""
        with self.lock:
            root = self.git.write((), "Initial commit", owner, self.email(owner), files or {})
            repo = Repo(self.next_id(), owner, name, default_branch, private, now(), now())
            self.repos[repo.full_name.lower()] = repo
            self.move_branch(repo, default_branch, root.sha)
            return repo

    def repo(self, full_name: str | None = None) -> Repo:
        """The repository ``owner/name`` (any case); the first one when ``None``."""
        with self.lock:
            key = (full_name or next(iter(self.repos), "")).lower()
            if key not in self.repos:
                raise KeyError(f"no repository {full_name!r}")
            return self.repos[key]

    def fork_repo(self, user: str, repo: str | None = None) -> Repo:
        """``user``'s fork of ``repo``, made on first call with copies of its branches."""
        with self.lock:
            parent = self.repo(repo)
            key = f"{user}/{parent.name}".lower()
            if key not in self.repos:
                self.user(user)
                fork = Repo(
                    self.next_id(),
                    user,
                    parent.name,
                    parent.default_branch,
                    False,
                    now(),
                    now(),
                    parent.full_name,
                )
                self.repos[key] = fork
                for branch, sha in parent.branches.items():
                    self.move_branch(fork, branch, sha)
            return self.repos[key]

    def set_permission(self, login: str, permission: str, repo: str | None = None) -> None:
        """Give ``login`` a role on ``repo``: admin/maintain/write/triage/read/none."""
        if permission not in PERMISSIONS:
            raise ValueError(f"unknown permission {permission!r}")
        with self.lock:
            self.user(login)
            self.repo(repo).permissions[login.lower()] = permission

    def permission(self, login: str, repo: str | None = None) -> str:
        """``login``'s role: the one set, admin for the owner, else read (public) or none."""
        with self.lock:
            target = self.repo(repo)
            if login.lower() == target.owner.lower():
                return target.permissions.get(login.lower(), "admin")
            return target.permissions.get(login.lower(), "none" if target.private else "read")

    def resolve(self, ref: str, repo: str | None = None) -> str | None:
        """A branch (``heads/..``, ``refs/heads/..``) or a full commit sha -> sha."""
        with self.lock:
            branch = ref.removeprefix("refs/").removeprefix("heads/")
            found = self.repo(repo).branches.get(branch)
            return found or (ref if self.git.exists(ref) else None)

    def head(self, branch: str, repo: str | None = None) -> str:
        with self.lock:
            return self.repo(repo).branches[branch]

    def get_commit(self, sha: str) -> Commit:
        return self.git.commit(sha)

    def files_at(self, ref: str, repo: str | None = None) -> dict[str, str]:
        """The snapshot at a branch or sha."""
        sha = self.resolve(ref, repo)
        if sha is None:
            raise KeyError(f"unknown ref {ref!r}")
        return dict(self.git.commit(sha).files)

    def commit(
        self,
        branch: str,
        files: dict[str, str | None],
        message: str = "Update files",
        author: str = "octocat",
        repo: str | None = None,
    ) -> str:
        """One commit on ``branch`` writing ``files`` (``None`` deletes one); its sha."""
        with self.lock:
            target = self.repo(repo)
            parent = (target.branches[branch],)
            made = self.git.write(parent, message, author, self.email(author), files)
            self.move_branch(target, branch, made.sha)
            return made.sha

    def move_branch(self, target: Repo, branch: str, sha: str) -> None:
        """Point ``branch`` at ``sha`` (a push); open pull requests from it follow."""
        with self.lock:
            self.git.set_branches(target.full_name, {branch: sha})
            target.branches[branch], target.pushed_at = sha, now()
            for pr in self.pull_requests.values():
                if (pr.state, pr.head_repo, pr.head) == ("open", target.full_name, branch):
                    pr.head_sha, pr.updated_at = sha, now()

    def create_branch(self, name: str, from_sha: str | None = None, repo: str | None = None) -> str:
        """Branch ``name`` at ``from_sha`` (default: the default branch's head)."""
        with self.lock:
            target = self.repo(repo)
            if name in target.branches:
                raise ValueError(f"branch {name!r} exists")
            self.move_branch(target, name, from_sha or target.branches[target.default_branch])
            return target.branches[name]

    # -- pull requests -------------------------------------------------------------------------

    def open_pull(
        self,
        head: str,
        base: str,
        title: str,
        body: str = "",
        user: str = "octocat",
        fork: bool = False,
        repo: str | None = None,
        head_repo: str | None = None,
    ) -> int:
        """A pull request from ``head`` into ``base``: with ``fork=True`` the head branch is in
        ``user``'s fork (made on demand), or in ``head_repo`` when given."""
        with self.lock:
            target = self.repo(repo)
            source = self.fork_repo(user, target.full_name) if fork else target
            source = self.repo(head_repo) if head_repo else source
            if head not in source.branches or base not in target.branches:
                raise KeyError(f"unknown branch {head!r} or {base!r}")
            number, target.next_number = target.next_number, target.next_number + 1
            self.user(user)
            self.pull_requests[(target.full_name.lower(), number)] = PullRequest(
                target.full_name, number, self.next_id(), title, body, head, source.full_name,
                base, user, source.branches[head], now(), now(),
            )  # fmt: skip
            return number

    def find_pull(self, target: Repo, number: int) -> PullRequest | None:
        return self.pull_requests.get((target.full_name.lower(), number))

    def pull(self, number: int, repo: str | None = None) -> PullRequest:
        with self.lock:
            return self.pull_requests[(self.repo(repo).full_name.lower(), number)]

    def pulls(self, repo: str | None = None) -> list[PullRequest]:
        with self.lock:
            key = self.repo(repo).full_name
            return [pr for pr in self.pull_requests.values() if pr.repo == key]

    def pull_base_sha(self, pr: PullRequest) -> str:
        """The base commit a pull request is compared with (frozen once merged)."""
        return pr.merged_base or self.repo(pr.repo).branches.get(pr.base) or pr.head_sha

    def pull_files(self, pr: PullRequest) -> list[FileChange]:
        """Head against its merge base with the base, as GitHub diffs a pull request."""
        return self.git.diff(self.git.merge_base(pr.head_sha, self.pull_base_sha(pr)), pr.head_sha)

    def mergeable(self, pr: PullRequest) -> bool:
        base = self.repo(pr.repo).branches.get(pr.base)
        return (
            pr.state == "open" and base is not None and bool(self.git.merge_tree(base, pr.head_sha))
        )

    def merge_pull(
        self, pr: PullRequest, method: str, title: str, message: str, by: str
    ) -> str | None:
        """Merge ``pr`` (``merge``: a commit with two parents; ``squash``/``rebase``: one);
        the new base head, ``None`` on a conflict."""
        with self.lock:
            target = self.repo(pr.repo)
            base = target.branches[pr.base]
            tree = self.git.merge_tree(base, pr.head_sha)
            if tree is None:
                return None
            parents = (base, pr.head_sha) if method == "merge" else (base,)
            text = f"{title}\n\n{message}" if message else title
            made = self.git.write(parents, text, by, self.email(by), tree=tree)
            self.move_branch(target, pr.base, made.sha)
            pr.state, pr.merged, pr.merged_at = "closed", True, now()
            pr.closed_at = pr.updated_at = pr.merged_at
            pr.merged_by, pr.merge_commit_sha, pr.merged_base = by, made.sha, base
            return made.sha

    def label(self, target: Repo, name: str) -> tuple[str, int]:
        """The repository's label ``name`` (any case) as ``(name, id)``, made on first use."""
        with self.lock:
            return target.labels.setdefault(name.lower(), (name, self.next_id()))

    # -- comments, reactions, check runs -------------------------------------------------------

    def add_comment(
        self, number: int, body: str, user: str = "octocat", repo: str | None = None
    ) -> Comment:
        """A comment on pull request ``number``."""
        with self.lock:
            pr = self.pull(number, repo)
            self.user(user)
            made = Comment(self.next_id(), pr.repo, number, body, user, now(), now())
            self.all_comments[made.id] = made
            return made

    def comments(self, number: int, repo: str | None = None) -> list[Comment]:
        with self.lock:
            key = (self.repo(repo).full_name, number)
            return [c for c in self.all_comments.values() if (c.repo, c.issue_number) == key]

    def add_reaction(self, comment_id: int, content: str, user: str) -> tuple[Reaction, bool]:
        """``user``'s ``content`` reaction on a comment, and whether it is new."""
        with self.lock:
            for old in self.all_reactions:
                if (old.comment_id, old.content, old.user) == (comment_id, content, user):
                    return old, False
            made = Reaction(self.next_id(), comment_id, content, user, now())
            self.all_reactions.append(made)
            return made, True

    def reactions(self, comment_id: int) -> list[Reaction]:
        with self.lock:
            return [r for r in self.all_reactions if r.comment_id == comment_id]

    def check_runs(self, sha_or_number: str | int, repo: str | None = None) -> list[CheckRun]:
        """Check runs on a commit, or on a pull request's current head (an ``int``)."""
        with self.lock:
            sha = sha_or_number
            if isinstance(sha, int):
                sha = self.pull(sha, repo).head_sha
            key = (self.repo(repo).full_name, sha)
            return [r for r in self.all_check_runs.values() if (r.repo, r.head_sha) == key]

    def add_check_run(self, repo: str, name: str, head_sha: str, **fields: Any) -> CheckRun:
        with self.lock:
            made = CheckRun(self.next_id(), repo, name, head_sha, **fields)
            self.all_check_runs[made.id] = made
            return made

    # -- GitHub Actions ------------------------------------------------------------------------

    def workflows(self, repo: str | None = None) -> list[Workflow]:
        """The ``.github/workflows/*.yml`` (or ``.yaml``) files of the default branch."""
        with self.lock:
            target = self.repo(repo)
            files = self.git.commit(target.branches[target.default_branch]).files
            found = []
            for path, text in sorted(files.items()):
                rest = path.removeprefix(WORKFLOWS)
                if (
                    path.startswith(WORKFLOWS)
                    and "/" not in rest
                    and rest.endswith((".yml", ".yaml"))
                ):
                    key = (target.full_name, path)
                    ident = self.workflow_ids.setdefault(key, self.next_id())
                    found.append(
                        Workflow(
                            ident,
                            target.full_name,
                            path,
                            **parse_workflow(path, text),
                            created_at=target.created_at,
                        )
                    )
            return found

    def workflow(self, id_or_file_name: str | int, repo: str | None = None) -> Workflow | None:
        """A workflow by id or file name."""
        wanted = str(id_or_file_name)
        return next((w for w in self.workflows(repo) if wanted in (str(w.id), w.file_name)), None)

    def create_run(
        self,
        workflow: Workflow | str,
        ref: str,
        event: str = "push",
        inputs: dict[str, Any] | None = None,
        actor: str | None = None,
        repo: str | None = None,
    ) -> WorkflowRun:
        """A queued run of ``workflow`` (or its file name) at a branch or sha. Its title is the
        workflow's ``run-name`` as the file at ``ref`` has it, ``${{ }}`` filled in."""
        with self.lock:
            target = self.repo(repo)
            found = (
                self.workflow(workflow, target.full_name) if isinstance(workflow, str) else workflow
            )
            sha = self.resolve(ref, target.full_name)
            if found is None or sha is None:
                raise KeyError(f"no workflow {workflow!r} or ref {ref!r}")
            text = self.git.commit(sha).files.get(found.path)
            spec = parse_workflow(found.path, text) if text is not None else vars(found)
            values = {
                k: v["default"]
                for k, v in spec["inputs"].items()
                if isinstance(v, dict) and "default" in v
            }
            values.update(inputs or {})
            branch = ref.removeprefix("refs/heads/")
            head_branch = branch if branch in target.branches else None
            actor = actor or self.bot_login
            self.user(actor)
            context = {f"inputs.{k}": v for k, v in values.items()}
            context.update(
                {
                    "github.ref_name": head_branch or sha,
                    "github.actor": actor,
                    "github.event_name": event,
                    "github.sha": sha,
                }
            )
            title = (
                render_expression(str(spec["run_name"]), context)
                if spec["run_name"]
                else spec["name"]
            )
            number = 1 + sum(1 for r in self.all_runs.values() if r.workflow_id == found.id)
            run = WorkflowRun(
                self.next_id(), target.full_name, found.id, spec["name"], title, event, sha,
                head_branch, found.path, number, actor, now(), now(), self.next_id(),
            )  # fmt: skip
            self.all_runs[run.id] = run
            return run

    def dispatch(self, workflow: Workflow, ref: str, inputs: dict[str, Any]) -> WorkflowRun:
        """What ``POST .../dispatches`` does: a queued ``workflow_dispatch`` run, recorded."""
        with self.lock:
            run = self.create_run(workflow, ref, "workflow_dispatch", inputs, repo=workflow.repo)
            self.all_dispatches.append(
                Dispatch(run.repo, workflow.file_name, ref, dict(inputs), run.id)
            )
            return run

    def dispatches(self, repo: str | None = None) -> list[Dispatch]:
        with self.lock:
            key = self.repo(repo).full_name
            return [d for d in self.all_dispatches if d.repo == key]

    def runs(self, repo: str | None = None) -> list[WorkflowRun]:
        """Runs, oldest first."""
        with self.lock:
            key = self.repo(repo).full_name
            return [r for r in self.all_runs.values() if r.repo == key]

    def run(self, run_id: int) -> WorkflowRun:
        return self.all_runs[run_id]

    def start_run(self, run_id: int) -> WorkflowRun:
        with self.lock:
            run = self.all_runs[run_id]
            run.status, run.run_started_at, run.updated_at = "in_progress", now(), now()
            return run

    def complete_run(
        self,
        run_id: int,
        conclusion: str = "success",
        artifacts: dict[str, bytes | dict[str, bytes]] | None = None,
    ) -> WorkflowRun:
        """Finish a run with ``conclusion``, uploading ``artifacts``."""
        with self.lock:
            run = self.all_runs[run_id]
            run.status, run.conclusion, run.updated_at = "completed", conclusion, now()
            run.run_started_at = run.run_started_at or run.updated_at
            for name, content in (artifacts or {}).items():
                files = dict(content) if isinstance(content, dict) else {name: content}
                made = Artifact(self.next_id(), run.id, run.repo, name, files, now())
                self.all_artifacts[made.id] = made
            return run

    def artifacts(self, run_id: int) -> list[Artifact]:
        with self.lock:
            return [a for a in self.all_artifacts.values() if a.run_id == run_id]

    def job_check_run(self, run_id: int, name: str, conclusion: str, summary: str = "") -> CheckRun:
        """A completed check run of a job of run ``run_id``, as GitHub Actions posts one: by
        app ``github-actions``, in the run's check suite, on its head commit."""
        with self.lock:
            run = self.all_runs[run_id]
            return self.add_check_run(
                run.repo, name, run.head_sha, status="completed", conclusion=conclusion,
                title=name, summary=summary, started_at=now(), completed_at=now(),
                check_suite_id=run.check_suite_id,
            )  # fmt: skip
