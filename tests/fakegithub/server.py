"""The fake GitHub's HTTP side: a Starlette app served by uvicorn on 127.0.0.1 in a thread::

    with FakeGitHub() as fake:                    # or fake.start() ... fake.stop()
        fake.create_repo("octo", "recipes", {"README.md": "hi\\n"})
        app = github.Auth.AppAuth(fake.app_id, fake.private_key_pem)
        gh = github.Github(base_url=fake.url, auth=app.get_installation_auth(fake.installation_id))

Authentication is a GitHub App's: the token endpoints want a JWT signed with the App's key
(RS256, ``iss`` = ``app_id``, ``exp`` in the future and at most 10 minutes after ``iat``), the
others an installation token. A request is routed to its handler by the path template the
description spells (the same template names the operation it is validated against),
authenticated, validated, answered from the state and logged in ``requests``; an unknown or
invalid one is recorded in ``violations``, and (with ``validate_responses``) a JSON answer off
its schema in ``response_problems``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import socket
import threading
import time
import traceback
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization as pem
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .openapi import EXTRA_OPERATIONS, fixtures_dir, load_spec
from .render import APP_EVENTS, APP_PERMISSIONS, Bodies, artifact_zip, iso
from .state import CheckRun, PullRequest, Repo, RequestRecord, Violation, WorkflowRun, now
from .webhooks import Webhooks

REPO = "/repos/{owner}/{repo}"
DOWNLOAD = "/_fake/artifacts/"
"""Where an artifact's ``zip`` redirects (GitHub sends a signed blob-storage URL)."""


class ApiError(Exception):
    """An error reply in GitHub's shape; a ``violation`` (``True`` or the reason) is recorded:
    a request GitHub would refuse too, or one the fake cannot answer."""

    def __init__(self, status: int, message: str, errors: Any = None, violation: Any = False):
        super().__init__(message)
        self.status, self.message, self.errors, self.violation = status, message, errors, violation


def invalid(resource: str, name: str, code: str, message: str = "") -> ApiError:
    error = {"resource": resource, "field": name, "code": code, "message": message}
    return ApiError(422, "Validation Failed", [{k: v for k, v in error.items() if v}])


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    """Content that is not JSON (a zip)."""


@dataclass
class Req:
    """One request, as a handler sees it."""

    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any

    def field(self, name: str, default: Any = None) -> Any:
        return self.body.get(name, default) if isinstance(self.body, dict) else default


Handler = Callable[["FakeGitHub", Req], Reply]
ROUTES: list[tuple[str, str, str, re.Pattern[str], Handler]] = []
"""(method, template, auth: ``token`` or ``jwt``, pattern, handler)."""


def route(method: str, template: str, auth: str = "token") -> Callable[[Handler], Handler]:
    """Register a handler; file paths and refs may hold slashes, ids are numbers."""
    kinds = {"path": ".*", "ref": ".+", "workflow_id": "[^/]+"}

    def part(name: str) -> str:
        return kinds.get(name, "[0-9]+" if name.endswith(("_number", "_id")) else "[^/]+")

    pieces = re.split(r"\{(\w+)\}", template)
    regex = "".join(f"(?P<{p}>{part(p)})" if i % 2 else re.escape(p) for i, p in enumerate(pieces))

    def register(handler: Handler) -> Handler:
        ROUTES.append((method, template, auth, re.compile(regex + "$"), handler))
        return handler

    return register


@cache
def _key_pair() -> tuple[str, Any]:
    """An RSA key pair (PEM private key, public key), made once per process: it is slow."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    text = key.private_bytes(pem.Encoding.PEM, pem.PrivateFormat.PKCS8, pem.NoEncryption())
    return text.decode(), key.public_key()


class FakeGitHub(Bodies):
    """A GitHub the bot's PyGithub code can talk to over HTTP (see the module docstring)."""

    def __init__(
        self,
        *,
        app_id: int = 424242,
        installation_id: int = 111,
        app_slug: str = "attune",
        validate_responses: bool = True,
        fixtures: Path | None = None,
    ) -> None:
        super().__init__(app_id=app_id, app_slug=app_slug, installation_id=installation_id)
        self.fixtures = fixtures or fixtures_dir()
        self.spec = load_spec(str(self.fixtures / "rest-api-subset.json"))
        self.private_key_pem, self._public_key = _key_pair()
        self.validate_responses = validate_responses
        self.webhooks = Webhooks(self)
        self._socket = socket.socket()
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delayed ACKs
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._hosted = {}
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        app = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=methods)])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread: threading.Thread | None = None

    def start(self) -> FakeGitHub:
        """Serve on ``url`` (a free port of 127.0.0.1); returns once requests are answered."""
        if self._thread is None:
            args = {"sockets": [self._socket]}
            self._thread = threading.Thread(target=self._server.run, kwargs=args, daemon=True)
            self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake GitHub did not start")
            time.sleep(0.002)
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def app_jwt(self, lifetime: int = 540) -> str:
        """A JWT for the App, as ``github.Auth.AppAuth`` makes one."""
        stamp = int(time.time())
        claims = {"iat": stamp - 60, "exp": stamp + lifetime, "iss": str(self.app_id)}
        return jwt.encode(claims, self.private_key_pem, algorithm="RS256")

    def _auth_problem(self, kind: str, header: str) -> str | None:
        scheme, _, credential = header.partition(" ")
        if scheme.lower() not in ("token", "bearer") or not credential.strip():
            return "Bad credentials" if header else "Requires authentication"
        if kind == "token":
            return None if self.token_valid(credential.strip()) else "Bad credentials"
        try:
            claims = jwt.decode(
                credential.strip(),
                self._public_key,
                ["RS256"],
                options={"require": ["exp", "iat", "iss"]},
            )
        except jwt.ExpiredSignatureError:
            return "'Expiration time' claim ('exp') must be a numeric value in the future"
        except jwt.PyJWTError:
            return "A JSON web token could not be decoded"
        if str(claims["iss"]) != str(self.app_id):
            return "A JSON web token could not be decoded"
        if int(claims["exp"]) - int(claims["iat"]) > 660:
            return "'Expiration time' claim ('exp') is too far in the future"
        return None

    async def _endpoint(self, request: Request) -> Response:
        headers = {key.lower(): value for key, value in request.headers.items()}
        query, raw = dict(request.query_params), await request.body()
        reply = self.process(request.method, request.url.path, query, headers, raw)
        content = reply.raw
        if content is None and reply.body is not None and reply.status not in (204, 302):
            content = json.dumps(reply.body).encode()
        media = "application/zip" if reply.raw is not None else "application/json; charset=utf-8"
        out = {"X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(), "X-RateLimit-Limit": "5000"}
        out |= {"X-RateLimit-Remaining": "4999", "X-RateLimit-Reset": str(int(time.time()) + 3600)}
        return Response(
            content or b"", reply.status, out | reply.headers, media if content else None
        )

    def process(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw: bytes
    ) -> Reply:
        """Answer one request (what the HTTP endpoint does, without a socket)."""
        with self.lock:
            found = [(r, m) for r in ROUTES if r[0] == method and (m := r[3].match(path))]
            best = max(found, key=lambda f: len(re.sub(r"\{\w+\}", "", f[0][1])), default=None)
            template, body = best[0][1] if best else None, raw or None
            try:
                body = json.loads(raw) if raw else None
                if best is None and method == "GET" and path.startswith(DOWNLOAD):
                    reply = self._download(path, query)
                elif best is None:
                    raise ApiError(404, "Not Found", violation="unknown endpoint")
                else:
                    req = Req(path, best[1].groupdict(), query, body)
                    reply = self._answer(best[0], req, headers.get("authorization", ""))
            except json.JSONDecodeError:
                reply = self._error(
                    method,
                    path,
                    ApiError(400, "Problems parsing JSON", violation="body is not JSON"),
                )
            except ApiError as error:
                reply = self._error(method, path, error)
            except Exception as error:  # a bug of the fake: answer 500 and make the test see it
                trace = f"fake GitHub failed: {error!r}\n{traceback.format_exc(limit=-3)}"
                reply = self._error(method, path, ApiError(500, trace, violation=True))
            text = "&".join(f"{k}={v}" for k, v in query.items())
            record = (method, path, text, reply.status, template, body, reply.body, headers)
            self.requests.append(RequestRecord(*record, reply.headers))
            if self.validate_responses and template and reply.raw is None and reply.body:
                found_problems = self.spec.validate_response(
                    method, template, reply.status, reply.body
                )
                self.response_problems += found_problems
            return reply

    def _answer(self, route: tuple[str, str, str, Any, Handler], req: Req, auth: str) -> Reply:
        method, template, kind, _, handler = route
        problem = self._auth_problem(kind, auth)
        if problem is not None:
            raise ApiError(401, problem)
        if not self.spec.operation(method, template) and (method, template) not in EXTRA_OPERATIONS:
            raise ApiError(404, "Not Found", violation="not described")
        has_body = req.body is not None
        problems = self.spec.validate_request(method, template, req.query, req.body, has_body)
        if problems:
            errors = [{"resource": template, "code": "invalid", "message": p} for p in problems]
            raise ApiError(422, "Invalid request.\n\n" + "\n".join(problems), errors, True)
        return handler(self, req)

    def _error(self, method: str, path: str, error: ApiError) -> Reply:
        if error.violation:
            reason = error.violation if isinstance(error.violation, str) else error.message
            self.violations.append(Violation(method, path, error.status, reason))
        body = {"message": error.message, "documentation_url": f"{self.url}/rest"}
        body |= {"status": str(error.status)} | ({"errors": error.errors} if error.errors else {})
        return Reply(error.status, body)

    # -- what handlers share -------------------------------------------------------------------

    def _repo(self, req: Req) -> Repo:
        found = self.repos.get(f"{req.params['owner']}/{req.params['repo']}".lower())
        if found is None:
            raise ApiError(404, "Not Found")
        return found

    def _pull(self, req: Req, key: str = "pull_number") -> PullRequest:
        found = self.pull_requests.get((self._repo(req).full_name.lower(), int(req.params[key])))
        if found is None:
            raise ApiError(404, "Not Found")
        return found

    def _own(self, table: dict[int, Any], req: Req, key: str) -> Any:
        """The record of ``table`` the path parameter ``key`` names, in this repository."""
        found = table.get(int(req.params[key]))
        if found is None or found.repo != self._repo(req).full_name:
            raise ApiError(404, "Not Found")
        return found

    def _page(self, req: Req, items: list[Any], wrap: str | None = None) -> Reply:
        """One page (``per_page``, ``page``) with GitHub's ``Link`` header; ``wrap`` names
        the list in a ``{"total_count", wrap}`` object."""
        size = max(1, min(100, int(req.query.get("per_page") or 30)))
        number, last = int(req.query.get("page") or 1), max(1, -(-len(items) // size))
        rels = {"prev": number - 1, "first": 1} if number > 1 else {}
        rels |= {"next": number + 1, "last": last} if number < last else {}
        url = f"{self.url}{req.path}?"
        links = [
            f'<{url}{urllib.parse.urlencode(req.query | {"page": n})}>; rel="{rel}"'
            for rel, n in rels.items()
        ]
        chunk = items[(number - 1) * size : number * size]
        body = chunk if wrap is None else {"total_count": len(items), wrap: chunk}
        return Reply(200, body, {"Link": ", ".join(links)} if links else {})

    def _workflow_of(self, req: Req) -> Any:
        found = self.workflow(req.params["workflow_id"], self._repo(req).full_name)
        if found is None:
            raise ApiError(404, "Not Found")
        return found

    # -- the App, repositories, git ------------------------------------------------------------

    @route("POST", "/app/installations/{installation_id}/access_tokens", auth="jwt")
    def _create_token(self, req: Req) -> Reply:
        if int(req.params["installation_id"]) != self.installation_id:
            raise ApiError(404, "Not Found")
        token, expires = self.issue_token()
        body = self.example("installation-token", token=token, expires_at=iso(expires))
        body.update(
            permissions=req.field("permissions") or APP_PERMISSIONS, repository_selection="all"
        )
        del body["repositories"]
        return Reply(201, body)

    @route("GET", REPO + "/installation", auth="jwt")
    def _get_installation(self, req: Req) -> Reply:
        owner, ident = self._repo(req).owner, self.installation_id
        body = self.example("installation", ids={"1": str(ident), "github": owner}, id=ident)
        body.update(
            account=self.user_json(owner), target_id=self.user_id(owner), target_type="User"
        )
        body.update(app_id=self.app_id, app_slug=self.app_slug, client_id=f"Iv1.{self.app_id:016x}")
        return Reply(200, body | {"permissions": APP_PERMISSIONS, "events": APP_EVENTS})

    @route("GET", REPO)
    def _get_repo(self, req: Req) -> Reply:
        return Reply(200, self.repo_json(self._repo(req)))

    @route("GET", REPO + "/collaborators/{username}/permission")
    def _get_permission(self, req: Req) -> Reply:
        if req.params["username"].lower() not in self.users:
            raise ApiError(404, "Not Found")
        return Reply(200, self.collaborator_json(self._repo(req), req.params["username"]))

    @route("GET", REPO + "/git/ref/{ref}")
    def _get_ref(self, req: Req) -> Reply:
        repo, ref = self._repo(req), req.params["ref"]
        if not ref.startswith("heads/") or ref.removeprefix("heads/") not in repo.branches:
            raise ApiError(404, "Not Found")
        return Reply(200, self.ref_json(repo, ref.removeprefix("heads/")))

    @route("POST", REPO + "/git/refs")
    def _create_ref(self, req: Req) -> Reply:
        repo, ref, sha = self._repo(req), req.field("ref", ""), req.field("sha", "")
        branch = ref.removeprefix("refs/heads/")
        if not ref.startswith("refs/heads/") or not branch:
            raise ApiError(
                422, f"{ref} is not a branch ref", violation="the fake makes branches only"
            )
        if branch in repo.branches:
            raise ApiError(422, "Reference already exists")
        if not self.git.exists(sha):
            raise ApiError(422, "Object does not exist")
        self.move_branch(repo, branch, sha)
        return Reply(201, self.ref_json(repo, branch))

    @route("GET", REPO + "/commits/{ref}")
    def _get_commit(self, req: Req) -> Reply:
        repo = self._repo(req)
        sha = self.resolve(req.params["ref"], repo.full_name)
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {req.params['ref']}")
        return Reply(200, self.commit_json(repo, self.get_commit(sha)))

    @route("GET", REPO + "/contents/{path}")
    def _get_contents(self, req: Req) -> Reply:
        repo = self._repo(req)
        ref = req.query.get("ref") or repo.default_branch
        sha = self.resolve(ref, repo.full_name)
        if sha is None:
            raise ApiError(404, f"No commit found for the ref {ref}")
        commit, path = self.get_commit(sha), req.params["path"].strip("/")
        if path in commit.files:
            return Reply(
                200, self.content_json(repo, path, ref, commit.blobs[path], commit.files[path])
            )
        entries = self.git.folder(sha, path)
        if not entries:
            raise ApiError(404, "Not Found")
        found = [self.content_json(repo, p, ref, blob, commit.files.get(p)) for p, blob in entries]
        return Reply(200, found)

    @route("PUT", REPO + "/contents/{path}")
    def _put_contents(self, req: Req) -> Reply:
        repo, path = self._repo(req), req.params["path"].strip("/")
        branch, given = req.field("branch") or repo.default_branch, req.field("sha")
        if branch not in repo.branches:
            raise ApiError(404, f"Branch {branch} not found")
        try:
            text = base64.b64decode(req.field("content", ""), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as error:
            raise invalid("Commit", "content", "invalid", "content is not valid Base64") from error
        current = self.get_commit(repo.branches[branch]).blobs.get(path)
        if current is not None and given is None:
            raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
        if current not in (None, given):
            raise ApiError(409, f"{path} does not match {given}")
        commit = self.get_commit(
            self.commit(
                branch, {path: text}, req.field("message", ""), self.bot_login, repo.full_name
            )
        )
        content = self.content_json(repo, path, branch, commit.blobs[path], text)
        del content["content"], content["encoding"]
        body = {"content": content, "commit": self.git_commit_json(repo, commit)}
        return Reply(201 if current is None else 200, body)

    # -- pull requests --------------------------------------------------------------------------

    @route("GET", REPO + "/pulls")
    def _list_pulls(self, req: Req) -> Reply:
        query, state = req.query, req.query.get("state", "open")
        pulls = [pr for pr in self.pulls(self._repo(req).full_name) if state in ("all", pr.state)]
        owner, _, branch = query.get("head", "").rpartition(":")
        if "head" in query:
            pulls = [
                p
                for p in pulls
                if p.head == branch and p.head_repo.lower().startswith(f"{owner}/".lower())
            ]
        pulls = [pr for pr in pulls if query.get("base", pr.base) == pr.base]
        pulls.sort(key=lambda pr: pr.number, reverse=query.get("direction", "desc") == "desc")
        return self._page(req, [self.pull_json(pr, simple=True) for pr in pulls])

    @route("POST", REPO + "/pulls")
    def _create_pull(self, req: Req) -> Reply:
        repo, base = self._repo(req), req.field("base")
        owner, _, branch = req.field("head", "").rpartition(":")
        source = self.repos.get(f"{owner}/{repo.name}".lower()) if owner else repo
        if base not in repo.branches:
            raise invalid("PullRequest", "base", "invalid")
        if source is None or branch not in source.branches:
            raise invalid("PullRequest", "head", "invalid")
        for pr in self.pulls(repo.full_name):
            if (pr.state, pr.head_repo, pr.head, pr.base) == (
                "open",
                source.full_name,
                branch,
                base,
            ):
                raise invalid(
                    "PullRequest",
                    "",
                    "custom",
                    f"A pull request already exists for {source.owner}:{branch}.",
                )
        if self.git.is_ancestor(source.branches[branch], repo.branches[base]):
            raise invalid("PullRequest", "", "custom", f"No commits between {base} and {branch}")
        title, body = req.field("title"), req.field("body") or ""
        number = self.open_pull(
            branch,
            base,
            title,
            body,
            self.bot_login,
            repo=repo.full_name,
            head_repo=source.full_name,
        )
        return Reply(201, self.pull_json(self.pull(number, repo.full_name)))

    @route("GET", REPO + "/pulls/{pull_number}")
    def _get_pull(self, req: Req) -> Reply:
        return Reply(200, self.pull_json(self._pull(req)))

    @route("PATCH", REPO + "/pulls/{pull_number}")
    def _update_pull(self, req: Req) -> Reply:
        pr, state = self._pull(req), req.field("state", "")
        if req.field("base", pr.base) not in self._repo(req).branches:
            raise invalid("PullRequest", "base", "invalid")
        if state == "open" and pr.merged:
            raise invalid("PullRequest", "state", "custom", "merged pull requests stay closed")
        pr.title, pr.body = req.field("title", pr.title), req.field("body", pr.body)
        pr.base, pr.updated_at = req.field("base", pr.base), now()
        if state in ("open", "closed") and state != pr.state:
            pr.state, pr.closed_at = state, now() if state == "closed" else None
        return Reply(200, self.pull_json(pr))

    @route("PUT", REPO + "/pulls/{pull_number}/merge")
    def _merge_pull(self, req: Req) -> Reply:
        pr, method = self._pull(req), req.field("merge_method") or "merge"
        if not self.mergeable(pr):
            raise ApiError(405, "Pull Request is not mergeable")
        if req.field("sha", pr.head_sha) != pr.head_sha:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        owner = pr.head_repo.split("/")[0]
        title, message = f"Merge pull request #{pr.number} from {owner}/{pr.head}", pr.title
        if method != "merge":  # squash and rebase: the title, and the commit messages listed
            since = self.git.merge_base(pr.head_sha, self.pull_base_sha(pr))
            shas = self.git.log(pr.head_sha, since)
            title = f"{pr.title} (#{pr.number})"
            message = "\n\n".join(f"* {self.git.commit(sha).message}" for sha in shas)
        title, message = req.field("commit_title") or title, req.field("commit_message", message)
        sha = self.merge_pull(
            pr, method, f"{title}\n\n{message}" if message else title, self.bot_login
        )
        if sha is None:
            raise ApiError(405, "Pull Request is not mergeable")
        return Reply(
            200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}
        )

    @route("GET", REPO + "/pulls/{pull_number}/files")
    def _list_pull_files(self, req: Req) -> Reply:
        pr = self._pull(req)
        repo = self.repo(pr.head_repo)
        return self._page(req, [self.diff_json(repo, c, pr.head_sha) for c in self.pull_files(pr)])

    # -- comments, reactions, labels -----------------------------------------------------------

    @route("GET", REPO + "/issues/{issue_number}/comments")
    def _list_comments(self, req: Req) -> Reply:
        pr = self._pull(req, "issue_number")
        return self._page(req, [self.comment_json(c) for c in self.comments(pr.number, pr.repo)])

    @route("POST", REPO + "/issues/{issue_number}/comments")
    def _create_comment(self, req: Req) -> Reply:
        made = self.comment_on(
            self._pull(req, "issue_number"), req.field("body", ""), self.bot_login
        )
        return Reply(201, self.comment_json(made))

    @route("PATCH", REPO + "/issues/comments/{comment_id}")
    def _update_comment(self, req: Req) -> Reply:
        comment = self._own(self.all_comments, req, "comment_id")
        comment.body, comment.updated_at = req.field("body", ""), now()
        return Reply(200, self.comment_json(comment))

    @route("POST", REPO + "/issues/comments/{comment_id}/reactions")
    def _create_reaction(self, req: Req) -> Reply:
        comment = self._own(self.all_comments, req, "comment_id")
        made, new = self.add_reaction(comment.id, req.field("content"), self.bot_login)
        return Reply(201 if new else 200, self.reaction_json(made))

    @route("GET", REPO + "/issues/{issue_number}/labels")
    def _list_labels(self, req: Req) -> Reply:
        pr, repo = self._pull(req, "issue_number"), self._repo(req)
        return self._page(req, [self.label_json(repo, name) for name in pr.labels])

    @route("POST", REPO + "/issues/{issue_number}/labels")
    def _add_labels(self, req: Req) -> Reply:
        pr, repo = self._pull(req, "issue_number"), self._repo(req)
        for name in req.field("labels") if isinstance(req.body, dict) else req.body:
            canonical = self.label(repo, str(name))[0]
            pr.labels += [] if canonical in pr.labels else [canonical]
        pr.updated_at = now()
        return Reply(200, [self.label_json(repo, name) for name in pr.labels])

    # -- check runs ----------------------------------------------------------------------------

    def _update_check(self, run: CheckRun, req: Req) -> CheckRun:
        run.name, run.status = req.field("name", run.name), req.field("status", run.status)
        for key in ("title", "summary", "text"):
            setattr(run, key, (req.field("output") or {}).get(key, getattr(run, key)))
        if req.field("conclusion") is not None:
            run.conclusion, run.status = req.field("conclusion"), "completed"
        run.completed_at = run.completed_at or (now() if run.status == "completed" else None)
        return run

    @route("POST", REPO + "/check-runs")
    def _create_check_run(self, req: Req) -> Reply:
        repo, sha = self._repo(req), req.field("head_sha", "")
        if not self.git.exists(sha):
            raise ApiError(422, f"No commit found for SHA: {sha}")
        run = self.add_check_run(repo.full_name, req.field("name"), sha, started_at=now())
        return Reply(201, self.check_run_json(self._update_check(run, req)))

    @route("PATCH", REPO + "/check-runs/{check_run_id}")
    def _update_check_run(self, req: Req) -> Reply:
        run = self._own(self.all_check_runs, req, "check_run_id")
        return Reply(200, self.check_run_json(self._update_check(run, req)))

    @route("GET", REPO + "/commits/{ref}/check-runs")
    def _list_check_runs(self, req: Req) -> Reply:
        repo = self._repo(req)
        sha = self.resolve(req.params["ref"], repo.full_name)
        if sha is None:
            raise ApiError(422, f"No commit found for SHA: {req.params['ref']}")
        runs = sorted(self.check_runs(sha, repo.full_name), key=lambda r: -r.id)
        runs = [r for r in runs if req.query.get("check_name", r.name) == r.name]
        if req.query.get("filter", "latest") == "latest":  # the newest run of each name
            latest: dict[str, CheckRun] = {}
            runs = [latest.setdefault(r.name, r) for r in runs if r.name not in latest]
        return self._page(req, [self.check_run_json(r) for r in runs], "check_runs")

    # -- GitHub Actions ------------------------------------------------------------------------

    @route("GET", REPO + "/actions/workflows/{workflow_id}")
    def _get_workflow(self, req: Req) -> Reply:
        return Reply(200, self.workflow_json(self._workflow_of(req)))

    @route("POST", REPO + "/actions/workflows/{workflow_id}/dispatches")
    def _dispatch(self, req: Req) -> Reply:
        workflow, ref, inputs = self._workflow_of(req), req.field("ref"), req.field("inputs") or {}
        if not workflow.dispatchable:
            raise ApiError(422, "Workflow does not have 'workflow_dispatch' trigger")
        if self.resolve(ref, workflow.repo) is None:
            raise ApiError(422, f"No ref found for: {ref}")
        if set(inputs) - set(workflow.inputs):
            unexpected = json.dumps(sorted(set(inputs) - set(workflow.inputs)))
            raise ApiError(422, f"Unexpected inputs provided: {unexpected}")
        for name, spec in workflow.inputs.items():
            if spec.get("required") and "default" not in spec and name not in inputs:
                raise ApiError(422, f"Required input '{name}' not provided")
        self.dispatch(workflow, ref, inputs)
        return Reply(204)

    def _runs(self, req: Req, runs: list[WorkflowRun]) -> Reply:
        wanted = {"event": "event", "branch": "head_branch", "head_sha": "head_sha"}
        for key, name in wanted.items():
            runs = [r for r in runs if req.query.get(key, getattr(r, name)) == getattr(r, name)]
        status = req.query.get("status")
        runs = [r for r in runs if status in (None, r.status, r.conclusion)]
        runs.sort(key=lambda run: -run.id)
        return self._page(req, [self.run_json(r) for r in runs], "workflow_runs")

    @route("GET", REPO + "/actions/workflows/{workflow_id}/runs")
    def _list_workflow_runs(self, req: Req) -> Reply:
        workflow = self._workflow_of(req)
        return self._runs(
            req, [r for r in self.runs(workflow.repo) if r.workflow_id == workflow.id]
        )

    @route("GET", REPO + "/actions/runs")
    def _list_runs(self, req: Req) -> Reply:
        return self._runs(req, self.runs(self._repo(req).full_name))

    @route("GET", REPO + "/actions/runs/{run_id}")
    def _get_run(self, req: Req) -> Reply:
        return Reply(200, self.run_json(self._own(self.all_runs, req, "run_id")))

    @route("GET", REPO + "/actions/runs/{run_id}/artifacts")
    def _list_artifacts(self, req: Req) -> Reply:
        run = self._own(self.all_runs, req, "run_id")
        found = [a for a in self.all_artifacts.values() if a.run_id == run.id]
        found = [a for a in found if req.query.get("name", a.name) == a.name]
        return self._page(req, [self.artifact_json(a) for a in found], "artifacts")

    @route("GET", REPO + "/actions/artifacts/{artifact_id}/zip")
    def _download_artifact(self, req: Req) -> Reply:
        artifact = self._own(self.all_artifacts, req, "artifact_id")
        signature = self.sign(f"artifact:{artifact.id}")
        location = f"{self.url}{DOWNLOAD}{artifact.id}.zip?sig={signature}"
        return Reply(302, headers={"Location": location})

    def _download(self, path: str, query: dict[str, str]) -> Reply:
        """The redirect's target: no token, the signature is the credential."""
        name = path.removeprefix(DOWNLOAD).removesuffix(".zip")
        artifact = self.all_artifacts.get(int(name)) if name.isdigit() else None
        if artifact is None or query.get("sig") != self.sign(f"artifact:{artifact.id}"):
            raise ApiError(404, "Not Found", violation="bad download")
        return Reply(200, raw=artifact_zip(artifact))
