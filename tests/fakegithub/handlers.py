"""The endpoints: plain functions ``(Ctx) -> Reply`` registered with the path template exactly as
the description spells it, so one template finds both the handler and the operation requests and
responses are validated against."""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .render import Renderer, artifact_zip
from .state import CheckRun, FakeState, PullRequest, Repo, WorkflowRun, now

REPO = "/repos/{owner}/{repo}"
DOWNLOAD = "/_fake/artifacts/"
"""Where an artifact's ``zip`` redirects (GitHub sends a signed blob-storage URL)."""


class ApiError(Exception):
    """An error reply in GitHub's shape; a ``violation`` (``True`` or the reason) is recorded:
    a request GitHub would refuse too, or one the fake cannot answer."""

    def __init__(
        self, status: int, message: str, errors: Any = None, violation: bool | str = False
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.errors, self.violation = status, message, errors, violation


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def invalid(resource: str, name: str, code: str, message: str = "") -> ApiError:
    error = {"resource": resource, "field": name, "code": code} | (
        {"message": message} if message else {}
    )
    return ApiError(422, "Validation Failed", [error])


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    """Content that is not JSON (a zip); ``body`` is then ignored."""


@dataclass
class Ctx:
    """What a handler sees of one request."""

    state: FakeState
    render: Renderer
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    actor: str
    """Who acts: the App's bot user for installation tokens."""

    def repo(self) -> Repo:
        found = self.state.repos.get(f"{self.params['owner']}/{self.params['repo']}".lower())
        if found is None:
            raise not_found()
        return found

    def pull(self, key: str = "pull_number") -> PullRequest:
        found = self.state.find_pull(self.repo(), int(self.params[key]))
        if found is None:
            raise not_found()
        return found

    def field(self, name: str, default: Any = None) -> Any:
        return self.body.get(name, default) if isinstance(self.body, dict) else default

    def own(self, table: dict[int, Any], key: str) -> Any:
        """The record of ``table`` the path parameter ``key`` names, in this repository."""
        found = table.get(int(self.params[key]))
        if found is None or found.repo != self.repo().full_name:
            raise not_found()
        return found

    def page(self, items: list[Any], wrap: str | None = None) -> Reply:
        """One page of ``items`` (``per_page``, ``page``) with GitHub's ``Link`` header; ``wrap``
        names the list in a ``{"total_count", wrap}`` object."""
        size = max(1, min(100, int(self.query.get("per_page") or 30)))
        number, last = int(self.query.get("page") or 1), max(1, -(-len(items) // size))
        rels = {"prev": number - 1, "first": 1} if number > 1 else {}
        rels |= {"next": number + 1, "last": last} if number < last else {}
        url = f"{self.render.base}{self.path}?"
        links = [
            f'<{url}{urllib.parse.urlencode(self.query | {"page": n})}>; rel="{rel}"'
            for rel, n in rels.items()
        ]
        chunk = items[(number - 1) * size : number * size]
        body = chunk if wrap is None else {"total_count": len(items), wrap: chunk}
        return Reply(200, body, {"Link": ", ".join(links)} if links else {})


Handler = Callable[[Ctx], Reply]


@dataclass
class Route:
    method: str
    template: str
    handler: Handler
    auth: str
    """``token`` (an installation token) or ``jwt`` (the App's)."""
    pattern: re.Pattern[str]


ROUTES: list[Route] = []


def route(method: str, template: str, auth: str = "token") -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        def part(name: str) -> str:  # file paths and refs hold slashes; ids are numbers
            kinds = {"path": ".*", "ref": ".+", "branch": ".+", "workflow_id": "[^/]+"}
            return kinds.get(name, "[0-9]+" if name.endswith(("_number", "_id")) else "[^/]+")

        pieces = re.split(r"\{(\w+)\}", template)
        regex = "".join(
            f"(?P<{p}>{part(p)})" if i % 2 else re.escape(p) for i, p in enumerate(pieces)
        )
        ROUTES.append(Route(method, template, handler, auth, re.compile(regex + "$")))
        return handler

    return register


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The most specific route (the most literal characters) for ``path``."""
    found = [
        (r, m.groupdict()) for r in ROUTES if r.method == method and (m := r.pattern.match(path))
    ]
    return max(found, key=lambda f: len(re.sub(r"\{\w+\}", "", f[0].template)), default=None)


# -- the App, repositories, git -----------------------------------------------------------------


@route("POST", "/app/installations/{installation_id}/access_tokens", auth="jwt")
def create_token(ctx: Ctx) -> Reply:
    if int(ctx.params["installation_id"]) != ctx.state.installation_id:
        raise not_found()
    token, expires = ctx.state.issue_token()
    return Reply(201, ctx.render.installation_token(token, expires, ctx.field("permissions") or {}))


@route("GET", REPO + "/installation", auth="jwt")
def get_installation(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.installation(ctx.repo()))


@route("GET", REPO)
def get_repo(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.repo(ctx.repo()))


@route("GET", REPO + "/collaborators/{username}/permission")
def get_permission(ctx: Ctx) -> Reply:
    if ctx.params["username"].lower() not in ctx.state.users:
        raise not_found()
    return Reply(200, ctx.render.collaborator_permission(ctx.repo(), ctx.params["username"]))


@route("GET", REPO + "/git/ref/{ref}")
def get_ref(ctx: Ctx) -> Reply:
    repo, ref = ctx.repo(), ctx.params["ref"]
    if not ref.startswith("heads/") or ref.removeprefix("heads/") not in repo.branches:
        raise not_found()
    return Reply(200, ctx.render.git_ref(repo, ref.removeprefix("heads/")))


@route("POST", REPO + "/git/refs")
def create_ref(ctx: Ctx) -> Reply:
    repo, ref, sha = ctx.repo(), ctx.field("ref", ""), ctx.field("sha", "")
    if not ref.startswith("refs/") or ref.count("/") < 2:
        raise ApiError(422, f"{ref} is not a valid ref name.")
    if not ref.startswith("refs/heads/"):
        raise ApiError(422, "the fake makes branches only (refs/heads/...)", violation=True)
    if ref.removeprefix("refs/heads/") in repo.branches:
        raise ApiError(422, "Reference already exists")
    if not ctx.state.git.exists(sha):
        raise ApiError(422, "Object does not exist")
    ctx.state.move_branch(repo, ref.removeprefix("refs/heads/"), sha)
    return Reply(201, ctx.render.git_ref(repo, ref.removeprefix("refs/heads/")))


@route("GET", REPO + "/commits/{ref}")
def get_commit(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(ctx.params["ref"], repo.full_name)
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {ctx.params['ref']}")
    return Reply(200, ctx.render.commit(repo, ctx.state.get_commit(sha)))


@route("GET", REPO + "/contents/{path}")
def get_contents(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.state.resolve(ref, repo.full_name)
    if sha is None:
        raise ApiError(404, f"No commit found for the ref {ref}")
    commit, path = ctx.state.get_commit(sha), ctx.params["path"].strip("/")
    if path in commit.files:
        return Reply(
            200, ctx.render.content(repo, path, ref, commit.blobs[path], commit.files[path])
        )
    entries = ctx.state.git.folder(sha, path)
    if not entries:
        raise not_found()
    render = ctx.render.content
    return Reply(200, [render(repo, p, ref, blob, commit.files.get(p)) for p, blob in entries])


@route("PUT", REPO + "/contents/{path}")
def put_contents(ctx: Ctx) -> Reply:
    repo, path = ctx.repo(), ctx.params["path"].strip("/")
    branch = ctx.field("branch") or repo.default_branch
    if branch not in repo.branches:
        raise ApiError(404, f"Branch {branch} not found")
    try:
        text = base64.b64decode(ctx.field("content", ""), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as error:
        raise invalid("Commit", "content", "invalid", "content is not valid Base64") from error
    current = ctx.state.get_commit(repo.branches[branch]).blobs.get(path)
    if current is not None and ctx.field("sha") is None:
        raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
    if current not in (None, ctx.field("sha")):
        raise ApiError(409, f"{path} does not match {ctx.field('sha')}")
    sha = ctx.state.commit(
        branch, {path: text}, ctx.field("message", ""), ctx.actor, repo.full_name
    )
    commit = ctx.state.get_commit(sha)
    content = ctx.render.content(repo, path, branch, commit.blobs[path], text)
    del content["content"], content["encoding"]
    body = {"content": content, "commit": ctx.render.git_commit(repo, commit)}
    return Reply(201 if current is None else 200, body)


# -- pull requests ------------------------------------------------------------------------------


@route("GET", REPO + "/pulls")
def list_pulls(ctx: Ctx) -> Reply:
    state, query = ctx.query.get("state", "open"), ctx.query
    pulls = [pr for pr in ctx.state.pulls(ctx.repo().full_name) if state in ("all", pr.state)]
    owner, _, branch = query.get("head", "").rpartition(":")
    if "head" in query:
        pulls = [
            p
            for p in pulls
            if p.head == branch and p.head_repo.lower().startswith(owner.lower() + "/")
        ]
    pulls = [p for p in pulls if query.get("base", p.base) == p.base]
    pulls.sort(key=lambda pr: pr.number, reverse=query.get("direction", "desc") == "desc")
    return ctx.page([ctx.render.pull(pr, simple=True) for pr in pulls])


@route("POST", REPO + "/pulls")
def create_pull(ctx: Ctx) -> Reply:
    repo, head, base = ctx.repo(), ctx.field("head", ""), ctx.field("base")
    owner, _, branch = head.rpartition(":")
    source = ctx.state.repos.get(f"{owner}/{repo.name}".lower()) if owner else repo
    if base not in repo.branches:
        raise invalid("PullRequest", "base", "invalid")
    if source is None or branch not in source.branches:
        raise invalid("PullRequest", "head", "invalid")
    for pr in ctx.state.pulls(repo.full_name):
        if (pr.state, pr.head_repo, pr.head, pr.base) == ("open", source.full_name, branch, base):
            message = f"A pull request already exists for {source.owner}:{branch}."
            raise invalid("PullRequest", "", "custom", message)
    if ctx.state.git.is_ancestor(source.branches[branch], repo.branches[base]):
        raise invalid("PullRequest", "", "custom", f"No commits between {base} and {branch}")
    body = ctx.field("body") or ""
    number = ctx.state.open_pull(
        branch,
        base,
        ctx.field("title"),
        body,
        ctx.actor,
        repo=repo.full_name,
        head_repo=source.full_name,
    )
    return Reply(201, ctx.render.pull(ctx.state.pull(number, repo.full_name)))


@route("GET", REPO + "/pulls/{pull_number}")
def get_pull(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.pull(ctx.pull()))


@route("PATCH", REPO + "/pulls/{pull_number}")
def update_pull(ctx: Ctx) -> Reply:
    pr, state = ctx.pull(), ctx.field("state")
    if ctx.field("base", pr.base) not in ctx.repo().branches:
        raise invalid("PullRequest", "base", "invalid")
    if state == "open" and pr.merged:
        raise invalid("PullRequest", "state", "custom", "merged pull requests stay closed")
    pr.title, pr.body, pr.base = (
        ctx.field("title", pr.title),
        ctx.field("body", pr.body),
        ctx.field("base", pr.base),
    )
    if state in ("open", "closed") and state != pr.state:
        pr.state, pr.closed_at = state, now() if state == "closed" else None
    pr.updated_at = now()
    return Reply(200, ctx.render.pull(pr))


@route("PUT", REPO + "/pulls/{pull_number}/merge")
def merge_pull(ctx: Ctx) -> Reply:
    pr, git = ctx.pull(), ctx.state.git
    if not ctx.state.mergeable(pr):
        raise ApiError(405, "Pull Request is not mergeable")
    if ctx.field("sha", pr.head_sha) != pr.head_sha:
        raise ApiError(409, "Head branch was modified. Review and try the merge again.")
    method = ctx.field("merge_method") or "merge"
    if method == "merge":
        title, message = (
            f"Merge pull request #{pr.number} from {pr.head_repo.split('/')[0]}/{pr.head}",
            pr.title,
        )
    else:  # squash and rebase: the pull request's commit messages, as a list
        since = git.merge_base(pr.head_sha, ctx.state.pull_base_sha(pr))
        messages = [git.commit(sha).message for sha in git.log(pr.head_sha, since)]
        title, message = f"{pr.title} (#{pr.number})", "\n\n".join(f"* {m}" for m in messages)
    title, message = ctx.field("commit_title") or title, ctx.field("commit_message", message)
    sha = ctx.state.merge_pull(pr, method, title, message, ctx.actor)
    if sha is None:
        raise ApiError(405, "Pull Request is not mergeable")
    return Reply(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})


@route("GET", REPO + "/pulls/{pull_number}/files")
def list_pull_files(ctx: Ctx) -> Reply:
    pr = ctx.pull()
    repo = ctx.state.repo(pr.head_repo)
    return ctx.page([ctx.render.diff_entry(repo, c, pr.head_sha) for c in ctx.state.pull_files(pr)])


# -- comments, reactions, labels ----------------------------------------------------------------


@route("GET", REPO + "/issues/{issue_number}/comments")
def list_comments(ctx: Ctx) -> Reply:
    pr = ctx.pull("issue_number")
    return ctx.page([ctx.render.comment(c) for c in ctx.state.comments(pr.number, pr.repo)])


@route("POST", REPO + "/issues/{issue_number}/comments")
def create_comment(ctx: Ctx) -> Reply:
    pr = ctx.pull("issue_number")
    made = ctx.state.add_comment(pr.number, ctx.field("body", ""), ctx.actor, pr.repo)
    return Reply(201, ctx.render.comment(made))


@route("PATCH", REPO + "/issues/comments/{comment_id}")
def update_comment(ctx: Ctx) -> Reply:
    comment = ctx.own(ctx.state.all_comments, "comment_id")
    comment.body, comment.updated_at = ctx.field("body", ""), now()
    return Reply(200, ctx.render.comment(comment))


@route("POST", REPO + "/issues/comments/{comment_id}/reactions")
def create_reaction(ctx: Ctx) -> Reply:
    comment = ctx.own(ctx.state.all_comments, "comment_id")
    made, new = ctx.state.add_reaction(comment.id, ctx.field("content"), ctx.actor)
    return Reply(201 if new else 200, ctx.render.reaction(made))


@route("GET", REPO + "/issues/{issue_number}/labels")
def list_labels(ctx: Ctx) -> Reply:
    pr = ctx.pull("issue_number")
    return ctx.page([ctx.render.label(ctx.repo(), name) for name in pr.labels])


@route("POST", REPO + "/issues/{issue_number}/labels")
def add_labels(ctx: Ctx) -> Reply:
    pr, repo = ctx.pull("issue_number"), ctx.repo()
    names = ctx.body.get("labels", []) if isinstance(ctx.body, dict) else ctx.body
    for name in names:
        canonical = ctx.state.label(repo, str(name))[0]
        pr.labels += [] if canonical in pr.labels else [canonical]
    pr.updated_at = now()
    return Reply(200, [ctx.render.label(repo, name) for name in pr.labels])


# -- check runs ---------------------------------------------------------------------------------


def _check_fields(run: CheckRun, body: dict[str, Any]) -> CheckRun:
    def moment(value: Any) -> datetime | None:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None

    for key in ("name", "details_url", "external_id", "status", "started_at", "completed_at"):
        if key in body:
            setattr(run, key, moment(body[key]) if key.endswith("_at") else body[key])
    for key in ("title", "summary", "text"):
        setattr(run, key, (body.get("output") or {}).get(key, getattr(run, key)))
    if body.get("conclusion") is not None:
        run.conclusion, run.status = body["conclusion"], "completed"
    if run.status == "completed":
        run.completed_at = run.completed_at or now()
    return run


@route("POST", REPO + "/check-runs")
def create_check_run(ctx: Ctx) -> Reply:
    repo, body = ctx.repo(), ctx.body if isinstance(ctx.body, dict) else {}
    if not ctx.state.git.exists(body.get("head_sha", "")):
        raise ApiError(422, f"No commit found for SHA: {body.get('head_sha')}")
    run = ctx.state.add_check_run(repo.full_name, body["name"], body["head_sha"], started_at=now())
    return Reply(201, ctx.render.check_run(_check_fields(run, body)))


@route("PATCH", REPO + "/check-runs/{check_run_id}")
def update_check_run(ctx: Ctx) -> Reply:
    run = ctx.own(ctx.state.all_check_runs, "check_run_id")
    return Reply(200, ctx.render.check_run(_check_fields(run, ctx.body or {})))


@route("GET", REPO + "/commits/{ref}/check-runs")
def list_check_runs(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(ctx.params["ref"], repo.full_name)
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {ctx.params['ref']}")
    runs = sorted(ctx.state.check_runs(sha, repo.full_name), key=lambda r: -r.id)
    runs = [r for r in runs if ctx.query.get("check_name", r.name) == r.name]
    runs = [r for r in runs if ctx.query.get("status", r.status) == r.status]
    if ctx.query.get("filter", "latest") == "latest":  # the newest run of each name
        latest: dict[str, CheckRun] = {}
        runs = [latest.setdefault(r.name, r) for r in runs if r.name not in latest]
    return ctx.page([ctx.render.check_run(r) for r in runs], wrap="check_runs")


# -- GitHub Actions -----------------------------------------------------------------------------


@route("GET", REPO + "/actions/workflows/{workflow_id}")
def get_workflow(ctx: Ctx) -> Reply:
    found = ctx.state.workflow(ctx.params["workflow_id"], ctx.repo().full_name)
    if found is None:
        raise not_found()
    return Reply(200, ctx.render.workflow(found))


@route("POST", REPO + "/actions/workflows/{workflow_id}/dispatches")
def dispatch_workflow(ctx: Ctx) -> Reply:
    repo, workflow = ctx.repo(), ctx.state.workflow(ctx.params["workflow_id"], ctx.repo().full_name)
    ref, inputs = ctx.field("ref", ""), dict(ctx.field("inputs") or {})
    if workflow is None:
        raise not_found()
    if not workflow.dispatchable:
        raise ApiError(422, "Workflow does not have 'workflow_dispatch' trigger")
    if ctx.state.resolve(ref, repo.full_name) is None:
        raise ApiError(422, f"No ref found for: {ref}")
    if set(inputs) - set(workflow.inputs):
        raise ApiError(
            422,
            f"Unexpected inputs provided: {json.dumps(sorted(set(inputs) - set(workflow.inputs)))}",
        )
    for name, spec in workflow.inputs.items():
        if (
            isinstance(spec, dict)
            and spec.get("required")
            and "default" not in spec
            and name not in inputs
        ):
            raise ApiError(422, f"Required input '{name}' not provided")
    run = ctx.state.dispatch(workflow, ref, inputs)
    if not ctx.field("return_run_details"):
        return Reply(204)
    url = f"{ctx.render.api(repo.full_name)}/actions/runs/{run.id}"
    html = f"{ctx.render.html(repo.full_name)}/actions/runs/{run.id}"
    return Reply(200, {"workflow_run_id": run.id, "run_url": url, "html_url": html})


def _runs(ctx: Ctx, runs: list[WorkflowRun]) -> Reply:
    filters = {"event": "event", "branch": "head_branch", "head_sha": "head_sha", "actor": "actor"}
    for key, name in filters.items():
        runs = [r for r in runs if ctx.query.get(key, getattr(r, name)) == getattr(r, name)]
    status = ctx.query.get("status")
    runs = [r for r in runs if status in (None, r.status, r.conclusion)]
    return ctx.page(
        [ctx.render.workflow_run(r) for r in sorted(runs, key=lambda r: -r.id)],
        wrap="workflow_runs",
    )


@route("GET", REPO + "/actions/workflows/{workflow_id}/runs")
def list_workflow_runs(ctx: Ctx) -> Reply:
    found = ctx.state.workflow(ctx.params["workflow_id"], ctx.repo().full_name)
    if found is None:
        raise not_found()
    return _runs(
        ctx, [r for r in ctx.state.runs(ctx.repo().full_name) if r.workflow_id == found.id]
    )


@route("GET", REPO + "/actions/runs")
def list_runs(ctx: Ctx) -> Reply:
    return _runs(ctx, ctx.state.runs(ctx.repo().full_name))


@route("GET", REPO + "/actions/runs/{run_id}")
def get_run(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.workflow_run(ctx.own(ctx.state.all_runs, "run_id")))


@route("GET", REPO + "/actions/runs/{run_id}/artifacts")
def list_artifacts(ctx: Ctx) -> Reply:
    artifacts = ctx.state.artifacts(ctx.own(ctx.state.all_runs, "run_id").id)
    artifacts = [a for a in artifacts if ctx.query.get("name", a.name) == a.name]
    return ctx.page([ctx.render.artifact(a) for a in artifacts], wrap="artifacts")


@route("GET", REPO + "/actions/artifacts/{artifact_id}/zip")
def download_artifact(ctx: Ctx) -> Reply:
    artifact = ctx.own(ctx.state.all_artifacts, "artifact_id")
    signature = ctx.state.sign(f"artifact:{artifact.id}")
    return Reply(
        302, headers={"Location": f"{ctx.render.base}{DOWNLOAD}{artifact.id}.zip?sig={signature}"}
    )


def serve_download(state: FakeState, path: str, query: dict[str, str]) -> Reply:
    """The redirect's target: no token, the signature is the credential."""
    name = path.removeprefix(DOWNLOAD).removesuffix(".zip")
    artifact = state.all_artifacts.get(int(name)) if name.isdigit() else None
    if artifact is None or query.get("sig") != state.sign(f"artifact:{artifact.id}"):
        raise ApiError(404, "Not Found", violation="bad download")
    return Reply(200, raw=artifact_zip(artifact))
