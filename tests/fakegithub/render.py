"""Response bodies: GitHub's own examples from the description, re-pointed at the fake, with the
fields the fake's state decides written over them.

``relink`` swaps an example's hosts (api.github.com, github.com, ...) for the fake's base URL
and, in those URLs, the example's identities (its repository, number, sha) for the object's own,
so every URL GitHub would send is there and points at the fake. State (user text included) is
written after that, so it is never rewritten.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import urllib.parse
import zipfile
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .gitstore import Commit, FileChange
from .openapi import Spec
from .state import (
    Artifact,
    CheckRun,
    Comment,
    FakeState,
    PullRequest,
    Reaction,
    Repo,
    Workflow,
    WorkflowRun,
)

T = TypeVar("T")
_GITHUB = re.compile(
    r'"(?:https?://(?:[\w-]+\.)*(?:github\.com|githubusercontent\.com)|git://github\.com)'
)
APP_PERMISSIONS = {
    "actions": "write",
    "checks": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}
APP_EVENTS = ["check_run", "issue_comment", "pull_request", "workflow_run"]


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """GitHub's legacy global node id (``MDQ6VXNlcjE=`` is ``04:User1``)."""
    return base64.b64encode(f"{len(kind):02d}:{kind}{number}".encode()).decode()


def quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="/")


def hosted(value: Any, base: str) -> str:
    """``value`` (fixture data) as JSON text with GitHub's hosts swapped for ``base``."""
    text = _GITHUB.sub(f'"{base}', json.dumps(value))
    return text.replace('"git@github.com:', f'"git@{base.split("://", 1)[-1]}:')


def relink(text: str, ids: dict[str, str] | None = None) -> Any:
    """The JSON ``text`` parsed, with each key of ``ids`` that is a whole part of a URL path
    (``octocat/Hello-World``, ``1347``) swapped for its value."""
    if ids:
        keys = "|".join(re.escape(key) for key in sorted(ids, key=len, reverse=True))
        text = re.sub(f'(?<=/)({keys})(?=[/.?#{{"])', lambda found: ids[found.group(1)], text)
    return json.loads(text)


def fit(template: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``template``'s keys, each with its value from ``values`` when that has it."""
    return {key: values.get(key, item) for key, item in template.items()}


def artifact_zip(artifact: Artifact) -> bytes:
    """The artifact's files in a zip, byte for byte the same each time."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(artifact.files.items()):
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


class Renderer:
    """The bodies of one server: its state, the description and its base URL."""

    def __init__(self, state: FakeState, spec: Spec, base: str) -> None:
        self.state, self.spec, self.base = state, spec, base
        self._hosted: dict[tuple[str | int, ...], str] = {}

    def example(
        self, example: str, /, *steps: str | int, ids: dict[str, str] | None = None, **fields: Any
    ) -> dict[str, Any]:
        """The example (its part at ``steps``) relinked with ``ids``, then ``fields`` set."""
        key = (example, *steps)
        if key not in self._hosted:
            value = self.spec.examples[example]["value"]
            for step in steps:
                value = value[step]
            self._hosted[key] = hosted(value, self.base)
        body: dict[str, Any] = relink(self._hosted[key], ids)
        body.update(fields)
        return body

    def api(self, full_name: str) -> str:
        return f"{self.base}/repos/{full_name}"

    def html(self, full_name: str) -> str:
        return f"{self.base}/{full_name}"

    # -- users, repositories, the App ----------------------------------------------------------

    def user(self, login: str) -> dict[str, Any]:
        found = self.state.user(login)
        body = self.example(
            "pull-request",
            "user",
            ids={"octocat": urllib.parse.quote(found.login, safe="")},
            login=found.login,
            id=found.id,
            node_id=node_id(found.type, found.id),
            avatar_url=f"{self.base}/avatars/u/{found.id}?v=4",
            type=found.type,
            site_admin=False,
        )
        if found.type == "Bot":
            body["html_url"] = f"{self.base}/apps/{found.login.removesuffix('[bot]')}"
        return body

    def repo(self, repo: Repo) -> dict[str, Any]:
        """GET /repos/{owner}/{repo}; ``repo_as`` fits it to the smaller shapes."""
        body = self.example(
            "full-repository-default-response",
            ids={"octocat/Hello-World": repo.full_name},
            id=repo.id,
            node_id=node_id("Repository", repo.id),
            name=repo.name,
            full_name=repo.full_name,
            owner=self.user(repo.owner),
            private=repo.private,
            visibility="private" if repo.private else "public",
            fork=repo.parent is not None,
            default_branch=repo.default_branch,
            language=None,
            created_at=iso(repo.created_at),
            updated_at=iso(repo.pushed_at),
            pushed_at=iso(repo.pushed_at),
            open_issues_count=sum(pr.state == "open" for pr in self.state.pulls(repo.full_name)),
            permissions={
                "admin": False,
                "maintain": False,
                "push": True,
                "triage": True,
                "pull": True,
            },
        )
        body["open_issues"] = body["open_issues_count"]
        for key in ("organization", "template_repository", "parent", "source"):
            body.pop(key)
        if repo.parent is not None:
            parent = self.state.repo(repo.parent)
            body["parent"] = body["source"] = self.repo_as(parent, "pull-request", "head", "repo")
        return body

    def repo_as(self, repo: Repo, name: str, *path: str | int) -> dict[str, Any]:
        """``repo`` in the shape of the repository at ``path`` in example ``name``."""
        value = self.spec.examples[name]["value"]
        for step in path:
            value = value[step]
        ids = {value["full_name"]: repo.full_name}
        return fit(self.example(name, *path, ids=ids), self.repo(repo))

    def app(self, actions: bool = False) -> dict[str, Any]:
        """The App, or the GitHub Actions app (``actions``), owner of workflow jobs' checks."""
        state = self.state
        ident, slug = (15368, "github-actions") if actions else (state.app_id, state.app_slug)
        body = self.example(
            "check-run",
            "app",
            id=ident,
            slug=slug,
            node_id=node_id("App", ident),
            name="GitHub Actions" if actions else slug.capitalize(),
            external_url=f"{self.base}/apps/{slug}",
            html_url=f"{self.base}/apps/{slug}",
        )
        if not actions:
            body.update(owner=self.user(state.repo().owner), description="")
            body.update(permissions=dict(APP_PERMISSIONS), events=list(APP_EVENTS))
        return body

    def installation(self, repo: Repo) -> dict[str, Any]:
        ident, app_id = self.state.installation_id, self.state.app_id
        return self.example(
            "installation",
            ids={"1": str(ident), "github": repo.owner},
            id=ident,
            account=self.user(repo.owner),
            repository_selection="all",
            app_id=app_id,
            client_id=f"Iv1.{app_id:016x}",
            target_id=self.state.user(repo.owner).id,
            target_type="User",
            permissions=dict(APP_PERMISSIONS),
            events=list(APP_EVENTS),
            single_file_name=None,
            has_multiple_single_files=False,
            single_file_paths=[],
            app_slug=self.state.app_slug,
        )

    def installation_token(
        self, token: str, expires: datetime, perms: dict[str, str]
    ) -> dict[str, Any]:
        body = self.example("installation-token", token=token, expires_at=iso(expires))
        body.update(permissions=perms or dict(APP_PERMISSIONS), repository_selection="all")
        del body["repositories"]
        return body

    def collaborator_permission(self, repo: Repo, login: str) -> dict[str, Any]:
        role = self.state.permission(login, repo.full_name)
        rank = ["none", "read", "triage", "write", "maintain", "admin"].index(role)
        user = self.user(login)
        keys = ("pull", "triage", "push", "maintain", "admin")
        user.update(permissions={key: rank > i for i, key in enumerate(keys)}, role_name=role)
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        return {"permission": legacy, "role_name": role, "user": user}

    # -- git -----------------------------------------------------------------------------------

    def git_ref(self, repo: Repo, branch: str) -> dict[str, Any]:
        sha, api = repo.branches[branch], self.api(repo.full_name)
        return self.example(
            "git-ref",
            ref=f"refs/heads/{branch}",
            node_id=node_id(
                "Ref", int(hashlib.sha1(f"{repo.id}:{branch}".encode()).hexdigest()[:7], 16)
            ),
            url=f"{api}/git/refs/heads/{quoted(branch)}",
            object={"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
        )

    def git_commit(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        """A git commit object (the ``commit`` of a file commit)."""
        api, html = self.api(repo.full_name), self.html(repo.full_name)
        person = {
            "date": iso(commit.date),
            "name": commit.author,
            "email": self.state.email(commit.author),
        }
        return self.example(
            "file-commit-example-for-updating-a-file",
            "commit",
            sha=commit.sha,
            node_id=node_id("Commit", int(commit.sha[:7], 16)),
            url=f"{api}/git/commits/{commit.sha}",
            html_url=f"{html}/commit/{commit.sha}",
            author=person,
            committer=dict(person),
            message=commit.message,
            tree={"url": f"{api}/git/trees/{commit.tree}", "sha": commit.tree},
            parents=[self.parent(repo, sha) for sha in commit.parents],
        )

    def parent(self, repo: Repo, sha: str) -> dict[str, str]:
        api, html = self.api(repo.full_name), self.html(repo.full_name)
        return {"url": f"{api}/commits/{sha}", "html_url": f"{html}/commit/{sha}", "sha": sha}

    def commit(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        """GET commits/{ref}: the commit with its changes against its first parent."""
        git = self.git_commit(repo, commit)
        parent = commit.parents[0] if commit.parents else None
        files = [
            self.diff_entry(repo, c, commit.sha) for c in self.state.git.diff(parent, commit.sha)
        ]
        adds, dels = sum(f["additions"] for f in files), sum(f["deletions"] for f in files)
        keys = ("author", "committer", "message", "tree", "url", "verification")
        return {
            "sha": commit.sha,
            "node_id": git["node_id"],
            "commit": {**{key: git[key] for key in keys}, "comment_count": 0},
            "url": f"{self.api(repo.full_name)}/commits/{commit.sha}",
            "html_url": git["html_url"],
            "comments_url": f"{self.api(repo.full_name)}/commits/{commit.sha}/comments",
            "author": self.user(commit.author),
            "committer": self.user(commit.author),
            "parents": git["parents"],
            "stats": {"total": adds + dels, "additions": adds, "deletions": dels},
            "files": files,
        }

    def content(
        self, repo: Repo, path: str, ref: str, sha: str, text: str | None
    ) -> dict[str, Any]:
        """A file (``text``) or a folder entry (``text=None``) of the contents API."""
        api = f"{self.api(repo.full_name)}/contents/{quoted(path)}?ref={urllib.parse.quote(ref)}"
        kind = "blobs" if text is not None else "trees"
        links = {"self": api, "git": f"{self.api(repo.full_name)}/git/{kind}/{sha}"}
        kind = "blob" if text is not None else "tree"
        links["html"] = f"{self.html(repo.full_name)}/{kind}/{quoted(ref)}/{quoted(path)}"
        raw = f"{self.html(repo.full_name)}/raw/{quoted(ref)}/{quoted(path)}"
        data = (text or "").encode()
        body = self.example(
            "content-file-response-if-content-is-a-file",
            type="file" if text is not None else "dir",
            size=len(data),
            name=path.rsplit("/", 1)[-1],
            path=path,
            sha=sha,
            url=api,
            git_url=links["git"],
            html_url=links["html"],
            download_url=raw if text is not None else None,
            _links=links,
        )
        body["content"] = "".join(
            f"{line}\n" for line in re.findall(".{1,60}", base64.b64encode(data).decode())
        )
        return body

    def diff_entry(self, repo: Repo, change: FileChange, head_sha: str) -> dict[str, Any]:
        path = quoted(change.path)
        return self.example(
            "diff-entry-items",
            0,
            sha=change.sha,
            filename=change.path,
            status=change.status,
            additions=change.additions,
            deletions=change.deletions,
            changes=change.additions + change.deletions,
            blob_url=f"{self.html(repo.full_name)}/blob/{head_sha}/{path}",
            raw_url=f"{self.html(repo.full_name)}/raw/{head_sha}/{path}",
            contents_url=f"{self.api(repo.full_name)}/contents/{path}?ref={head_sha}",
            patch=change.patch,
        )

    # -- pull requests, comments, reactions ----------------------------------------------------

    def label(self, repo: Repo, name: str) -> dict[str, Any]:
        name, ident = self.state.label(repo, name)
        colors = ("d73a4a", "0075ca", "cfd3d7", "a2eeef", "7057ff", "008672", "e4e669")
        return {
            "id": ident,
            "node_id": node_id("Label", ident),
            "url": f"{self.api(repo.full_name)}/labels/{urllib.parse.quote(name, safe='')}",
            "name": name,
            "color": colors[sum(name.encode()) % len(colors)],
            "default": False,
            "description": "",
        }

    def association(self, repo: Repo, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        role = self.state.permission(login, repo.full_name)
        return "COLLABORATOR" if role in ("admin", "maintain", "write") else "NONE"

    def pull_end(self, repo: Repo, branch: str, sha: str) -> dict[str, Any]:
        repo_body = self.repo_as(repo, "pull-request", "head", "repo")
        user = self.user(repo.owner)
        return {
            "label": f"{repo.owner}:{branch}",
            "ref": branch,
            "sha": sha,
            "user": user,
            "repo": repo_body,
        }

    def pull(self, pr: PullRequest, simple: bool = False) -> dict[str, Any]:
        """A pull request; ``simple``: as lists have it."""
        repo, git = self.state.repo(pr.repo), self.state.git
        example = "6dcb09b5b57875f334f61aebed695e2e4193db5e"  # the example's head sha
        ids = {"octocat/Hello-World": pr.repo, "1347": str(pr.number), example: pr.head_sha}
        values: dict[str, Any] = dict(
            id=pr.id,
            node_id=node_id("PullRequest", pr.id),
            number=pr.number,
            state=pr.state,
            locked=False,
            title=pr.title,
            user=self.user(pr.user),
            body=pr.body or None,
            labels=[self.label(repo, name) for name in pr.labels],
            milestone=None,
            active_lock_reason=None,
            created_at=iso(pr.created_at),
            updated_at=iso(pr.updated_at),
            closed_at=iso(pr.closed_at),
            merged_at=iso(pr.merged_at),
            merge_commit_sha=pr.merge_commit_sha,
            assignee=None,
            assignees=[],
            requested_reviewers=[],
            requested_teams=[],
            head=self.pull_end(self.state.repo(pr.head_repo), pr.head, pr.head_sha),
            base=self.pull_end(repo, pr.base, repo.branches.get(pr.base, pr.head_sha)),
            author_association=self.association(repo, pr.user),
            auto_merge=None,
            draft=False,
        )
        if simple:
            return fit(self.example("pull-request-simple-items", 0, ids=ids), values)
        files = self.state.pull_files(pr)
        mergeable = self.state.mergeable(pr) if pr.state == "open" else None
        merge_base = git.merge_base(pr.head_sha, self.state.pull_base_sha(pr))
        values.update(
            merged=pr.merged,
            mergeable=mergeable,
            rebaseable=mergeable,
            mergeable_state={True: "clean", False: "dirty", None: "unknown"}[mergeable],
            merged_by=self.user(pr.merged_by) if pr.merged_by else None,
            comments=len(self.state.comments(pr.number, pr.repo)),
            review_comments=0,
            maintainer_can_modify=False,
            commits=len(git.log(pr.head_sha, merge_base)),
            additions=sum(change.additions for change in files),
            deletions=sum(change.deletions for change in files),
            changed_files=len(files),
        )
        return fit(self.example("pull-request", ids=ids), values)

    def reactions(self, url: str, comment_id: int | None) -> dict[str, Any]:
        """The reaction roll-up of a comment (``None``: of an issue, which has none here)."""
        found = self.state.reactions(comment_id) if comment_id is not None else []
        kinds = ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes")
        counts = {kind: sum(r.content == kind for r in found) for kind in kinds}
        return {"url": url, "total_count": len(found), **counts}

    def comment(self, comment: Comment) -> dict[str, Any]:
        repo = self.state.repo(comment.repo)
        url = f"{self.api(repo.full_name)}/issues/comments/{comment.id}"
        ids = {"octocat/Hello-World": comment.repo, "1347": str(comment.issue_number)}
        return self.example(
            "issue-comment",
            ids={**ids, "1": str(comment.id)},
            id=comment.id,
            node_id=node_id("IssueComment", comment.id),
            html_url=f"{self.html(repo.full_name)}/pull/{comment.issue_number}#issuecomment-{comment.id}",
            body=comment.body,
            user=self.user(comment.user),
            created_at=iso(comment.created_at),
            updated_at=iso(comment.updated_at),
            author_association=self.association(repo, comment.user),
            reactions=self.reactions(f"{url}/reactions", comment.id),
        )

    def reaction(self, reaction: Reaction) -> dict[str, Any]:
        return self.example(
            "reaction",
            id=reaction.id,
            node_id=node_id("Reaction", reaction.id),
            user=self.user(reaction.user),
            content=reaction.content,
            created_at=iso(reaction.created_at),
        )

    # -- checks and Actions --------------------------------------------------------------------

    def pull_ref(self, pr: PullRequest) -> dict[str, Any]:
        """The minimal pull request check runs and workflow runs carry."""

        def end(full_name: str, branch: str, sha: str) -> dict[str, Any]:
            repo = self.state.repo(full_name)
            ref = {"id": repo.id, "url": self.api(full_name), "name": repo.name}
            return {"ref": branch, "sha": sha, "repo": ref}

        base_sha = self.state.pull_base_sha(pr)
        return {
            "url": f"{self.api(pr.repo)}/pulls/{pr.number}",
            "id": pr.id,
            "number": pr.number,
            "head": end(pr.head_repo, pr.head, pr.head_sha),
            "base": end(pr.repo, pr.base, base_sha),
        }

    def check_run(self, run: CheckRun) -> dict[str, Any]:
        pulls = [
            self.pull_ref(pr)
            for pr in self.state.pulls(run.repo)
            if pr.state == "open" and pr.head_sha == run.head_sha and not pr.fork
        ]
        body = self.example(
            "check-run",
            ids={"github/hello-world": run.repo, "4": str(run.id)},
            id=run.id,
            head_sha=run.head_sha,
            node_id=node_id("CheckRun", run.id),
            external_id=run.external_id,
            details_url=run.details_url or f"{self.html(run.repo)}/runs/{run.id}",
            status=run.status,
            conclusion=run.conclusion,
            started_at=iso(run.started_at),
            completed_at=iso(run.completed_at),
            name=run.name,
            check_suite={"id": run.check_suite_id or run.id},
            app=self.app(actions=run.check_suite_id != 0),
            pull_requests=pulls,
        )
        body["output"].update(
            title=run.title, summary=run.summary, text=run.text, annotations_count=0
        )
        return body

    def workflow(self, workflow: Workflow) -> dict[str, Any]:
        api, html = self.api(workflow.repo), self.html(workflow.repo)
        return {
            "id": workflow.id,
            "node_id": node_id("Workflow", workflow.id),
            "name": workflow.name,
            "path": workflow.path,
            "state": "active",
            "created_at": iso(workflow.created_at),
            "updated_at": iso(workflow.created_at),
            "url": f"{api}/actions/workflows/{workflow.id}",
            "html_url": f"{html}/blob/HEAD/{workflow.path}",
            "badge_url": f"{html}/workflows/{quoted(workflow.name)}/badge.svg",
        }

    def workflow_run(self, run: WorkflowRun) -> dict[str, Any]:
        repo, commit = self.state.repo(run.repo), self.state.get_commit(run.head_sha)
        person = {"name": commit.author, "email": self.state.email(commit.author)}
        pulls = [
            self.pull_ref(pr)
            for pr in self.state.pulls(run.repo)
            if pr.state == "open" and pr.head == run.head_branch and not pr.fork
        ]
        minimal = self.repo_as(repo, "workflow-run", "repository")
        ids = {"octo-org/octo-repo": run.repo, "30433642": str(run.id)}
        ids.update({"159038": str(run.workflow_id), "414944374": str(run.check_suite_id)})
        return self.example(
            "workflow-run",
            ids=ids,
            id=run.id,
            name=run.name,
            node_id=node_id("WorkflowRun", run.id),
            check_suite_id=run.check_suite_id,
            check_suite_node_id=node_id("CheckSuite", run.check_suite_id),
            head_branch=run.head_branch,
            head_sha=run.head_sha,
            path=run.path,
            run_number=run.run_number,
            event=run.event,
            display_title=run.display_title,
            status=run.status,
            conclusion=run.conclusion,
            workflow_id=run.workflow_id,
            pull_requests=pulls,
            created_at=iso(run.created_at),
            updated_at=iso(run.updated_at),
            actor=self.user(run.actor),
            triggering_actor=self.user(run.actor),
            referenced_workflows=[],
            run_started_at=iso(run.run_started_at or run.created_at),
            previous_attempt_url=None,
            head_commit={
                "id": commit.sha,
                "tree_id": commit.tree,
                "message": commit.message,
                "timestamp": iso(commit.date),
                "author": person,
                "committer": dict(person),
            },
            repository=minimal,
            head_repository=minimal,
        )

    def artifact(self, artifact: Artifact) -> dict[str, Any]:
        run, repo = self.state.run(artifact.run_id), self.state.repo(artifact.repo)
        return self.example(
            "artifact-paginated",
            "artifacts",
            0,
            ids={"octo-org/octo-docs": artifact.repo, "11": str(artifact.id)},
            id=artifact.id,
            node_id=node_id("Artifact", artifact.id),
            name=artifact.name,
            size_in_bytes=sum(len(data) for data in artifact.files.values()),
            expired=False,
            created_at=iso(artifact.created_at),
            expires_at=iso(artifact.created_at + timedelta(days=90)),
            updated_at=iso(artifact.created_at),
            digest="sha256:" + hashlib.sha256(artifact_zip(artifact)).hexdigest(),
            workflow_run={
                "id": run.id,
                "repository_id": repo.id,
                "head_repository_id": repo.id,
                "head_branch": run.head_branch,
                "head_sha": run.head_sha,
            },
        )
