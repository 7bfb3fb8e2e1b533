"""Handlers: the App installation, repositories, refs, contents, commits and permissions."""

from __future__ import annotations

import base64
import binascii

from .gitstore import blob_sha
from .routing import ROUTER, ApiError, Ctx, Reply, not_found, validation_failed

REPO = "/repos/{owner}/{repo}"


@ROUTER.route("POST", "/app/installations/{installation_id}/access_tokens", auth="jwt")
def create_installation_token(ctx: Ctx) -> Reply:
    if int(ctx.params["installation_id"]) != ctx.state.installation_id:
        raise not_found()
    token, expires = ctx.state.issue_token()
    permissions = ctx.field("permissions") or {}
    return Reply(201, ctx.render.installation_token(token, expires, permissions))


@ROUTER.route("GET", REPO + "/installation", auth="jwt")
def get_repo_installation(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.installation(ctx.state.installation_id, ctx.repo()))


@ROUTER.route("GET", REPO)
def get_repo(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.repo(ctx.repo()))


# -- refs and branches -------------------------------------------------------------------------


@ROUTER.route("GET", REPO + "/git/ref/{ref}")
def get_ref(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ref = ctx.params["ref"]
    branch = ref.removeprefix("heads/")
    if not ref.startswith("heads/") or branch not in repo.branches:
        raise not_found()
    return Reply(200, ctx.render.git_ref(repo, branch))


@ROUTER.route("POST", REPO + "/git/refs")
def create_ref(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ref, sha = ctx.field("ref", ""), ctx.field("sha", "")
    if not ref.startswith("refs/") or ref.count("/") < 2:
        raise ApiError(422, f"{ref} is not a valid ref name.")
    if not ref.startswith("refs/heads/"):
        raise ApiError(422, "The fake creates branch refs only (refs/heads/...)", violation=True)
    branch = ref.removeprefix("refs/heads/")
    if branch in repo.branches:
        raise ApiError(422, "Reference already exists")
    if ctx.state.store.get(sha) is None:
        raise ApiError(422, "Object does not exist")
    ctx.state.move_branch(repo, branch, sha)
    return Reply(201, ctx.render.git_ref(repo, branch))


@ROUTER.route("DELETE", REPO + "/git/refs/{ref}")
def delete_ref(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    branch = ctx.params["ref"].removeprefix("heads/")
    if not ctx.params["ref"].startswith("heads/") or branch not in repo.branches:
        raise ApiError(422, "Reference does not exist")
    if branch == repo.default_branch:
        raise ApiError(422, "Cannot delete the default branch")
    del repo.branches[branch]
    return Reply(204)


@ROUTER.route("GET", REPO + "/branches/{branch}")
def get_branch(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    if ctx.params["branch"] not in repo.branches:
        raise ApiError(404, "Branch not found")
    return Reply(200, ctx.render.branch(repo, ctx.params["branch"]))


@ROUTER.route("GET", REPO + "/branches/{branch}/protection")
def get_branch_protection(ctx: Ctx) -> Reply:
    if ctx.params["branch"] not in ctx.repo().branches:
        raise ApiError(404, "Branch not found")
    raise ApiError(404, "Branch not protected")


@ROUTER.route("GET", REPO + "/codeowners/errors")
def get_codeowners_errors(ctx: Ctx) -> Reply:
    return Reply(200, {"errors": list(ctx.repo().codeowners_errors)})


@ROUTER.route("GET", REPO + "/commits/{ref}")
def get_commit(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(ctx.params["ref"], repo.full_name)
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {ctx.params['ref']}")
    return Reply(200, ctx.render.commit(repo, ctx.state.get_commit(sha)))


# -- contents ----------------------------------------------------------------------------------


@ROUTER.route("GET", REPO + "/contents/{path}")
def get_contents(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    ref = ctx.query.get("ref") or repo.default_branch
    sha = ctx.state.resolve(ref, repo.full_name)
    if sha is None:
        raise ApiError(404, f"No commit found for the ref {ref}")
    files = ctx.state.get_commit(sha).files
    path = ctx.params["path"].strip("/")
    if path in files:
        return Reply(200, ctx.render.content_file(repo, path, files[path], ref))
    prefix = path + "/" if path else ""
    children = sorted({p[len(prefix) :].split("/")[0] for p in files if p.startswith(prefix)})
    if not children:
        raise not_found()
    entries = [ctx.render.content_entry(repo, prefix + name, ref, files) for name in children]
    return Reply(200, entries)


@ROUTER.route("PUT", REPO + "/contents/{path}")
def put_contents(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    path = ctx.params["path"].strip("/")
    branch = ctx.field("branch") or repo.default_branch
    if branch not in repo.branches:
        raise ApiError(404, f"Branch {branch} not found")
    try:
        text = base64.b64decode(ctx.field("content", ""), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as error:
        raise validation_failed(
            "Commit", "content", "invalid", "content is not valid Base64"
        ) from error
    current = ctx.state.get_commit(repo.branches[branch]).files.get(path)
    given = ctx.field("sha")
    if current is not None:
        if given is None:
            raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
        if given != blob_sha(current):
            raise ApiError(409, f"{path} does not match {given}")
    author = ctx.actor
    sha = ctx.state.commit(branch, {path: text}, ctx.field("message", ""), author, repo.full_name)
    body = ctx.render.file_commit(repo, path, ctx.state.get_commit(sha), branch)
    return Reply(201 if current is None else 200, body)


# -- permissions -------------------------------------------------------------------------------


@ROUTER.route("GET", REPO + "/collaborators/{username}/permission")
def get_collaborator_permission(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    login = ctx.params["username"]
    if login.lower() not in ctx.state.users:
        raise not_found()
    return Reply(200, ctx.render.collaborator_permission(repo, login))
