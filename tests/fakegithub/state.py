"""What the fake GitHub knows, and the Python API tests arrange and inspect it with.

``FakeGitHub`` is a ``FakeState``; ``repo=None`` means the first repository made. Git is a real
bare repository (gitstore.py). The rest is ``Record`` objects, changed under ``lock``, whose
fields are named as GitHub names them (render.py copies them into the bodies by name):

* repository: id owner name full_name default_branch created_at fork_of branches (name -> sha)
  roles (lower-case login -> role) labels (lower-case name -> (name, id)) next_number;
* pull: repo number id title body user head (a branch of head_repo) head_repo head_sha (it
  follows the branch while open) base state merged merged_by merged_at merge_commit_sha
  merged_base (the base head it was merged onto) closed_at labels fork created_at updated_at;
* comment: id repo issue_number body user created_at updated_at; reaction: id comment_id
  content user; check run: id repo name head_sha status conclusion title summary text
  started_at completed_at check_suite_id (a workflow job's: its run's; 0: the App's);
* workflow: id repo path file_name name run_name inputs (of ``workflow_dispatch``)
  dispatchable; dispatch: repo workflow (its file name) ref inputs run_id;
* run: id repo workflow_id name path display_title event head_sha head_branch run_number actor
  check_suite_id status conclusion created_at updated_at run_started_at;
* artifact: id run_id repo name files (the zip's members) created_at;
* ``requests``: method path status headers response_body response_headers; ``violations``
  (requests GitHub would refuse, or the fake does not know): method path status reason.

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
from datetime import UTC, datetime, timedelta
from functools import cache
from types import SimpleNamespace
from typing import Any

import yaml

from .gitstore import Commit, FileChange, GitStore

ROLES = ("none", "read", "triage", "write", "maintain", "admin")


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


class Record(SimpleNamespace):
    """A repository, pull request, comment... (the module docstring lists their fields)."""


@cache
def parse_workflow(path: str, text: str) -> Record:
    """A workflow file's ``name``, ``run_name``, ``inputs`` and whether it is ``dispatchable``."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    doc = doc if isinstance(doc, dict) else {}
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    dispatch = on.get("workflow_dispatch", False) if isinstance(on, dict) else False
    if isinstance(on, str | list):
        dispatch = {} if "workflow_dispatch" in on else False
    inputs = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    inputs = {k: v or {} for k, v in inputs.items()} if isinstance(inputs, dict) else {}
    name, run_name = str(doc.get("name") or path), doc.get("run-name")
    return Record(name=name, run_name=run_name, inputs=inputs, dispatchable=dispatch is not False)


def render_expression(template: str, context: dict[str, Any]) -> str:
    """``${{ inputs.x }}`` filled from dotted names (``inputs.x``, ``github.ref_name``); an
    unknown expression renders empty, as on GitHub."""

    def one(match: re.Match[str]) -> str:
        value = context.get(match.group(1).replace("github.event.inputs.", "inputs."))
        return ("true" if value else "false") if isinstance(value, bool) else str(value or "")

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, template)


class FakeState:
    """Everything the fake GitHub knows (see the module docstring)."""

    app_id, app_slug, installation_id = 424242, "attune", 111

    def __init__(self) -> None:
        self.lock, self.git = threading.RLock(), GitStore()
        self.tokens: dict[str, datetime] = {}
        self.users: dict[str, int] = {}
        """Lower-case login -> id."""
        self.repos: dict[str, Record] = {}
        """Lower-case full name -> repository."""
        self.workflow_ids: dict[str, int] = {}
        self.records: dict[int, Record] = {}
        """Id -> pull request, comment, reaction, check run, run, artifact or dispatch."""
        self.requests: list[Record] = []
        self.violations: list[Record] = []
        self.response_problems: list[str] = []
        self._ids, self._secret = itertools.count(1_000_001), secrets.token_bytes(16)
        self.user_id(self.bot_login)

    def add(self, kind: str, **fields: Any) -> Record:
        """A new record of ``kind`` with a fresh ``id`` and ``created_at``."""
        made = Record(id=next(self._ids), kind=kind, created_at=now(), **fields)
        self.records[made.id] = made
        return made

    def find(self, kind: str, **fields: Any) -> list[Record]:
        """The records of ``kind`` with these field values, oldest first."""
        wanted = {"kind": kind, **fields}.items()
        return [r for r in list(self.records.values()) if wanted <= vars(r).items()]

    @property
    def bot_login(self) -> str:
        """The App's user, the author of all the bot writes (``attune[bot]``)."""
        return f"{self.app_slug}[bot]"

    def issue_token(self) -> tuple[str, datetime]:
        """A new installation token and its expiry (tests may skip the JWT exchange)."""
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

    def create_repo(self, owner: str, name: str, files: dict[str, str] | None = None) -> Record:
        """A public repository whose ``main`` holds one commit of ``files``."""
        root = self.git.write((), "Initial commit", owner, files)
        return self._add_repo(owner, name, "main", {"main": root.sha})

    def _add_repo(
        self, owner: str, name: str, default: str, branches: Any, fork: Any = None
    ) -> Record:
        self.user_id(owner)
        repo = Record(id=next(self._ids), owner=owner, name=name, full_name=f"{owner}/{name}")
        repo.default_branch, repo.fork_of, repo.created_at = default, fork, now()
        repo.branches, repo.roles, repo.labels, repo.next_number = {}, {}, {}, 1
        self.repos[repo.full_name.lower()] = repo
        for branch, sha in branches.items():
            self.move_branch(repo, branch, sha)
        return repo

    def repo(self, full_name: str | None = None) -> Record:
        """The repository ``owner/name`` (any case), the first one made when ``None``."""
        return self.repos[(full_name or next(iter(self.repos))).lower()]

    def fork_repo(self, user: str, repo: str | None = None) -> Record:
        """``user``'s fork of ``repo``, made with copies of its branches on the first call."""
        parent = self.repo(repo)
        if f"{user}/{parent.name}".lower() not in self.repos:
            branches, default = parent.branches, parent.default_branch
            self._add_repo(user, parent.name, default, branches, parent.full_name)
        return self.repo(f"{user}/{parent.name}")

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
        return str(target.roles.get(login.lower(), "admin" if owner else "read"))

    def resolve(self, ref: str, repo: str | None = None) -> str | None:
        """A branch (or ``heads/<branch>``, ``refs/heads/<branch>``) or a full sha -> sha."""
        branch = self.repo(repo).branches.get(ref.removeprefix("refs/").removeprefix("heads/"))
        return str(branch) if branch else (ref if self.git.exists(ref) else None)

    def head(self, branch: str, repo: str | None = None) -> str:
        return str(self.repo(repo).branches[branch])

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

    def move_branch(self, target: Record, branch: str, sha: str) -> None:
        """Point ``branch`` at ``sha``, as a push does; open pull requests from it follow."""
        with self.lock:
            self.git.set_branch(target.full_name, branch, sha)
            target.branches[branch] = sha
            for pr in self.find("pull", state="open", head_repo=target.full_name, head=branch):
                pr.head_sha, pr.updated_at = sha, now()

    def create_branch(self, name: str, repo: str | None = None) -> str:
        """Branch ``name`` at the default branch's head."""
        target = self.repo(repo)
        self.move_branch(target, name, target.branches[target.default_branch])
        return str(target.branches[name])

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
        """A pull request from branch ``head`` into ``base``; the branch is ``head_repo``'s,
        else (``fork``) ``user``'s fork's, else the repository's."""
        with self.lock:
            target = self.repo(repo)
            source = self.repo(head_repo or (f"{user}/{target.name}" if fork else repo))
            self.user_id(user)
            number, target.next_number = target.next_number, target.next_number + 1
            pr = self.add("pull", repo=target.full_name, number=number, title=title, body=body)
            pr.user, pr.head, pr.head_repo = user, head, source.full_name
            pr.head_sha, pr.base, pr.state, pr.merged = source.branches[head], base, "open", False
            pr.labels, pr.fork = [], source is not target
            pr.merged_by = pr.merged_at = pr.closed_at = pr.merged_base = pr.merge_commit_sha = None
            pr.updated_at = pr.created_at
            return int(number)

    def pull(self, number: int, repo: str | None = None) -> Record:
        return self.find("pull", repo=self.repo(repo).full_name, number=number)[0]

    def pulls(self, repo: str | None = None) -> list[Record]:
        return self.find("pull", repo=self.repo(repo).full_name)

    def pull_base_sha(self, pr: Record) -> str:
        """The base commit a pull request is compared with (frozen once merged)."""
        return str(pr.merged_base or self.repo(pr.repo).branches.get(pr.base) or pr.head_sha)

    def pull_files(self, pr: Record) -> list[FileChange]:
        """The head against its merge base with the base, as GitHub diffs a pull request."""
        return self.git.diff(self.git.merge_base(pr.head_sha, self.pull_base_sha(pr)), pr.head_sha)

    def mergeable(self, pr: Record) -> bool:
        base = self.repo(pr.repo).branches.get(pr.base)
        return pr.state == "open" and bool(base and self.git.merge_tree(base, pr.head_sha))

    def merge_pull(self, pr: Record, method: str, message: str, by: str) -> str:
        """Merge ``pr`` (``merge``: a commit of two parents; ``squash``, ``rebase``: of one);
        the new base head. Raises ``ValueError`` on a conflict."""
        with self.lock:
            target = self.repo(pr.repo)
            base = target.branches[pr.base]
            tree = self.git.merge_tree(base, pr.head_sha)
            if tree is None:
                raise ValueError(f"pull request #{pr.number} does not merge")
            parents = (base, pr.head_sha) if method == "merge" else (base,)
            made = self.git.write(parents, message, by, tree=tree)
            self.move_branch(target, pr.base, made.sha)
            pr.state, pr.merged, pr.merged_at, pr.merged_by = "closed", True, now(), by
            pr.closed_at, pr.merged_base, pr.merge_commit_sha = pr.merged_at, base, made.sha
            return made.sha

    def label(self, target: Record, name: str) -> tuple[str, int]:
        """The repository's label ``name`` (any case) as ``(name, id)``, made on first use."""
        with self.lock:
            made: tuple[str, int] = target.labels.setdefault(name.lower(), (name, next(self._ids)))
            return made

    def add_comment(
        self, number: int, body: str, user: str = "octocat", repo: str | None = None
    ) -> Record:
        """A comment by ``user`` on pull request ``number``."""
        self.user_id(user)
        pr = self.pull(number, repo)
        made = self.add("comment", repo=pr.repo, issue_number=number, body=body, user=user)
        made.updated_at = made.created_at
        return made

    def comments(self, number: int, repo: str | None = None) -> list[Record]:
        return self.find("comment", repo=self.repo(repo).full_name, issue_number=number)

    def reactions(self, comment_id: int) -> list[Record]:
        return self.find("reaction", comment_id=comment_id)

    def check_runs(self, sha_or_number: str | int, repo: str | None = None) -> list[Record]:
        """The check runs on a commit, or on a pull request's head (an ``int``)."""
        sha = sha_or_number
        if isinstance(sha, int):
            sha = self.pull(sha, repo).head_sha
        return self.find("check run", repo=self.repo(repo).full_name, head_sha=sha)

    def add_check_run(self, repo: str, name: str, head_sha: str, **fields: Any) -> Record:
        """A queued check run; ``fields`` overrides."""
        made = {"status": "queued", "check_suite_id": 0, "started_at": now(), "completed_at": None}
        made |= dict.fromkeys(("conclusion", "title", "summary", "text")) | fields
        return self.add("check run", repo=repo, name=name, head_sha=head_sha, **made)

    # -- GitHub Actions ------------------------------------------------------------------------

    def workflows(self, repo: str | None = None) -> list[Record]:
        """The ``.github/workflows/*.yml`` (or ``.yaml``) files of the default branch."""
        target, found = self.repo(repo), []
        for path, text in sorted(self.files_at(target.default_branch, repo).items()):
            if re.fullmatch(r"\.github/workflows/[^/]+\.ya?ml", path):
                key = f"{target.full_name}/{path}"
                ident = self.workflow_ids.setdefault(key, 2_000_001 + len(self.workflow_ids))
                name = path.rsplit("/", 1)[1]
                made = Record(id=ident, repo=target.full_name, path=path, file_name=name)
                found.append(Record(**vars(made), **vars(parse_workflow(path, text))))
        return found

    def workflow(self, id_or_file_name: str | int, repo: str | None = None) -> Record | None:
        wanted = str(id_or_file_name)
        return next((w for w in self.workflows(repo) if wanted in (str(w.id), w.file_name)), None)

    def create_run(
        self,
        workflow: str | Record,
        ref: str,
        event: str = "push",
        inputs: dict[str, Any] | None = None,
        actor: str | None = None,
        repo: str | None = None,
    ) -> Record:
        """A queued run of a workflow (or of its file name) at a branch or sha. Its title is
        the ``run-name`` of the workflow file at ``ref``, its expressions filled in."""
        with self.lock:
            target = self.repo(repo)
            found = self.workflow(workflow, repo) if isinstance(workflow, str) else workflow
            sha = self.resolve(ref, repo)
            if found is None or sha is None:
                raise KeyError(f"no workflow {workflow!r} or ref {ref!r}")
            text = self.git.commit(sha).files.get(found.path)
            spec = parse_workflow(found.path, text) if text else found
            values = {k: v["default"] for k, v in spec.inputs.items() if "default" in v}
            branch = ref.removeprefix("refs/heads/")
            head_branch = branch if branch in target.branches else None
            actor = actor or self.bot_login
            self.user_id(actor)
            context = {f"inputs.{k}": v for k, v in (values | (inputs or {})).items()}
            context |= {"github.ref_name": head_branch or sha, "github.actor": actor}
            title = render_expression(spec.run_name, context) if spec.run_name else spec.name
            number = 1 + len(self.find("run", workflow_id=found.id))
            run = self.add("run", repo=target.full_name, workflow_id=found.id, event=event)
            run.name, run.path, run.display_title, run.actor = spec.name, found.path, title, actor
            run.head_sha, run.head_branch, run.run_number = sha, head_branch, number
            run.status, run.conclusion, run.run_started_at = "queued", None, None
            run.check_suite_id, run.updated_at = next(self._ids), run.created_at
            return run

    def dispatches(self, repo: str | None = None) -> list[Record]:
        return self.find("dispatch", repo=self.repo(repo).full_name)

    def runs(self, repo: str | None = None) -> list[Record]:
        return self.find("run", repo=self.repo(repo).full_name)

    def run(self, run_id: int) -> Record:
        return self.records[run_id]

    def start_run(self, run_id: int) -> Record:
        run = self.records[run_id]
        run.status, run.run_started_at, run.updated_at = "in_progress", now(), now()
        return run

    def complete_run(
        self,
        run_id: int,
        conclusion: str = "success",
        artifacts: dict[str, bytes | dict[str, bytes]] | None = None,
    ) -> Record:
        """Finish a run with ``conclusion``, uploading ``artifacts``."""
        run = self.records[run_id]
        run.status, run.conclusion, run.updated_at = "completed", conclusion, now()
        run.run_started_at = run.run_started_at or run.updated_at
        for name, content in (artifacts or {}).items():
            files = dict(content) if isinstance(content, dict) else {name: content}
            self.add("artifact", run_id=run.id, repo=run.repo, name=name, files=files)
        return run

    def job_check_run(self, run_id: int, name: str, conclusion: str, summary: str = "") -> Record:
        """A completed check run of a job of run ``run_id``, as GitHub Actions posts one: by
        app ``github-actions``, in the run's check suite, on its head commit."""
        run = self.records[run_id]
        done = {"status": "completed", "conclusion": conclusion, "completed_at": now()}
        fields = done | {"title": name, "summary": summary, "check_suite_id": run.check_suite_id}
        return self.add_check_run(run.repo, name, run.head_sha, **fields)
