"""The one module that speaks to GitHub: PyGithub behind a small typed client.

Everything else in GitHub mode (the forge, the executor, the service, the command handler)
calls ``RepoClient`` and gets plain dataclasses back; a refusal from GitHub arrives as
``GitHubError`` (an ``AttuneError`` carrying the HTTP status and GitHub's message), so callers
never catch PyGithub's exceptions or touch its lazily-fetching objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from github import Auth, Github, GithubException, GithubIntegration, UnknownObjectException
from github.GithubObject import NotSet

from bot.github.records import (
    ChangedFile,
    CheckRun,
    IssueComment,
    Pull,
    WorkflowRun,
    check_record,
    pull_record,
    run_record,
)
from bot.github.settings import Settings
from bot.interfaces import ForgeError


class GitHubError(ForgeError):
    """GitHub refused a request: its HTTP status and message."""

    def __init__(self, status: int, message: str, what: str) -> None:
        super().__init__(f"{what}: GitHub answered {status}: {message}")
        self.status = status
        self.reason = message


@contextmanager
def _answers(what: str) -> Iterator[None]:
    try:
        yield
    except GithubException as exc:
        data = exc.data
        message = data.get("message") if isinstance(data, dict) else data
        raise GitHubError(exc.status, str(message or ""), what) from None


class RepoClient:
    """One repository, as an installation of the App sees it."""

    def __init__(self, github: Github, full_name: str) -> None:
        self.full_name = full_name
        self._repo = github.withLazy(True).get_repo(full_name)

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def default_branch(self) -> str:
        with _answers(f"read {self.full_name}"):
            return str(self._repo.default_branch)

    # --- pull requests ---

    def pull(self, number: int) -> Pull:
        with _answers(f"read #{number}"):
            found = self._repo.get_pull(number)
            return pull_record(found, changed_files=found.changed_files)

    def pulls(self, *, base: str | None = None, head: str | None = None) -> list[Pull]:
        """Open and closed pull requests, optionally by base branch or ``owner:branch`` head."""
        filters = {k: v for k, v in (("base", base), ("head", head)) if v is not None}
        with _answers("list pull requests"):
            return [pull_record(p) for p in self._repo.get_pulls(state="all", **filters)]

    def pull_files(self, number: int) -> list[ChangedFile]:
        with _answers(f"list the files of #{number}"):
            return [
                ChangedFile(f.filename, f.status, f.patch or "")
                for f in self._repo.get_pull(number).get_files()
            ]

    def create_pull(self, *, base: str, head: str, title: str, body: str) -> int:
        with _answers(f"open a pull request from {head}"):
            return int(self._repo.create_pull(base=base, head=head, title=title, body=body).number)

    def add_labels(self, number: int, labels: list[str]) -> None:
        with _answers(f"label #{number}"):
            self._repo.get_issue(number).add_to_labels(*labels)

    def close_pull(self, number: int) -> None:
        with _answers(f"close #{number}"):
            self._repo.get_pull(number).edit(state="closed")

    def squash_merge(self, number: int, *, sha: str, title: str) -> tuple[bool, str, str]:
        """(merged, merge commit, message); 409 (``sha`` is not the head) as GitHubError."""
        with _answers(f"merge #{number}"):
            status = self._repo.get_pull(number).merge(
                merge_method="squash", sha=sha, commit_title=title, commit_message=""
            )
        return bool(status.merged), str(status.sha), str(status.message)

    # --- git ---

    def branch_sha(self, branch: str) -> str:
        with _answers(f"read branch {branch!r}"):
            return str(self._repo.get_git_ref(f"heads/{branch}").object.sha)

    def create_branch(self, branch: str, sha: str) -> None:
        """The branch at ``sha``; one that exists already (an interrupted attempt) is kept."""
        try:
            with _answers(f"create branch {branch!r}"):
                self._repo.create_git_ref(f"refs/heads/{branch}", sha)
        except GitHubError as exc:
            if exc.status != 422:
                raise

    def parents(self, sha: str) -> list[str]:
        with _answers(f"read commit {sha[:7]}"):
            return [p.sha for p in self._repo.get_commit(sha).parents]

    def pushed_since(self, branch: str, since: datetime) -> list[str]:
        """The commits ``branch`` was pushed to (force pushes included) after ``since``, by
        GitHub's own record of pushes (``GET /repos/{owner}/{repo}/activity``), newest first."""
        with _answers(f"list the pushes to {branch}"):
            _headers, found = self._repo.requester.requestJsonAndCheck(
                "GET",
                f"{self._repo.url}/activity",
                parameters={"ref": f"refs/heads/{branch}", "direction": "desc", "per_page": 100},
            )
        pushed = []
        for activity in found if isinstance(found, list) else []:
            when = datetime.fromisoformat(str(activity.get("timestamp")).replace("Z", "+00:00"))
            if activity.get("activity_type") in ("push", "force_push") and when > since:
                pushed.append(str(activity.get("after")))
        return pushed

    def text(self, path: str, ref: str) -> str | None:
        """The file's text at ``ref``; None when it is not there."""
        try:
            with _answers(f"read {path} at {ref}"):
                content = self._repo.get_contents(path, ref=ref)
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        if isinstance(content, list):
            raise ForgeError(f"{path} at {ref} is a directory")
        return content.decoded_content.decode()

    def write_file(self, path: str, text: str, *, message: str, branch: str) -> None:
        """One commit on ``branch`` setting ``path`` to ``text`` (none when it already is); a
        file not there yet (a proposed lesson file) is created."""
        with _answers(f"write {path} on {branch}"):
            try:
                current = self._repo.get_contents(path, ref=branch)
            except UnknownObjectException:
                self._repo.create_file(path, message, text, branch=branch)
                return
            if isinstance(current, list):
                raise ForgeError(f"{path} is a directory")
            if current.decoded_content.decode() != text:
                self._repo.update_file(path, message, text, current.sha, branch=branch)

    # --- checks ---

    def check_runs(self, sha: str, name: str | None = None) -> list[CheckRun]:
        with _answers(f"list the checks of {sha[:7]}"):
            found = self._repo.get_commit(sha).get_check_runs(
                **({"check_name": name} if name else {})
            )
            return [check_record(run) for run in found]

    def post_check(self, name: str, sha: str, *, conclusion: str, summary: str) -> None:
        """A completed check run ``name`` on ``sha``: the existing one edited, else a new one."""
        output: dict[str, Any] = {"title": f"{name}: {conclusion}", "summary": summary}
        with _answers(f"post check {name} on {sha[:7]}"):
            for run in self._repo.get_commit(sha).get_check_runs(check_name=name):
                run.edit(status="completed", conclusion=conclusion, output=output)
                return
            self._repo.create_check_run(
                name, sha, status="completed", conclusion=conclusion, output=output
            )

    # --- comments and people ---

    def comments(self, number: int) -> list[IssueComment]:
        with _answers(f"read the comments of #{number}"):
            return [
                IssueComment(c.id, c.body or "", c)
                for c in self._repo.get_issue(number).get_comments()
            ]

    def comment(self, number: int, body: str) -> int:
        with _answers(f"comment on #{number}"):
            return int(self._repo.get_issue(number).create_comment(body).id)

    def edit_comment(self, comment: IssueComment, body: str) -> None:
        with _answers(f"edit comment {comment.id}"):
            comment.raw.edit(body)

    def react(self, number: int, comment_id: int, content: str) -> None:
        with _answers(f"react to comment {comment_id}"):
            self._repo.get_issue(number).get_comment(comment_id).create_reaction(content)

    def permission(self, user: str) -> str:
        """``admin``, ``write``, ``read`` or ``none`` (GitHub reports maintain as write)."""
        with _answers(f"read {user}'s permission"):
            return str(self._repo.get_collaborator_permission(user))

    # --- Actions ---

    def workflow_runs(
        self, workflow: str, *, head_sha: str | None = None, event: str | None = None
    ) -> Iterator[WorkflowRun]:
        """Runs of ``workflow``, newest first, fetched page by page as they are read."""
        with _answers(f"list the runs of {workflow}"):
            found = self._repo.get_workflow(workflow).get_runs(
                head_sha=head_sha or NotSet, event=event or NotSet
            )
            for run in found:
                yield run_record(run)

    def workflow_run(self, run_id: int) -> WorkflowRun:
        with _answers(f"read run {run_id}"):
            return run_record(self._repo.get_workflow_run(run_id))

    def job_seconds(self, run_id: int) -> float:
        """How long the run's jobs held their runners, by GitHub's clock: from the first job's
        start to the last one's completion, every attempt included (0 when none ran)."""
        with _answers(f"list the jobs of run {run_id}"):
            spans = [
                (job.started_at, job.completed_at)
                for job in self._repo.get_workflow_run(run_id).jobs(_filter="all")
                if job.started_at is not None and job.completed_at is not None
            ]
        if not spans:
            return 0.0
        start = min(s for s, _ in spans)
        end = max(e for _, e in spans)
        return max(0.0, (end - start).total_seconds())

    def dispatch(self, workflow: str, ref: str, inputs: dict[str, str]) -> bool:
        with _answers(f"dispatch {workflow}"):
            return bool(self._repo.get_workflow(workflow).create_dispatch(ref, inputs))

    def artifact_urls(self, run_id: int) -> dict[str, str]:
        """Artifact name -> its archive's download URL."""
        with _answers(f"list the artifacts of run {run_id}"):
            run = self._repo.get_workflow_run(run_id)
            return {a.name: a.archive_download_url for a in run.get_artifacts()}

    def download(self, url: str, *, limit: int) -> bytes:
        """The bytes at ``url`` (GitHub redirects to short-lived storage; PyGithub follows),
        refused past ``limit``."""
        data = bytearray()
        with _answers("download an artifact"):
            _status, _headers, chunks = self._repo.requester.getStream(url, chunk_size=64 * 1024)
            for chunk in chunks:
                data += chunk
                if len(data) > limit:
                    raise ForgeError(f"the download exceeds {limit} bytes")
        return bytes(data)


RepoClients = Callable[[int, str], RepoClient]
"""(installation id, ``owner/name``) -> a client of that repository as that installation."""


def installation_clients(settings: Settings, **github_kwargs: Any) -> RepoClients:
    """App auth: a JWT signed with the App's key is exchanged for installation tokens (PyGithub
    refreshes them). ``github_kwargs`` go to ``Github`` (tests turn retries and throttling off)."""
    app_auth = Auth.AppAuth(settings.app_id, settings.private_key())

    def client(installation_id: int, full_name: str) -> RepoClient:
        auth = app_auth.get_installation_auth(installation_id)
        github = Github(base_url=settings.github_api_url, auth=auth, **github_kwargs)
        return RepoClient(github, full_name)

    return client


def app_slug(settings: Settings, full_name: str) -> str:
    """The App's slug, as its installation on ``full_name`` reports it."""
    auth = Auth.AppAuth(settings.app_id, settings.private_key())
    integration = GithubIntegration(auth=auth, base_url=settings.github_api_url)
    owner, name = full_name.split("/", 1)
    with _answers(f"read the installation on {full_name}"):
        return str(integration.get_repo_installation(owner, name).app_slug)
