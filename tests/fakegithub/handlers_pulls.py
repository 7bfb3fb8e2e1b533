"""Handlers: pull requests, merges, files, issue comments, reactions and labels."""

from __future__ import annotations

import urllib.parse
from typing import Any

from .model import Comment, PullRequest, Repo, now
from .routing import ROUTER, ApiError, Ctx, Reply, not_found, validation_failed

REPO = "/repos/{owner}/{repo}"


def _head_spec(ctx: Ctx, repo: Repo, head: str) -> tuple[Repo | None, str]:
    """``owner:branch`` or ``branch`` -> (head repository, branch)."""
    if ":" not in head:
        return repo, head
    owner, branch = head.split(":", 1)
    if owner.lower() == repo.owner.lower():
        return repo, branch
    return ctx.state.find_repo(owner, repo.name), branch


# -- pull requests -----------------------------------------------------------------------------


@ROUTER.route("GET", REPO + "/pulls")
def list_pulls(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    state = ctx.query.get("state", "open")
    pulls = [pr for pr in ctx.state.pulls(repo.full_name) if state in ("all", pr.state)]
    if "head" in ctx.query:
        head = ctx.query["head"]
        owner, _, branch = head.rpartition(":")
        pulls = [
            pr
            for pr in pulls
            if pr.head == branch
            and (not owner or pr.head_repo.split("/")[0].lower() == owner.lower())
        ]
    if "base" in ctx.query:
        pulls = [pr for pr in pulls if pr.base == ctx.query["base"]]
    key = "updated_at" if ctx.query.get("sort") in ("updated", "popularity") else "created_at"
    default = "desc" if ctx.query.get("sort", "created") == "created" else "asc"
    descending = ctx.query.get("direction", default) == "desc"
    pulls.sort(key=lambda pr: (getattr(pr, key), pr.number), reverse=descending)
    return ctx.paginate([ctx.render.pull(pr, simple=True) for pr in pulls])


@ROUTER.route("POST", REPO + "/pulls")
def create_pull(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    title, head, base = ctx.field("title"), ctx.field("head"), ctx.field("base")
    for name, value in (("title", title), ("head", head), ("base", base)):
        if not value:
            raise validation_failed("PullRequest", name, "missing_field")
    head_repo, branch = _head_spec(ctx, repo, head)
    if base not in repo.branches:
        raise validation_failed("PullRequest", "base", "invalid")
    if head_repo is None or branch not in head_repo.branches:
        raise validation_failed("PullRequest", "head", "invalid")
    for pr in ctx.state.pulls(repo.full_name):
        if (pr.state, pr.head_repo, pr.head, pr.base) == (
            "open",
            head_repo.full_name,
            branch,
            base,
        ):
            message = f"A pull request already exists for {head_repo.owner}:{branch}."
            raise validation_failed("PullRequest", "", "custom", message)
    head_sha = head_repo.branches[branch]
    if ctx.state.store.is_ancestor(head_sha, repo.branches[base]):
        raise validation_failed(
            "PullRequest", "", "custom", f"No commits between {base} and {branch}"
        )
    number = ctx.state.open_pull(
        branch,
        base,
        title,
        ctx.field("body") or "",
        ctx.actor,
        repo=repo.full_name,
        head_repo=head_repo.full_name,
    )
    pr = ctx.state.pull(number, repo.full_name)
    pr.draft = bool(ctx.field("draft", False))
    return Reply(201, ctx.render.pull(pr))


@ROUTER.route("GET", REPO + "/pulls/{pull_number}")
def get_pull(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.pull(ctx.pull()))


@ROUTER.route("PATCH", REPO + "/pulls/{pull_number}")
def update_pull(ctx: Ctx) -> Reply:
    pr = ctx.pull()
    repo = ctx.repo()
    if ctx.field("title") is not None:
        pr.title = ctx.field("title")
    if ctx.field("body") is not None:
        pr.body = ctx.field("body")
    if ctx.field("base") is not None:
        if ctx.field("base") not in repo.branches:
            raise validation_failed("PullRequest", "base", "invalid")
        pr.base = ctx.field("base")
    state = ctx.field("state")
    if state == "closed" and pr.state == "open":
        pr.state, pr.closed_at = "closed", now()
    elif state == "open" and pr.state == "closed":
        if pr.merged:
            raise validation_failed(
                "PullRequest", "state", "custom", "merged pull requests stay closed"
            )
        pr.state, pr.closed_at = "open", None
    pr.updated_at = now()
    return Reply(200, ctx.render.pull(pr))


def _default_message(ctx: Ctx, pr: PullRequest, method: str) -> tuple[str, str]:
    head_owner = pr.head_repo.split("/")[0]
    if method == "merge":
        return f"Merge pull request #{pr.number} from {head_owner}/{pr.head}", pr.title
    store = ctx.state.store
    base = store.merge_base(pr.head_sha, ctx.state.pull_base_sha(pr))
    skip = set(store.ancestors(base)) if base else set()
    messages = [
        store.commits[sha].message for sha in store.ancestors(pr.head_sha) if sha not in skip
    ]
    return f"{pr.title} (#{pr.number})", "\n\n".join(f"* {m}" for m in reversed(messages))


@ROUTER.route("PUT", REPO + "/pulls/{pull_number}/merge")
def merge_pull(ctx: Ctx) -> Reply:
    pr = ctx.pull()
    if pr.state != "open" or not ctx.state.mergeable(pr):
        raise ApiError(405, "Pull Request is not mergeable")
    if ctx.field("sha") is not None and ctx.field("sha") != pr.head_sha:
        raise ApiError(409, "Head branch was modified. Review and try the merge again.")
    method = ctx.field("merge_method") or "merge"
    title, message = _default_message(ctx, pr, method)
    title = ctx.field("commit_title") or title
    message = ctx.field("commit_message", message)
    sha = ctx.state.merge_pull(pr, method, title, message, ctx.actor)
    if sha is None:
        raise ApiError(405, "Pull Request is not mergeable")
    return Reply(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})


@ROUTER.route("GET", REPO + "/pulls/{pull_number}/files")
def list_pull_files(ctx: Ctx) -> Reply:
    pr = ctx.pull()
    repo = ctx.state.repo(pr.head_repo)
    files = ctx.state.pull_files(pr)
    return ctx.paginate([ctx.render.diff_entry(repo, change, pr.head_sha) for change in files])


# -- issues, comments, reactions ---------------------------------------------------------------


def _issue(ctx: Ctx) -> PullRequest:
    return ctx.pull("issue_number")


def _comment(ctx: Ctx) -> Comment:
    repo = ctx.repo()
    found = ctx.state.all_comments.get(int(ctx.params["comment_id"]))
    if found is None or found.repo != repo.full_name:
        raise not_found()
    return found


@ROUTER.route("GET", REPO + "/issues/{issue_number}")
def get_issue(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.issue(_issue(ctx)))


@ROUTER.route("GET", REPO + "/issues/{issue_number}/comments")
def list_comments(ctx: Ctx) -> Reply:
    pr = _issue(ctx)
    comments = ctx.state.comments(pr.number, pr.repo)
    since = ctx.query.get("since")
    rendered = [ctx.render.comment(c) for c in comments]
    if since:
        rendered = [c for c in rendered if c["updated_at"] >= since]
    return ctx.paginate(rendered)


@ROUTER.route("POST", REPO + "/issues/{issue_number}/comments")
def create_comment(ctx: Ctx) -> Reply:
    pr = _issue(ctx)
    made = ctx.state.add_comment(pr.number, ctx.field("body", ""), ctx.actor, pr.repo)
    return Reply(201, ctx.render.comment(made))


@ROUTER.route("GET", REPO + "/issues/comments/{comment_id}")
def get_comment(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.comment(_comment(ctx)))


@ROUTER.route("PATCH", REPO + "/issues/comments/{comment_id}")
def update_comment(ctx: Ctx) -> Reply:
    comment = _comment(ctx)
    comment.body, comment.updated_at = ctx.field("body", ""), now()
    return Reply(200, ctx.render.comment(comment))


@ROUTER.route("POST", REPO + "/issues/comments/{comment_id}/reactions")
def create_reaction(ctx: Ctx) -> Reply:
    comment = _comment(ctx)
    made, new = ctx.state.add_reaction(comment.id, ctx.field("content"), ctx.actor)
    return Reply(201 if new else 200, ctx.render.reaction(made))


@ROUTER.route("GET", REPO + "/issues/comments/{comment_id}/reactions")
def list_reactions(ctx: Ctx) -> Reply:
    reactions = ctx.state.reactions(_comment(ctx).id)
    if "content" in ctx.query:
        reactions = [r for r in reactions if r.content == ctx.query["content"]]
    return ctx.paginate([ctx.render.reaction(r) for r in reactions])


# -- labels ------------------------------------------------------------------------------------


def _label_names(body: Any) -> list[str]:
    names = body.get("labels", []) if isinstance(body, dict) else body
    return [str(name) for name in names or []]


def _labels_reply(ctx: Ctx, pr: PullRequest) -> Reply:
    repo = ctx.repo()
    return Reply(200, [ctx.render.label(repo, ctx.state.label(repo, n)) for n in pr.labels])


@ROUTER.route("GET", REPO + "/issues/{issue_number}/labels")
def list_labels(ctx: Ctx) -> Reply:
    pr = _issue(ctx)
    reply = _labels_reply(ctx, pr)
    return ctx.paginate(reply.body)


@ROUTER.route("POST", REPO + "/issues/{issue_number}/labels")
def add_labels(ctx: Ctx) -> Reply:
    pr = _issue(ctx)
    for name in _label_names(ctx.body):
        canonical = ctx.state.label(ctx.repo(), name).name
        if canonical not in pr.labels:
            pr.labels.append(canonical)
    pr.updated_at = now()
    return _labels_reply(ctx, pr)


@ROUTER.route("PUT", REPO + "/issues/{issue_number}/labels")
def set_labels(ctx: Ctx) -> Reply:
    pr = _issue(ctx)
    pr.labels = []
    return add_labels(ctx)


@ROUTER.route("DELETE", REPO + "/issues/{issue_number}/labels/{name}")
def remove_label(ctx: Ctx) -> Reply:
    pr = _issue(ctx)
    name = urllib.parse.unquote(ctx.params["name"])
    matching = [label for label in pr.labels if label.lower() == name.lower()]
    if not matching:
        raise ApiError(404, "Label does not exist")
    pr.labels.remove(matching[0])
    pr.updated_at = now()
    return _labels_reply(ctx, pr)
