"""What the fake GitHub knows, the Python API tests arrange and inspect it with, and its bodies.

``repo=None`` means the first repository made. Git is a real bare repository (gitstore.py); the
rest is ``Record`` objects changed under ``lock``, their fields named as GitHub names them. A
pull request's ``head`` is a branch of ``head_repo``, ``head_sha`` follows it while open. GitHub
Actions runs nothing: the workflows are the default branch's ``.github/workflows/*.yml``, a
dispatch records a queued run, and the test plays the runner (``create_run``, ``start_run``,
``complete_run``, ``job_check_run``).

A body is GitHub's own example from the description with the hosts swapped for the fake's URL,
the example's identities (its repository, number, shas, file) swapped for the object's own
wherever they are a whole part of a URL or value, then the state written over it (the record's
fields the example has by name, then others by hand), so user text is never rewritten.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import itertools
import json
import re
import secrets
import threading
import zipfile
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import yaml

from .gitstore import GitStore, Record

if TYPE_CHECKING:
    from .openapi import Spec

ROLES = ("none", "read", "triage", "write", "maintain", "admin")
Name = str | None
Zips = dict[str, bytes | dict[str, bytes]] | None  # name -> one file so named, or members


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@cache
@cache
def _recorded_job() -> dict[str, Any]:
    """The job of the recorded ``workflow_job`` delivery (fixtures/github/webhooks)."""
    from .openapi import fixtures_dir

    path = fixtures_dir() / "webhooks" / "workflow_job.completed.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))["workflow_job"])


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
    jobs = doc.get("jobs")
    job_names = (
        [str((v or {}).get("name") or k) for k, v in jobs.items()] if isinstance(jobs, dict) else []
    )
    return Record(
        name=name,
        run_name=run_name,
        inputs=inputs,
        dispatchable=dispatch is not False,
        job_names=job_names or ["build"],
    )


def render_expression(template: str, context: dict[str, Any]) -> str:
    """``${{ inputs.x }}`` filled from dotted names (``inputs.x``); unknown ones render empty."""

    def one(match: re.Match[str]) -> str:
        value = context.get(match.group(1).replace("github.event.inputs.", "inputs."))
        return ("true" if value else "false") if isinstance(value, bool) else str(value or "")

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, template)


_GITHUB = r'"(?:https?://(?:[\w-]+\.)*(?:github\.com|githubusercontent\.com)|git://github\.com)'
_EXAMPLE_REPO = "octocat/Hello-World"
APP_PERMISSIONS = dict.fromkeys(("actions", "checks", "contents", "issues"), "write")
APP_PERMISSIONS |= {"metadata": "read", "pull_requests": "write"}
APP_EVENTS = ["check_run", "issue_comment", "pull_request", "workflow_run"]
REPO_PERMISSIONS = {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True}


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    return base64.b64encode(f"{len(kind):02d}:{kind}{number}".encode()).decode()


def hosted(value: Any, base: str) -> str:
    """``value`` (fixture data) as JSON text, GitHub's hosts swapped for ``base``."""
    text = re.sub(_GITHUB, f'"{base}', json.dumps(value))
    return text.replace('"git@github.com:', f'"git@{base.split("://", 1)[-1]}:')


def relink(text: str, ids: dict[str, str] | None = None) -> Any:
    """The JSON ``text`` parsed, each key of ``ids`` swapped for its value where it is whole."""
    if ids:
        keys = "|".join(re.escape(key) for key in sorted(ids, key=len, reverse=True))
        text = re.sub(f'(?<=[/="])({keys})(?=[/.?#{{"&])', lambda hit: ids[hit.group(1)], text)
    return json.loads(text)


def fit(template: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    return {key: values.get(key, item) for key, item in template.items()}


def artifact_zip(artifact: Record) -> bytes:
    """The artifact's files in a zip, byte for byte the same each time."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(artifact.files.items()):
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


class FakeState:
    """Everything the fake GitHub knows (see the module docstring)."""

    app_id, app_slug, installation_id = 424242, "attune", 111
    url: str
    spec: Spec

    def __init__(self) -> None:
        self.lock, self.git, self.tokens = threading.RLock(), GitStore(), dict[str, datetime]()
        self.users, self.repos = dict[str, int](), dict[str, Record]()  # lower-case keys
        self.records: dict[int, Record] = {}  # pull requests, comments, check runs, runs...
        self.requests, self.violations = list[Record](), list[Record]()
        self.response_problems: list[str] = []
        self.pull_files_limit = 3000
        self.activity_api = True
        """False: ``GET .../activity`` answers 404, as on a GitHub without it."""
        """GitHub lists at most 3,000 files of a pull request (tests lower it)."""
        self._ids, self._secret = itertools.count(1_000_001), secrets.token_bytes(16)
        self._hosted: dict[tuple[str | int, ...], str] = {}
        self.bot_login = f"{self.app_slug}[bot]"  # the App's user, author of all the bot writes
        self.user_id(self.bot_login)

    def add(self, kind: str, **fields: Any) -> Record:
        made = Record(id=next(self._ids), kind=kind, created_at=now(), **fields)
        self.records[made.id] = made
        return made

    def find(self, kind: str, **fields: Any) -> list[Record]:
        """The records of ``kind`` with these field values, oldest first."""
        wanted = {"kind": kind, **fields}.items()
        return [r for r in list(self.records.values()) if wanted <= vars(r).items()]

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
        return self.users.setdefault(login.lower(), len(self.users) + 1)

    def create_repo(self, owner: str, name: str, files: dict[str, str] | None = None) -> Record:
        """A public repository whose ``main`` holds one commit of ``files``."""
        root = self.git.write((), "Initial commit", owner, files)
        return self._add_repo(owner, name, "main", {"main": root.sha})

    def _add_repo(
        self, owner: str, name: str, default: str, branches: Any, fork: Name = None
    ) -> Record:
        self.user_id(owner)
        repo = Record(id=next(self._ids), owner=owner, name=name, full_name=f"{owner}/{name}")
        repo.default_branch, repo.fork_of, repo.created_at = default, fork, now()
        repo.branches, repo.roles, repo.labels, repo.next_number = {}, {}, {}, 1
        repo.refs = f"refs/namespaces/{owner}/refs/namespaces/{name}/refs/heads/"  # a git namespace
        self.repos[repo.full_name.lower()] = repo
        for branch, sha in branches.items():
            self.move_branch(repo, branch, sha)
        return repo

    def repo(self, full_name: Name = None) -> Record:
        """The repository ``owner/name`` (any case), the first one made when ``None``."""
        return self.repos[(full_name or next(iter(self.repos))).lower()]

    def fork_repo(self, user: str, repo: Name = None) -> Record:
        """``user``'s fork of ``repo``, made with copies of its branches on the first call."""
        parent = self.repo(repo)
        if f"{user}/{parent.name}".lower() not in self.repos:
            branches, default = parent.branches, parent.default_branch
            self._add_repo(user, parent.name, default, branches, parent.full_name)
        return self.repo(f"{user}/{parent.name}")

    def set_permission(self, login: str, role: str, repo: Name = None) -> None:
        """Give ``login`` a role on ``repo``: admin/maintain/write/triage/read/none."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}")
        self.user_id(login)
        self.repo(repo).roles[login.lower()] = role

    def permission(self, login: str, repo: Name = None) -> str:
        """``login``'s role: the one set, else admin for the owner, read for anyone else."""
        target = self.repo(repo)
        owner = login.lower() == target.owner.lower()
        return str(target.roles.get(login.lower(), "admin" if owner else "read"))

    def resolve(self, ref: str, repo: Name = None) -> str | None:
        """A branch (or ``heads/<branch>``, ``refs/heads/<branch>``) or a full sha -> sha."""
        branch = self.repo(repo).branches.get(ref.removeprefix("refs/").removeprefix("heads/"))
        return str(branch) if branch else (ref if self.git.exists(ref) else None)

    def head(self, branch: str, repo: Name = None) -> str:
        return str(self.repo(repo).branches[branch])

    def get_commit(self, sha: str) -> Record:
        return self.git.commit(sha)

    def files_at(self, ref: str, repo: Name = None) -> dict[str, str]:
        return dict(self.git.commit(self.resolve(ref, repo) or ref).files)

    def commit(
        self,
        branch: str,
        files: dict[str, str | None],
        message: str = "Update files",
        author: str = "octocat",
        repo: Name = None,
    ) -> str:
        """One commit on ``branch`` writing ``files`` (``None`` deletes one); its sha."""
        with self.lock:
            target = self.repo(repo)
            self.user_id(author)
            made = self.git.write((target.branches[branch],), message, author, files)
            self.move_branch(target, branch, made.sha)
            return str(made.sha)

    def move_branch(self, target: Record, branch: str, sha: str) -> None:
        """Point ``branch`` at ``sha``, as a push does; open pull requests from it follow.
        The push is recorded as the repository's activity (``GET .../activity``)."""
        with self.lock:
            before = target.branches.get(branch)
            self.git.run("update-ref", target.refs + branch, sha)
            target.branches[branch] = sha
            kind = "branch_creation" if before is None else "push"
            if before is not None and self.git.merge_base(before, sha) != before:
                kind = "force_push"
            self.add(
                "activity",
                repo=target.full_name,
                ref=f"refs/heads/{branch}",
                before=before or "0" * 40,
                after=sha,
                activity_type=kind,
                actor=target.owner,
            )
            for pr in self.find("pull", state="open", head_repo=target.full_name, head=branch):
                pr.head_sha, pr.updated_at = sha, now()

    def create_branch(self, name: str, repo: Name = None) -> str:
        target = self.repo(repo)
        self.move_branch(target, name, target.branches[target.default_branch])
        return str(target.branches[name])

    def open_pull(
        self,
        head: str,
        base: str,
        title: str,
        body: str = "",
        user: str = "octocat",
        fork: bool = False,
        repo: Name = None,
        head_repo: Name = None,
    ) -> int:
        """A pull request from branch ``head`` of ``head_repo`` (``fork``: of ``user``'s fork)."""
        with self.lock:
            target = self.repo(repo)
            source = self.repo(head_repo or (f"{user}/{target.name}" if fork else repo))
            self.user_id(user)
            number, target.next_number = target.next_number, target.next_number + 1
            pr = self.add("pull", repo=target.full_name, number=number, title=title, body=body)
            pr.user, pr.head, pr.head_repo = user, head, source.full_name
            pr.head_sha, pr.base, pr.state, pr.merged = source.branches[head], base, "open", False
            pr.labels, pr.fork, pr.updated_at = [], source is not target, pr.created_at
            pr.merged_by = pr.merged_at = pr.closed_at = pr.merged_base = pr.merge_commit_sha = None
            return int(number)

    def pull(self, number: int, repo: Name = None) -> Record:
        return self.find("pull", repo=self.repo(repo).full_name, number=number)[0]

    def pulls(self, repo: Name = None) -> list[Record]:
        return self.find("pull", repo=self.repo(repo).full_name)

    def pull_base_sha(self, pr: Record) -> str:
        """The base commit a pull request is compared with (frozen once merged)."""
        return str(pr.merged_base or self.repo(pr.repo).branches.get(pr.base) or pr.head_sha)

    def pull_files(self, pr: Record) -> list[Record]:
        """The head against its merge base with the base, as GitHub diffs a pull request."""
        return self.git.diff(self.git.merge_base(pr.head_sha, self.pull_base_sha(pr)), pr.head_sha)

    def mergeable(self, pr: Record) -> bool:
        base = self.repo(pr.repo).branches.get(pr.base)
        return pr.state == "open" and bool(base and self.git.merge_tree(base, pr.head_sha))

    def merge_pull(self, pr: Record, method: str, message: str, by: str) -> str:
        """Merge ``pr`` with git's three-way merge (``merge``: two parents); the new base head."""
        with self.lock:
            target = self.repo(pr.repo)
            base = target.branches[pr.base]
            tree = self.git.merge_tree(base, pr.head_sha)
            if tree is None:
                raise ValueError(f"pull request #{pr.number} does not merge")
            parents = (base, pr.head_sha) if method == "merge" else (base,)
            made = self.git.write(parents, message, by, tree)
            self.move_branch(target, pr.base, made.sha)
            pr.state, pr.merged, pr.merged_at, pr.merged_by = "closed", True, now(), by
            pr.closed_at, pr.merged_base, pr.merge_commit_sha = pr.merged_at, base, made.sha
            return str(made.sha)

    def label(self, target: Record, name: str) -> tuple[str, int]:
        """The repository's label ``name`` (any case) as ``(name, id)``, made on first use."""
        made: tuple[str, int] = target.labels.setdefault(name.lower(), (name, next(self._ids)))
        return made

    def add_comment(
        self, number: int, body: str, user: str = "octocat", repo: Name = None
    ) -> Record:
        self.user_id(user)
        pr = self.pull(number, repo)
        made = self.add("comment", repo=pr.repo, issue_number=number, body=body, user=user)
        made.updated_at = made.created_at
        return made

    def comments(self, number: int, repo: Name = None) -> list[Record]:
        return self.find("comment", repo=self.repo(repo).full_name, issue_number=number)

    def reactions(self, comment_id: int) -> list[Record]:
        return self.find("reaction", comment_id=comment_id)

    def check_runs(self, sha_or_number: str | int, repo: Name = None) -> list[Record]:
        """The check runs on a commit, or on a pull request's head (an ``int``)."""
        number = isinstance(sha_or_number, int)
        sha = self.pull(int(sha_or_number), repo).head_sha if number else sha_or_number
        return self.find("check run", repo=self.repo(repo).full_name, head_sha=sha)

    def add_check_run(self, repo: str, name: str, head_sha: str, **fields: Any) -> Record:
        made = {"status": "queued", "check_suite_id": 0, "started_at": now(), "completed_at": None}
        made |= dict.fromkeys(("conclusion", "title", "summary", "text")) | fields
        return self.add("check run", repo=repo, name=name, head_sha=head_sha, **made)

    def workflows(self, repo: Name = None) -> list[Record]:
        """The ``.github/workflows/*.yml`` (or ``.yaml``) files of the default branch."""
        target, found = self.repo(repo), []
        for path, text in sorted(self.files_at(target.default_branch, repo).items()):
            if match := re.fullmatch(r"\.github/workflows/([^/]+\.ya?ml)", path):
                key = f"{target.full_name}/{path}".lower().encode()
                ident = int(hashlib.sha1(key).hexdigest()[:7], 16)  # stable, as GitHub's are
                made = Record(id=ident, repo=target.full_name, path=path, file_name=match[1])
                found.append(Record(**vars(made), **vars(parse_workflow(path, text))))
        return found

    def workflow(self, id_or_file_name: str | int, repo: Name = None) -> Record | None:
        wanted = str(id_or_file_name)
        return next((w for w in self.workflows(repo) if wanted in (str(w.id), w.file_name)), None)

    def create_run(
        self,
        workflow: str | Record,
        ref: str,
        event: str = "push",
        inputs: dict[str, Any] | None = None,
        actor: Name = None,
        repo: Name = None,
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
            for job_name in spec.job_names:  # its jobs, queued (``GET .../runs/{id}/jobs``)
                self.add(
                    "job",
                    run_id=run.id,
                    repo=run.repo,
                    name=job_name,
                    status="queued",
                    conclusion=None,
                    started_at=None,
                    completed_at=None,
                )
            return run

    def dispatches(self, repo: Name = None) -> list[Record]:
        return self.find("dispatch", repo=self.repo(repo).full_name)

    def runs(self, repo: Name = None) -> list[Record]:
        return self.find("run", repo=self.repo(repo).full_name)

    def run(self, run_id: int) -> Record:
        return self.records[run_id]

    def start_run(self, run_id: int) -> Record:
        run = self.records[run_id]
        run.status, run.run_started_at, run.updated_at = "in_progress", now(), now()
        for job in self.find("job", run_id=run_id):
            job.status, job.started_at = "in_progress", run.run_started_at
        return run

    def jobs(self, run_id: int) -> list[Record]:
        """A run's jobs; a test may set their ``started_at``/``completed_at`` (how long the
        runner was held)."""
        return self.find("job", run_id=run_id)

    def complete_run(
        self, run_id: int, conclusion: str = "success", artifacts: Zips = None
    ) -> Record:
        run = self.records[run_id]
        run.status, run.conclusion, run.updated_at = "completed", conclusion, now()
        run.run_started_at = run.run_started_at or run.updated_at
        for job in self.find("job", run_id=run_id):
            job.status, job.conclusion = "completed", conclusion
            job.started_at = job.started_at or run.run_started_at
            job.completed_at = job.completed_at or run.updated_at
        for name, content in (artifacts or {}).items():
            files = dict(content) if isinstance(content, dict) else {name: content}
            self.add("artifact", run_id=run.id, repo=run.repo, name=name, files=files)
        return run

    def job_check_run(self, run_id: int, name: str, conclusion: str, summary: str = "") -> Record:
        """A job's completed check run, as GitHub Actions posts one (its app, the run's suite)."""
        run = self.records[run_id]
        done = {"status": "completed", "conclusion": conclusion, "completed_at": now()}
        fields = done | {"title": name, "summary": summary, "check_suite_id": run.check_suite_id}
        return self.add_check_run(run.repo, name, run.head_sha, **fields)

    def example(self, name: str, /, *steps: str | int, of: Any = None, **fields: Any) -> Any:
        """Example ``name`` relinked (``ids``), then ``of``'s same-named fields and ``fields``."""
        if (name, *steps) not in self._hosted:
            value = self.spec.examples[name]["value"]
            for step in steps:
                value = value[step]
            self._hosted[(name, *steps)] = hosted(value, self.url)
        body: dict[str, Any] = relink(self._hosted[(name, *steps)], fields.pop("ids", None))
        for key in [key for key in body if of is not None and hasattr(of, key)]:
            value = getattr(of, key)
            body[key] = iso(value) if isinstance(value, datetime) else value
        if "node" in fields:
            body["node_id"] = node_id(fields.pop("node"), of.id)
        return body | fields

    def api(self, full_name: str) -> str:
        return f"{self.url}/repos/{full_name}"

    def user_json(self, login: str) -> Any:
        ident, kind = self.user_id(login), "Bot" if login.endswith("[bot]") else "User"
        ids = {"octocat": quote(login, safe="")}
        body = self.example("pull-request", "user", ids=ids, login=login, id=ident, type=kind)
        body.update(node_id=node_id(kind, ident), avatar_url=f"{self.url}/avatars/u/{ident}?v=4")
        if kind == "Bot":
            body["html_url"] = f"{self.url}/apps/{login.removesuffix('[bot]')}"
        return body

    def repo_json(self, repo: Record) -> Any:
        """GET /repos/{owner}/{repo} (``repo_as`` fits it to the smaller shapes)."""
        ids = {_EXAMPLE_REPO: repo.full_name}
        body = self.example("full-repository-default-response", of=repo, ids=ids, node="Repo")
        count = sum(pr.state == "open" for pr in self.pulls(repo.full_name))
        body.update(owner=self.user_json(repo.owner), open_issues_count=count, open_issues=count)
        body.update(fork=repo.fork_of is not None, language=None, updated_at=body["created_at"])
        body["pushed_at"], body["permissions"] = body["created_at"], REPO_PERMISSIONS
        for key in ("organization", "template_repository", "parent", "source"):
            del body[key]
        if repo.fork_of is not None:
            parent = self.repo(repo.fork_of)
            body["parent"] = body["source"] = self.repo_as(parent, "pull-request", "head", "repo")
        return body

    def repo_as(self, repo: Record, name: str, *steps: str | int) -> Any:
        """``repo`` in the shape of the repository at ``steps`` in example ``name``."""
        template = self.example(name, *steps, ids={_EXAMPLE_REPO: repo.full_name})
        return fit(template, self.repo_json(repo))

    def app_json(self, actions: bool = False) -> Any:
        """The App, or with ``actions`` the GitHub Actions app (workflow jobs' check runs)."""
        ident, slug = (15368, "github-actions") if actions else (self.app_id, self.app_slug)
        body = self.example("check-run", "app", id=ident, slug=slug, node_id=node_id("App", ident))
        body.update(external_url=f"{self.url}/apps/{slug}", html_url=f"{self.url}/apps/{slug}")
        body["name"] = "GitHub Actions" if actions else slug.capitalize()
        if not actions:
            body.update(owner=self.user_json(self.repo().owner), description="")
            body.update(events=APP_EVENTS, permissions=APP_PERMISSIONS)
        return body

    def ref_json(self, repo: Record, branch: str) -> Any:
        ident = int(hashlib.sha1(f"{repo.id}:{branch}".encode()).hexdigest()[:7], 16)
        ids = {_EXAMPLE_REPO: repo.full_name, "featureA": branch}
        ids["aa218f56b14c9653891f9e74264a383fa43fefbd"] = repo.branches[branch]
        return self.example("git-ref", ids=ids, node_id=node_id("Ref", ident))

    def git_commit_json(self, repo: Record, commit: Record) -> Any:
        ids = {_EXAMPLE_REPO: repo.full_name}
        ids["18a43cd8e1e3a79c786e3d808a73d23b6d212b16"] = commit.sha
        ids["9a21f8e2018f42ffcf369b24d2cd20bc25c9e66f"] = commit.tree
        body = self.example("file-commit-example-for-updating-a-file", "commit", ids=ids)
        body["message"] = commit.message
        who = {"date": iso(commit.date), "name": commit.author, "email": self.email(commit.author)}
        body.update(author=who, committer=who, node_id=node_id("Commit", int(commit.sha[:7], 16)))
        api, html = self.api(repo.full_name), f"{self.url}/{repo.full_name}/git/commit"
        parents = [{"sha": p, "url": f"{api}/git/commits/{p}"} for p in commit.parents]
        return body | {"parents": [p | {"html_url": f"{html}/{p['sha']}"} for p in parents]}

    def email(self, login: str) -> str:
        return f"{self.user_id(login)}+{login}@users.noreply.github.com"

    def commit_json(self, repo: Record, commit: Record) -> Any:
        """GET commits/{ref}: the commit with its changes against its first parent."""
        git, api = self.git_commit_json(repo, commit), f"{self.api(repo.full_name)}/commits/"
        changes = self.git.diff(commit.parents[0] if commit.parents else None, commit.sha)
        files = [self.diff_json(repo, change, commit.sha) for change in changes]
        adds, dels = sum(f["additions"] for f in files), sum(f["deletions"] for f in files)
        inner = {key: git[key] for key in ("author", "committer", "message", "tree", "url")}
        body = {"sha": commit.sha, "node_id": git["node_id"], "html_url": git["html_url"]}
        body |= {"commit": inner | {"comment_count": 0, "verification": git["verification"]}}
        body |= {"url": api + commit.sha, "comments_url": f"{api}{commit.sha}/comments"}
        body |= {"author": self.user_json(commit.author), "parents": git["parents"]}
        stats = {"total": adds + dels, "additions": adds, "deletions": dels}
        return body | {"committer": body["author"], "stats": stats, "files": files}

    def content_json(self, repo: Record, path: str, ref: str, sha: str, text: str | None) -> Any:
        """A file (``text``) or a folder entry (``text=None``) of the contents API."""
        ids = {"octokit/octokit.rb": repo.full_name, "README.md": quote(path), "master": ref}
        ids |= {"3d21ec53a331a6f037a91c368710b99387d012c1": sha}
        ids |= {} if text is not None else {"blob": "tree", "blobs": "trees"}
        body = self.example("content-file-response-if-content-is-a-file", ids=ids, path=path)
        data = (text or "").encode()
        body.update(name=path.rsplit("/", 1)[-1], size=len(data), type="file")
        if text is None:
            dropped = ("content", "encoding")
            return {k: v for k, v in body.items() if k not in dropped} | {"type": "dir"}
        lines = re.findall(".{1,60}", base64.b64encode(data).decode())
        return body | {"content": "".join(f"{line}\n" for line in lines)}

    def diff_json(self, repo: Record, change: Record, head_sha: str) -> Any:
        ids = {_EXAMPLE_REPO: repo.full_name, "file1.txt": quote(change.filename)}
        ids["6dcb09b5b57875f334f61aebed695e2e4193db5e"] = head_sha
        body = self.example("diff-entry-items", 0, of=change, ids=ids)
        return body | {"changes": change.additions + change.deletions}

    def label_json(self, repo: Record, name: str) -> Any:
        name, ident = self.label(repo, name)
        url = f"{self.api(repo.full_name)}/labels/{quote(name, safe='')}"
        body = {"id": ident, "node_id": node_id("Label", ident), "url": url, "name": name}
        color = hashlib.sha1(name.encode()).hexdigest()[:6]
        return body | {"color": color, "default": False, "description": ""}

    def association(self, repo: Record, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        role = self.permission(login, repo.full_name)
        return "COLLABORATOR" if role in ("admin", "maintain", "write") else "NONE"

    def end_json(self, repo: Record, branch: str, sha: str) -> Any:
        body = {"label": f"{repo.owner}:{branch}", "ref": branch, "sha": sha}
        body["user"] = self.user_json(repo.owner)
        return body | {"repo": self.repo_as(repo, "pull-request", "head", "repo")}

    def pull_json(self, pr: Record, simple: bool = False) -> Any:
        """A pull request; ``simple``: as lists have it."""
        repo = self.repo(pr.repo)
        ids = {_EXAMPLE_REPO: pr.repo, "1347": str(pr.number)}
        ids["6dcb09b5b57875f334f61aebed695e2e4193db5e"] = pr.head_sha  # the example's head
        body = self.example("pull-request", of=pr, ids=ids, node="PullRequest", locked=False)
        body.update(dict.fromkeys(("milestone", "active_lock_reason", "assignee", "auto_merge")))
        body.update({key: [] for key in ("assignees", "requested_reviewers", "requested_teams")})
        body.update(body=pr.body or None, labels=[self.label_json(repo, n) for n in pr.labels])
        body["head"] = self.end_json(self.repo(pr.head_repo), pr.head, pr.head_sha)
        body["base"] = self.end_json(repo, pr.base, repo.branches.get(pr.base, pr.head_sha))
        body["author_association"] = self.association(repo, pr.user)
        body["user"] = self.user_json(pr.user)
        body["merged_by"] = self.user_json(pr.merged_by) if pr.merged_by else None
        if simple:
            return fit(self.example("pull-request-simple-items", 0, ids=ids), body)
        files, mergeable = self.pull_files(pr), self.mergeable(pr) if pr.state == "open" else None
        since = self.git.merge_base(pr.head_sha, self.pull_base_sha(pr))
        body.update(mergeable=mergeable, rebaseable=mergeable, draft=False, review_comments=0)
        body["mergeable_state"] = {True: "clean", False: "dirty", None: "unknown"}[mergeable]
        body.update(comments=len(self.comments(pr.number, pr.repo)), maintainer_can_modify=False)
        body.update(commits=len(self.git.log(pr.head_sha, since)), changed_files=len(files))
        adds, dels = sum(f.additions for f in files), sum(f.deletions for f in files)
        return body | {"additions": adds, "deletions": dels}

    def comment_json(self, comment: Record) -> Any:
        repo, ident = self.repo(comment.repo), str(comment.id)
        ids = {_EXAMPLE_REPO: comment.repo, "1347": str(comment.issue_number), "1": ident}
        ids["issues/1347#issuecomment-1"] = f"pull/{comment.issue_number}#issuecomment-{ident}"
        body = self.example("issue-comment", of=comment, ids=ids, node="IssueComment")
        body["author_association"] = self.association(repo, comment.user)
        body["user"] = self.user_json(comment.user)
        found = [r.content for r in self.reactions(comment.id)]
        kinds = ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes")
        rollup = {"url": f"{body['url']}/reactions", "total_count": len(found)}
        return body | {"reactions": rollup | {kind: found.count(kind) for kind in kinds}}

    def pull_refs(self, repo: str, **match: Any) -> list[Any]:
        """Open pull requests (not from forks), as check runs and workflow runs show them."""
        found = []
        for pr in self.find("pull", repo=repo, state="open", fork=False, **match):
            ends = [(pr.head_repo, pr.head, pr.head_sha), (repo, pr.base, self.pull_base_sha(pr))]
            body = {"url": f"{self.api(repo)}/pulls/{pr.number}", "id": pr.id, "number": pr.number}
            for key, (full_name, branch, sha) in zip(("head", "base"), ends, strict=True):
                target = self.repo(full_name)
                where = {"id": target.id, "url": self.api(full_name), "name": target.name}
                body[key] = {"ref": branch, "sha": sha, "repo": where}
            found.append(body)
        return found

    def check_run_json(self, run: Record) -> Any:
        ids = {"github/hello-world": run.repo, "4": str(run.id)}
        body = self.example("check-run", of=run, ids=ids, node="CheckRun")
        body.update(details_url=body["html_url"], app=self.app_json(run.check_suite_id != 0))
        body.update(check_suite={"id": run.check_suite_id or run.id})
        body["pull_requests"] = self.pull_refs(run.repo, head_sha=run.head_sha)
        output = {"title": run.title, "summary": run.summary, "text": run.text}
        return body | {"output": body["output"] | output | {"annotations_count": 0}}

    def workflow_json(self, workflow: Record) -> Any:
        api, html = self.api(workflow.repo), f"{self.url}/{workflow.repo}"
        created = iso(self.repo(workflow.repo).created_at)
        body = {"id": workflow.id, "node_id": node_id("Workflow", workflow.id), "state": "active"}
        body |= {"name": workflow.name, "path": workflow.path, "created_at": created}
        body |= {"updated_at": created, "url": f"{api}/actions/workflows/{workflow.id}"}
        body["html_url"] = f"{html}/blob/HEAD/{workflow.path}"
        return body | {"badge_url": f"{html}/workflows/{quote(workflow.name)}/badge.svg"}

    def run_json(self, run: Record) -> Any:
        commit, actor = self.get_commit(run.head_sha), self.user_json(run.actor)
        ids = {"octo-org/octo-repo": run.repo, "30433642": str(run.id)}
        ids |= {"159038": str(run.workflow_id), "414944374": str(run.check_suite_id)}
        body = self.example("workflow-run", of=run, ids=ids, node="WorkflowRun", actor=actor)
        body["pull_requests"] = self.pull_refs(run.repo, head=run.head_branch)
        body.update(referenced_workflows=[], previous_attempt_url=None, triggering_actor=actor)
        body["check_suite_node_id"] = node_id("CheckSuite", run.check_suite_id)
        body["run_started_at"] = iso(run.run_started_at or run.created_at)
        who = {"name": commit.author, "email": self.email(commit.author)}
        head: dict[str, Any] = {"id": commit.sha, "tree_id": commit.tree, "author": who}
        body["head_commit"] = head | {"timestamp": iso(commit.date), "committer": who}
        body["head_commit"]["message"] = commit.message
        body["repository"] = self.repo_as(self.repo(run.repo), "workflow-run", "repository")
        return body | {"head_repository": body["repository"]}

    def activity_json(self, activity: Record) -> Any:
        """A push, as ``GET /repos/{owner}/{repo}/activity`` lists it (the ``activity``
        object: before/after, ref, timestamp, activity_type, actor)."""
        body = {"id": activity.id, "node_id": node_id("Activity", activity.id)}
        body |= {"before": activity.before, "after": activity.after, "ref": activity.ref}
        body |= {"timestamp": iso(activity.created_at), "activity_type": activity.activity_type}
        return body | {"actor": self.user_json(activity.actor)}

    def job_json(self, job: Record) -> Any:
        """A job as ``GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs`` lists it: the shape
        of the recorded ``workflow_job`` webhook's job (the REST ``job`` object)."""
        run, repo = self.run(job.run_id), self.repo(job.repo)
        body = dict(_recorded_job())
        api, html = self.api(repo.full_name), f"{self.url}/{repo.full_name}"
        body.update(id=job.id, run_id=run.id, run_attempt=1, node_id=node_id("Job", job.id))
        body.update(run_url=f"{api}/actions/runs/{run.id}", url=f"{api}/actions/jobs/{job.id}")
        body.update(html_url=f"{html}/actions/runs/{run.id}/job/{job.id}")
        body.update(check_run_url=f"{api}/check-runs/{job.id}", workflow_name=run.name)
        body.update(head_sha=run.head_sha, head_branch=run.head_branch, name=job.name)
        body.update(status=job.status, conclusion=job.conclusion, created_at=iso(job.created_at))
        body.update(started_at=iso(job.started_at or job.created_at))
        body.update(completed_at=iso(job.completed_at), steps=[], labels=["self-hosted", "gpu"])
        body.update(runner_id=1, runner_name="gpu-runner-1", runner_group_id=1)
        return body | {"runner_group_name": "Default"}

    def artifact_json(self, artifact: Record) -> Any:
        run, repo = self.run(artifact.run_id), self.repo(artifact.repo)
        ids = {"octo-org/octo-docs": artifact.repo, "11": str(artifact.id)}
        body = self.example("artifact-paginated", "artifacts", 0, of=artifact, ids=ids)
        body.update(node_id=node_id("Artifact", artifact.id), updated_at=iso(artifact.created_at))
        body.update(expired=False, size_in_bytes=sum(map(len, artifact.files.values())))
        body["expires_at"] = iso(artifact.created_at + timedelta(days=90))
        body["digest"] = "sha256:" + hashlib.sha256(artifact_zip(artifact)).hexdigest()
        origin = {"id": run.id, "repository_id": repo.id, "head_repository_id": repo.id}
        origin |= {"head_branch": run.head_branch, "head_sha": run.head_sha}
        return body | {"workflow_run": origin}
