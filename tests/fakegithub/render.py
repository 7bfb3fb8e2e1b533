"""Response bodies: GitHub's own examples from the description, relinked to the fake, the state
written over them. Relinking swaps the hosts (api.github.com, ...) for the fake's URL and, in
URLs, the example's identities (its repository, number, sha) for the object's own, so every URL
GitHub sends is there and leads to the right place; the state comes after (so user text is never
rewritten): a record's fields the example has by the same name, then the rest by hand.
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
from typing import Any

from .gitstore import Commit, FileChange
from .openapi import Spec
from .state import FakeState, Record

_GITHUB = r'"(?:https?://(?:[\w-]+\.)*(?:github\.com|githubusercontent\.com)|git://github\.com)'
APP_PERMISSIONS = dict.fromkeys(("actions", "checks", "contents", "issues"), "write")
APP_PERMISSIONS |= {"metadata": "read", "pull_requests": "write"}
APP_EVENTS = ["check_run", "issue_comment", "pull_request", "workflow_run"]


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """GitHub's legacy global node id (``MDQ6VXNlcjE=`` is ``04:User1``)."""
    return base64.b64encode(f"{len(kind):02d}:{kind}{number}".encode()).decode()


def quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="/")


def hosted(value: Any, base: str) -> str:
    """``value`` (fixture data) as JSON text, GitHub's hosts swapped for ``base``."""
    text = re.sub(_GITHUB, f'"{base}', json.dumps(value))
    return text.replace('"git@github.com:', f'"git@{base.split("://", 1)[-1]}:')


def relink(text: str, ids: dict[str, str] | None = None) -> Any:
    """The JSON ``text`` parsed, each key of ``ids`` that is a whole part of a URL path
    (``octocat/Hello-World``, ``1347``) swapped for its value first."""
    if ids:
        keys = "|".join(re.escape(key) for key in sorted(ids, key=len, reverse=True))
        text = re.sub(f'(?<=/)({keys})(?=[/.?#{{"])', lambda found: ids[found.group(1)], text)
    return json.loads(text)


def fit(template: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``template``'s keys, each with its value from ``values`` where that has one."""
    return {key: values.get(key, item) for key, item in template.items()}


def artifact_zip(artifact: Record) -> bytes:
    """The artifact's files in a zip, byte for byte the same each time."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(artifact.files.items()):
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


class Bodies(FakeState):
    """The state as GitHub's JSON, for the server at ``url``."""

    url: str
    spec: Spec
    _hosted: dict[tuple[str | int, ...], str]

    def raw(self, name: str, *steps: str | int) -> Any:
        """The value of example ``name`` (its part at ``steps``) as GitHub published it."""
        value = self.spec.examples[name]["value"]
        for step in steps:
            value = value[step]
        return value

    def example(self, name: str, /, *steps: str | int, of: Any = None, **fields: Any) -> Any:
        """Example ``name`` (at ``steps``) relinked with the ``ids`` field, with the same-named
        fields of record ``of`` (and its node id, of kind ``node``), then the other ``fields``."""
        if (name, *steps) not in self._hosted:
            self._hosted[(name, *steps)] = hosted(self.raw(name, *steps), self.url)
        body: dict[str, Any] = relink(self._hosted[(name, *steps)], fields.pop("ids", None))
        for key in [key for key in body if of is not None and hasattr(of, key)]:
            value = getattr(of, key)
            body[key] = iso(value) if isinstance(value, datetime) else value
        if "node" in fields:
            body["node_id"] = node_id(fields.pop("node"), of.id)
        return body | fields

    def api(self, full_name: str) -> str:
        return f"{self.url}/repos/{full_name}"

    def html(self, full_name: str) -> str:
        return f"{self.url}/{full_name}"

    def user_json(self, login: str) -> Any:
        ident, kind = self.user_id(login), "Bot" if login.endswith("[bot]") else "User"
        ids = {"octocat": urllib.parse.quote(login, safe="")}
        body = self.example("pull-request", "user", ids=ids, login=login, id=ident, type=kind)
        body.update(node_id=node_id(kind, ident), avatar_url=f"{self.url}/avatars/u/{ident}?v=4")
        if kind == "Bot":
            body["html_url"] = f"{self.url}/apps/{login.removesuffix('[bot]')}"
        return body

    def repo_json(self, repo: Record) -> Any:
        """GET /repos/{owner}/{repo} (``repo_as`` fits it to the smaller shapes)."""
        ids = {"octocat/Hello-World": repo.full_name}
        body = self.example("full-repository-default-response", of=repo, ids=ids, node="Repo")
        count = sum(pr.state == "open" for pr in self.pulls(repo.full_name))
        body.update(owner=self.user_json(repo.owner), open_issues_count=count, open_issues=count)
        body.update(fork=repo.fork_of is not None, language=None, updated_at=body["created_at"])
        body["pushed_at"], allowed = body["created_at"], ("push", "triage", "pull")
        body["permissions"] = {key: key in allowed for key in ("admin", "maintain", *allowed)}
        for key in ("organization", "template_repository", "parent", "source"):
            del body[key]
        if repo.fork_of is not None:
            parent = self.repo(repo.fork_of)
            body["parent"] = body["source"] = self.repo_as(parent, "pull-request", "head", "repo")
        return body

    def repo_as(self, repo: Record, name: str, *steps: str | int) -> Any:
        """``repo`` in the shape of the repository at ``steps`` in example ``name``."""
        ids = {self.raw(name, *steps)["full_name"]: repo.full_name}
        return fit(self.example(name, *steps, ids=ids), self.repo_json(repo))

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
        sha, api = repo.branches[branch], self.api(repo.full_name)
        ident = int(hashlib.sha1(f"{repo.id}:{branch}".encode()).hexdigest()[:7], 16)
        body = self.example("git-ref", ref=f"refs/heads/{branch}", node_id=node_id("Ref", ident))
        body["object"] = {"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"}
        return body | {"url": f"{api}/git/refs/heads/{quoted(branch)}"}

    def git_commit_json(self, repo: Record, commit: Commit) -> Any:
        """A git commit object (the ``commit`` of a file commit)."""
        api, html = self.api(repo.full_name), self.html(repo.full_name)
        who = {"date": iso(commit.date), "name": commit.author, "email": self.email(commit.author)}
        body = self.example("file-commit-example-for-updating-a-file", "commit", of=commit)
        body.update(url=f"{api}/git/commits/{commit.sha}", html_url=f"{html}/commit/{commit.sha}")
        body.update(author=who, committer=who, node_id=node_id("Commit", int(commit.sha[:7], 16)))
        body["tree"] = {"url": f"{api}/git/trees/{commit.tree}", "sha": commit.tree}
        parents = [{"url": f"{api}/commits/{sha}", "sha": sha} for sha in commit.parents]
        return body | {"parents": [p | {"html_url": f"{html}/commit/{p['sha']}"} for p in parents]}

    def email(self, login: str) -> str:
        return f"{self.user_id(login)}+{login}@users.noreply.github.com"

    def commit_json(self, repo: Record, commit: Commit) -> Any:
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
        api, html, where = self.api(repo.full_name), self.html(repo.full_name), f"{ref}/{path}"
        kind, data = "file" if text is not None else "dir", (text or "").encode()
        links = {"self": f"{api}/contents/{quoted(path)}?ref={urllib.parse.quote(ref)}"}
        links["git"] = f"{api}/git/{'blobs' if text is not None else 'trees'}/{sha}"
        links["html"] = f"{html}/{'blob' if text is not None else 'tree'}/{quoted(where)}"
        body = self.example("content-file-response-if-content-is-a-file", type=kind, sha=sha)
        body.update(size=len(data), name=path.rsplit("/", 1)[-1], path=path, _links=links)
        body.update(url=links["self"], git_url=links["git"], html_url=links["html"])
        body["download_url"] = f"{html}/raw/{quoted(where)}" if text is not None else None
        lines = re.findall(".{1,60}", base64.b64encode(data).decode())
        return body | {"content": "".join(f"{line}\n" for line in lines)}

    def diff_json(self, repo: Record, change: FileChange, head_sha: str) -> Any:
        path, html = quoted(change.filename), self.html(repo.full_name)
        body = self.example("diff-entry-items", 0, of=change)
        body["changes"] = change.additions + change.deletions
        body["raw_url"] = f"{html}/raw/{head_sha}/{path}"
        body["contents_url"] = f"{self.api(repo.full_name)}/contents/{path}?ref={head_sha}"
        return body | {"blob_url": f"{html}/blob/{head_sha}/{path}"}

    def label_json(self, repo: Record, name: str) -> Any:
        name, ident = self.label(repo, name)
        url = f"{self.api(repo.full_name)}/labels/{urllib.parse.quote(name, safe='')}"
        body = {"id": ident, "node_id": node_id("Label", ident), "url": url, "name": name}
        color = hashlib.sha1(name.encode()).hexdigest()[:6]
        return body | {"color": color, "default": False, "description": ""}

    def association(self, repo: Record, login: str) -> str:
        if login.lower() == repo.owner.lower():
            return "OWNER"
        role = self.permission(login, repo.full_name)
        return "COLLABORATOR" if role in ("admin", "maintain", "write") else "NONE"

    def end_json(self, repo: Record, branch: str, sha: str) -> Any:
        """The head or the base of a pull request."""
        body = {"label": f"{repo.owner}:{branch}", "ref": branch, "sha": sha}
        body["user"] = self.user_json(repo.owner)
        return body | {"repo": self.repo_as(repo, "pull-request", "head", "repo")}

    def pull_json(self, pr: Record, simple: bool = False) -> Any:
        """A pull request; ``simple``: as lists have it."""
        repo = self.repo(pr.repo)
        ids = {"octocat/Hello-World": pr.repo, "1347": str(pr.number)}
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
        ids = {"octocat/Hello-World": comment.repo, "1347": str(comment.issue_number), "1": ident}
        body = self.example("issue-comment", of=comment, ids=ids, node="IssueComment")
        body["html_url"] = f"{self.html(repo.full_name)}/pull/{comment.issue_number}"
        body["html_url"] += f"#issuecomment-{ident}"
        body["author_association"] = self.association(repo, comment.user)
        body["user"] = self.user_json(comment.user)
        found = [r.content for r in self.reactions(comment.id)]
        kinds = ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes")
        rollup = {"url": f"{body['url']}/reactions", "total_count": len(found)}
        return body | {"reactions": rollup | {kind: found.count(kind) for kind in kinds}}

    def pull_ref_json(self, pr: Record) -> Any:
        """The minimal pull request of check runs and workflow runs."""
        ends = [(pr.head_repo, pr.head, pr.head_sha), (pr.repo, pr.base, self.pull_base_sha(pr))]
        body = {"url": f"{self.api(pr.repo)}/pulls/{pr.number}", "id": pr.id, "number": pr.number}
        for key, (full_name, branch, sha) in zip(("head", "base"), ends, strict=True):
            target = self.repo(full_name)
            repo = {"id": target.id, "url": self.api(full_name), "name": target.name}
            body[key] = {"ref": branch, "sha": sha, "repo": repo}
        return body

    def check_run_json(self, run: Record) -> Any:
        pulls = [p for p in self.pulls(run.repo) if p.state == "open" and not p.fork]
        ids = {"github/hello-world": run.repo, "4": str(run.id)}
        body = self.example("check-run", of=run, ids=ids, node="CheckRun")
        body.update(details_url=body["html_url"], app=self.app_json(run.check_suite_id != 0))
        body.update(check_suite={"id": run.check_suite_id or run.id})
        body["pull_requests"] = [self.pull_ref_json(p) for p in pulls if p.head_sha == run.head_sha]
        output = {"title": run.title, "summary": run.summary, "text": run.text}
        return body | {"output": body["output"] | output | {"annotations_count": 0}}

    def workflow_json(self, workflow: Record) -> Any:
        api, html = self.api(workflow.repo), self.html(workflow.repo)
        created = iso(self.repo(workflow.repo).created_at)
        body = {"id": workflow.id, "node_id": node_id("Workflow", workflow.id), "state": "active"}
        body |= {"name": workflow.name, "path": workflow.path, "created_at": created}
        body |= {"updated_at": created, "url": f"{api}/actions/workflows/{workflow.id}"}
        body["html_url"] = f"{html}/blob/HEAD/{workflow.path}"
        return body | {"badge_url": f"{html}/workflows/{quoted(workflow.name)}/badge.svg"}

    def run_json(self, run: Record) -> Any:
        commit, actor = self.get_commit(run.head_sha), self.user_json(run.actor)
        pulls = [p for p in self.pulls(run.repo) if p.state == "open" and not p.fork]
        ids = {"octo-org/octo-repo": run.repo, "30433642": str(run.id)}
        ids |= {"159038": str(run.workflow_id), "414944374": str(run.check_suite_id)}
        body = self.example("workflow-run", of=run, ids=ids, node="WorkflowRun", actor=actor)
        body["pull_requests"] = [self.pull_ref_json(p) for p in pulls if p.head == run.head_branch]
        body.update(referenced_workflows=[], previous_attempt_url=None, triggering_actor=actor)
        body["check_suite_node_id"] = node_id("CheckSuite", run.check_suite_id)
        body["run_started_at"] = iso(run.run_started_at or run.created_at)
        who = {"name": commit.author, "email": self.email(commit.author)}
        head: dict[str, Any] = {"id": commit.sha, "tree_id": commit.tree, "author": who}
        body["head_commit"] = head | {"timestamp": iso(commit.date), "committer": who}
        body["head_commit"]["message"] = commit.message
        body["repository"] = self.repo_as(self.repo(run.repo), "workflow-run", "repository")
        return body | {"head_repository": body["repository"]}

    def artifact_json(self, artifact: Record) -> Any:
        run, repo = self.run(artifact.run_id), self.repo(artifact.repo)
        ids = {"octo-org/octo-docs": artifact.repo, "11": str(artifact.id)}
        body = self.example("artifact-paginated", "artifacts", 0, of=artifact, ids=ids)
        body["node_id"] = node_id("Artifact", artifact.id)
        body.update(expired=False, size_in_bytes=sum(map(len, artifact.files.values())))
        body.update(updated_at=iso(artifact.created_at))
        body["expires_at"] = iso(artifact.created_at + timedelta(days=90))
        body["digest"] = "sha256:" + hashlib.sha256(artifact_zip(artifact)).hexdigest()
        origin = {"id": run.id, "repository_id": repo.id, "head_repository_id": repo.id}
        origin |= {"head_branch": run.head_branch, "head_sha": run.head_sha}
        return body | {"workflow_run": origin}
