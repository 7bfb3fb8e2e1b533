"""What the fake GitHub knows, and the Python API tests arrange and inspect it with.

``FakeGitHub`` is a ``FakeState``; ``repo=None`` means the first repository made. Git is a real
bare repository (gitstore.py). The records are dataclasses whose fields are named as GitHub
names them (render.py copies those into bodies), changed under ``lock``.

GitHub Actions runs nothing: the workflows are the default branch's ``.github/workflows/*.yml``,
a dispatch records a queued run (``dispatches()``), and the test plays the runner with
``create_run``, ``start_run``, ``complete_run`` (``artifacts``: name -> bytes, zipped as one
file of that name, or name -> ``{member: bytes}``) and ``job_check_run``.
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

ROLES = ("none", "read", "triage", "write", "maintain", "admin")


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    default_branch: str
    created_at: datetime = field(default_factory=now)
    fork_of: str | None = None
    branches: dict[str, str] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
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
    """A branch of ``head_repo``."""
    head_repo: str
    base: str
    user: str
    head_sha: str
    """Follows the head branch while the pull request is open."""
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
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
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class Reaction:
    id: int
    comment_id: int
    content: str
    user: str
    created_at: datetime = field(default_factory=now)


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
    started_at: datetime | None = None
    completed_at: datetime | None = None
    check_suite_id: int = 0
    """A job's check run is in its workflow run's suite (app ``github-actions``); 0: the App's."""


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

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class Dispatch:
    repo: str
    workflow: str
    """The workflow's file name."""
    ref: str
    inputs: dict[str, Any]
    run_id: int


@dataclass
class WorkflowRun:
    id: int
    repo: str
    workflow_id: int
    name: str
    path: str
    display_title: str
    event: str
    head_sha: str
    head_branch: str | None
    run_number: int
    actor: str
    check_suite_id: int
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)
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
    """The members of the zip served on download."""
    created_at: datetime = field(default_factory=now)


@dataclass
class RequestRecord:
    """One request the server answered (``template``: ``None`` when unknown)."""

    method: str
    path: str
    query: str
    status: int
    template: str | None
    request_body: Any
    response_body: Any
    headers: dict[str, str]
    """Lower-case names."""
    response_headers: dict[str, str]


@dataclass
class Violation:
    """A request the real GitHub would refuse, or that the fake does not know."""

    method: str
    path: str
    status: int
    reason: str


@cache
def parse_workflow(path: str, text: str) -> tuple[str, str | None, dict[str, Any], bool]:
    """A workflow file's name, ``run-name``, dispatch inputs and whether it is dispatchable."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        return path, None, {}, False
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    dispatch = on.get("workflow_dispatch", False) if isinstance(on, dict) else False
    if isinstance(on, str | list):
        dispatch = {} if "workflow_dispatch" in on else False
    inputs = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    inputs = {k: v or {} for k, v in inputs.items()} if isinstance(inputs, dict) else {}
    return str(doc.get("name") or path), doc.get("run-name"), inputs, dispatch is not False


def render_expression(template: str, context: dict[str, Any]) -> str:
    """``${{ inputs.x }}`` filled from dotted names (``inputs.x``, ``github.ref_name``); an
    unknown expression renders empty, as on GitHub."""

    def one(match: re.Match[str]) -> str:
        value = context.get(match.group(1).replace("github.event.inputs.", "inputs."))
        return ("true" if value else "false") if isinstance(value, bool) else str(value or "")

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, template)


class FakeState:
    """Everything the fake GitHub knows (see the module docstring)."""

    def __init__(self, *, app_id: int, app_slug: str, installation_id: int) -> None:
        self.lock = threading.RLock()
        self.app_id, self.app_slug, self.installation_id = app_id, app_slug, installation_id
        self.git = GitStore()
        self.tokens: dict[str, datetime] = {}
        self.users: dict[str, int] = {}
        """Lower-case login -> id."""
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
        self.user_id(self.bot_login)

    def next_id(self) -> int:
        return next(self._ids)

    @property
    def bot_login(self) -> str:
        """The App's user, the author of all the bot writes (``attune[bot]``)."""
        return f"{self.app_slug}[bot]"

    def issue_token(self) -> tuple[str, datetime]:
        """A new installation token and its expiry (tests may skip the JWT exchange)."""
        with self.lock:
            token = "ghs_" + re.sub(r"[-_]", "x", secrets.token_urlsafe(27))
            self.tokens[token] = now() + timedelta(hours=1)
            return token, self.tokens[token]

    def token_valid(self, token: str) -> bool:
        return self.tokens.get(token, now()) > now()

    def sign(self, text: str) -> str:
        """An unguessable signature of ``text`` (artifact download URLs)."""
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()[:32]

    def user_id(self, login: str) -> int:
        """The id of user ``login``, who exists from the first mention on."""
        with self.lock:
            return self.users.setdefault(login.lower(), len(self.users) + 1)

    # -- repositories and git ------------------------------------------------------------------

    def create_repo(self, owner: str, name: str, files: dict[str, str] | None = None) -> Repo:
        """A public repository whose ``main`` holds one commit of ``files``."""
        with self.lock:
            self.user_id(owner)
            repo = self.repos[f"{owner}/{name}".lower()] = Repo(self.next_id(), owner, name, "main")
            self.move_branch(repo, "main", self.git.write((), "Initial commit", owner, files).sha)
            return repo

    def repo(self, full_name: str | None = None) -> Repo:
        """The repository ``owner/name`` (any case), the first one made when ``None``."""
        return self.repos[(full_name or next(iter(self.repos))).lower()]

    def fork_repo(self, user: str, repo: str | None = None) -> Repo:
        """``user``'s fork of ``repo``, made with copies of its branches on the first call."""
        with self.lock:
            parent = self.repo(repo)
            key = f"{user}/{parent.name}".lower()
            if key not in self.repos:
                self.user_id(user)
                fork = Repo(self.next_id(), user, parent.name, parent.default_branch)
                self.repos[key], fork.fork_of = fork, parent.full_name
                for branch, sha in parent.branches.items():
                    self.move_branch(fork, branch, sha)
            return self.repos[key]

    def set_permission(self, login: str, role: str, repo: str | None = None) -> None:
        """Give ``login`` a role on ``repo``: admin/maintain/write/triage/read/none."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}")
        self.user_id(login)
        self.repo(repo).roles[login.lower()] = role

    def permission(self, login: str, repo: str | None = None) -> str:
        """``login``'s role: the one set, else admin for the owner, read for anyone else."""
        target = self.repo(repo)
        owner = login.lower() == target.owner.lower()
        return target.roles.get(login.lower(), "admin" if owner else "read")

    def resolve(self, ref: str, repo: str | None = None) -> str | None:
        """A branch (or ``heads/<branch>``, ``refs/heads/<branch>``) or a full sha -> sha."""
        branch = ref.removeprefix("refs/").removeprefix("heads/")
        found = self.repo(repo).branches.get(branch)
        return found or (ref if self.git.exists(ref) else None)

    def head(self, branch: str, repo: str | None = None) -> str:
        return self.repo(repo).branches[branch]

    def get_commit(self, sha: str) -> Commit:
        return self.git.commit(sha)

    def files_at(self, ref: str, repo: str | None = None) -> dict[str, str]:
        """The files at a branch or commit."""
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
            self.user_id(author)
            made = self.git.write((target.branches[branch],), message, author, files)
            self.move_branch(target, branch, made.sha)
            return made.sha

    def move_branch(self, target: Repo, branch: str, sha: str) -> None:
        """Point ``branch`` at ``sha``, as a push does; open pull requests from it follow."""
        with self.lock:
            self.git.set_branch(target.full_name, branch, sha)
            target.branches[branch] = sha
            for pr in self.pull_requests.values():
                if (pr.state, pr.head_repo, pr.head) == ("open", target.full_name, branch):
                    pr.head_sha, pr.updated_at = sha, now()

    def create_branch(self, name: str, repo: str | None = None) -> str:
        """Branch ``name`` at the default branch's head."""
        target = self.repo(repo)
        self.move_branch(target, name, target.branches[target.default_branch])
        return target.branches[name]

    # -- pull requests, comments, reactions, check runs ----------------------------------------

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
        """A pull request from ``head`` into ``base``; the head branch is in ``head_repo``,
        else in ``user``'s fork with ``fork``, else in the repository."""
        with self.lock:
            target = self.repo(repo)
            source = self.repo(head_repo or (f"{user}/{target.name}" if fork else repo))
            self.user_id(user)
            number, target.next_number = target.next_number, target.next_number + 1
            values = (title, body, head, source.full_name, base, user, source.branches[head])
            made = PullRequest(target.full_name, number, self.next_id(), *values)
            self.pull_requests[(target.full_name.lower(), number)] = made
            return number

    def pull(self, number: int, repo: str | None = None) -> PullRequest:
        return self.pull_requests[(self.repo(repo).full_name.lower(), number)]

    def pulls(self, repo: str | None = None) -> list[PullRequest]:
        key = self.repo(repo).full_name
        return [pr for pr in list(self.pull_requests.values()) if pr.repo == key]

    def pull_base_sha(self, pr: PullRequest) -> str:
        """The base commit a pull request is compared with (frozen once merged)."""
        return pr.merged_base or self.repo(pr.repo).branches.get(pr.base) or pr.head_sha

    def pull_files(self, pr: PullRequest) -> list[FileChange]:
        """The head against its merge base with the base, as GitHub diffs a pull request."""
        since = self.git.merge_base(pr.head_sha, self.pull_base_sha(pr))
        return self.git.diff(since, pr.head_sha)

    def mergeable(self, pr: PullRequest) -> bool:
        base = self.repo(pr.repo).branches.get(pr.base)
        return pr.state == "open" and bool(base and self.git.merge_tree(base, pr.head_sha))

    def merge_pull(self, pr: PullRequest, method: str, message: str, by: str) -> str | None:
        """Merge ``pr`` (``merge``: a commit of two parents; ``squash``, ``rebase``: of one);
        the new base head, ``None`` on a conflict."""
        with self.lock:
            target = self.repo(pr.repo)
            base = target.branches[pr.base]
            tree = self.git.merge_tree(base, pr.head_sha)
            if tree is None:
                return None
            parents = (base, pr.head_sha) if method == "merge" else (base,)
            made = self.git.write(parents, message, by, tree=tree)
            self.move_branch(target, pr.base, made.sha)
            pr.state, pr.merged, pr.merged_at = "closed", True, now()
            pr.closed_at, pr.merged_by, pr.merged_base = pr.merged_at, by, base
            pr.merge_commit_sha = made.sha
            return made.sha

    def label(self, target: Repo, name: str) -> tuple[str, int]:
        """The repository's label ``name`` (any case) as ``(name, id)``, made on first use."""
        with self.lock:
            return target.labels.setdefault(name.lower(), (name, self.next_id()))

    def add_comment(self, number: int, body: str, user: str = "octocat") -> Comment:
        """A comment on pull request ``number`` of the first repository."""
        return self.comment_on(self.pull(number), body, user)

    def comment_on(self, pr: PullRequest, body: str, user: str) -> Comment:
        with self.lock:
            self.user_id(user)
            made = Comment(self.next_id(), pr.repo, pr.number, body, user)
            self.all_comments[made.id] = made
            return made

    def comments(self, number: int, repo: str | None = None) -> list[Comment]:
        key = (self.repo(repo).full_name, number)
        return [c for c in list(self.all_comments.values()) if (c.repo, c.issue_number) == key]

    def add_reaction(self, comment_id: int, content: str, user: str) -> tuple[Reaction, bool]:
        """``user``'s ``content`` reaction to a comment, and whether it is new."""
        with self.lock:
            for old in self.reactions(comment_id):
                if (old.content, old.user) == (content, user):
                    return old, False
            self.all_reactions.append(Reaction(self.next_id(), comment_id, content, user))
            return self.all_reactions[-1], True

    def reactions(self, comment_id: int) -> list[Reaction]:
        return [r for r in list(self.all_reactions) if r.comment_id == comment_id]

    def add_check_run(self, repo: str, name: str, head_sha: str, **fields: Any) -> CheckRun:
        with self.lock:
            made = CheckRun(self.next_id(), repo, name, head_sha, **fields)
            self.all_check_runs[made.id] = made
            return made

    def check_runs(self, sha_or_number: str | int, repo: str | None = None) -> list[CheckRun]:
        """The check runs on a commit, or on a pull request's head (an ``int``)."""
        sha = sha_or_number
        if isinstance(sha, int):
            sha = self.pull(sha, repo).head_sha
        key = (self.repo(repo).full_name, sha)
        return [r for r in list(self.all_check_runs.values()) if (r.repo, r.head_sha) == key]

    # -- GitHub Actions ------------------------------------------------------------------------

    def workflows(self, repo: str | None = None) -> list[Workflow]:
        """The ``.github/workflows/*.yml`` (or ``.yaml``) files of the default branch."""
        with self.lock:
            target, found = self.repo(repo), []
            for path, text in sorted(self.files_at(target.default_branch, repo).items()):
                if re.fullmatch(r"\.github/workflows/[^/]+\.ya?ml", path):
                    key = (target.full_name, path)
                    ident = self.workflow_ids.setdefault(key, self.next_id())
                    found.append(Workflow(ident, key[0], path, *parse_workflow(path, text)))
            return found

    def workflow(self, id_or_file_name: str | int, repo: str | None = None) -> Workflow | None:
        wanted = str(id_or_file_name)
        return next((w for w in self.workflows(repo) if wanted in (str(w.id), w.file_name)), None)

    def create_run(
        self,
        workflow: str | Workflow,
        ref: str,
        event: str = "push",
        inputs: dict[str, Any] | None = None,
        actor: str | None = None,
        repo: str | None = None,
    ) -> WorkflowRun:
        """A queued run of a workflow (or of its file name) at a branch or sha. Its title is
        the ``run-name`` of the workflow file at ``ref``, its expressions filled in."""
        with self.lock:
            target = self.repo(repo)
            found = self.workflow(workflow, repo) if isinstance(workflow, str) else workflow
            sha = self.resolve(ref, repo)
            if found is None or sha is None:
                raise KeyError(f"no workflow {workflow!r} or ref {ref!r}")
            text = self.git.commit(sha).files.get(found.path)
            spec = (found.name, found.run_name, found.inputs, True)
            name, run_name, declared, _ = parse_workflow(found.path, text) if text else spec
            values = {k: v["default"] for k, v in declared.items() if "default" in v}
            branch = ref.removeprefix("refs/heads/")
            head_branch = branch if branch in target.branches else None
            actor = actor or self.bot_login
            self.user_id(actor)
            context = {f"inputs.{k}": v for k, v in (values | (inputs or {})).items()}
            context |= {"github.ref_name": head_branch or sha, "github.actor": actor}
            title = render_expression(str(run_name), context) if run_name else name
            number = 1 + sum(run.workflow_id == found.id for run in self.all_runs.values())
            details = (name, found.path, title, event, sha, head_branch, number, actor)
            run = WorkflowRun(self.next_id(), target.full_name, found.id, *details, self.next_id())
            self.all_runs[run.id] = run
            return run

    def dispatch(self, workflow: Workflow, ref: str, inputs: dict[str, Any]) -> WorkflowRun:
        """What ``POST .../dispatches`` does: a queued ``workflow_dispatch`` run, recorded."""
        with self.lock:
            run = self.create_run(workflow, ref, "workflow_dispatch", inputs, repo=workflow.repo)
            self.all_dispatches.append(Dispatch(run.repo, workflow.file_name, ref, inputs, run.id))
            return run

    def dispatches(self, repo: str | None = None) -> list[Dispatch]:
        return [d for d in list(self.all_dispatches) if d.repo == self.repo(repo).full_name]

    def runs(self, repo: str | None = None) -> list[WorkflowRun]:
        """Runs, oldest first."""
        return [r for r in list(self.all_runs.values()) if r.repo == self.repo(repo).full_name]

    def run(self, run_id: int) -> WorkflowRun:
        return self.all_runs[run_id]

    def start_run(self, run_id: int) -> WorkflowRun:
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
                made = Artifact(self.next_id(), run.id, run.repo, name, files)
                self.all_artifacts[made.id] = made
            return run

    def job_check_run(self, run_id: int, name: str, conclusion: str, summary: str = "") -> CheckRun:
        """A completed check run of a job of run ``run_id``, as GitHub Actions posts one: by
        app ``github-actions``, in the run's check suite, on its head commit."""
        run, stamp = self.all_runs[run_id], now()
        fields: dict[str, Any] = {"status": "completed", "conclusion": conclusion, "title": name}
        fields |= {"summary": summary, "started_at": stamp, "completed_at": stamp}
        fields["check_suite_id"] = run.check_suite_id
        return self.add_check_run(run.repo, name, run.head_sha, **fields)
