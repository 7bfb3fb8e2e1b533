"""The fake GitHub's HTTP side: ``with FakeGitHub() as fake:`` serves a Starlette app with
uvicorn on ``fake.url`` (127.0.0.1) in a thread. A request is routed by the description to the
method named after its operation (``pulls/get``: ``pulls_get``), authenticated as a GitHub App's
(``apps/`` operations want a JWT signed with ``private_key_pem``: RS256, ``iss`` = ``app_id``,
``exp`` in the future and at most 10 minutes after ``iat``; the others an installation token),
validated, answered and logged in ``requests``; unknown or invalid ones go to ``violations``
too, and answers off their schema to ``response_problems``.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import traceback
import urllib.parse
import uuid
from functools import cache
from typing import Any, TypeVar

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization as pem
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .gitstore import Record
from .openapi import fixtures_dir, load_spec
from .state import APP_EVENTS, APP_PERMISSIONS, ROLES, FakeState, artifact_zip, iso, now
from .webhooks import Webhooks

T = TypeVar("T")
Answer = tuple[int, Any] | tuple[int, Any, dict[str, str]]  # status, body (or bytes), headers
DOWNLOAD = "/_fake/artifacts/"  # where an artifact's zip redirects, as GitHub's to blob storage


class ApiError(Exception):
    """An error answer; a ``violation`` (``True`` or the reason) is recorded too."""

    def __init__(self, status: int, message: str, errors: Any = None, violation: Any = False):
        super().__init__(message)
        self.status, self.message, self.errors, self.violation = status, message, errors, violation


def invalid(name: str, code: str = "invalid", message: str = "") -> ApiError:
    error = {"resource": "PullRequest", "field": name, "code": code, "message": message}
    return ApiError(422, "Validation Failed", [{k: v for k, v in error.items() if v}])


def found(value: T | None) -> T:
    """``value``, if there is one; else GitHub's 404."""
    if not value:
        raise ApiError(404, "Not Found")
    return value


class Req(Record):
    """A request as a handler sees it: ``path``, ``params``, ``query``, ``body``."""

    def field(self, name: str, default: Any = None) -> Any:
        return self.body.get(name, default) if isinstance(self.body, dict) else default


@cache
def _key_pair() -> tuple[str, Any]:
    """An RSA key pair (PEM private key, public key), made once per process: it is slow."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    text = key.private_bytes(pem.Encoding.PEM, pem.PrivateFormat.PKCS8, pem.NoEncryption())
    return text.decode(), key.public_key()


class FakeGitHub(FakeState):
    """A GitHub the bot's PyGithub code can talk to over HTTP."""

    def __init__(self) -> None:
        super().__init__()
        self.spec, self.fixtures, self.webhooks = load_spec(), fixtures_dir(), Webhooks(self)
        self.private_key_pem, self._public_key = _key_pair()
        self._socket = socket.socket()
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delayed ACKs
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        verbs = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        app = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=verbs)])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, args=([self._socket],))
        self._thread.daemon = True

    def start(self) -> FakeGitHub:
        """Serve on ``url``; returns once requests are answered."""
        if not self._thread.is_alive():
            self._thread.start()
        for _ in range(5000):  # 10 s
            if self._server.started:
                return self
            time.sleep(0.002)
        raise RuntimeError("the fake GitHub did not start")

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
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

    def _auth_problem(self, app: bool, header: str) -> str | None:
        scheme, _, credential = header.partition(" ")
        if scheme.lower() not in ("token", "bearer") or not credential.strip():
            return "Bad credentials" if header else "Requires authentication"
        if not app:
            return None if self.token_valid(credential.strip()) else "Bad credentials"
        try:
            required = jwt.types.Options(require=["exp", "iat", "iss"])
            claims = jwt.decode(credential.strip(), self._public_key, ["RS256"], options=required)
        except jwt.PyJWTError as error:  # a bad signature, an ``exp`` in the past...
            return f"A JSON web token could not be decoded: {error}"
        if str(claims["iss"]) != str(self.app_id) or claims["exp"] - claims["iat"] > 660:
            return "A JSON web token could not be decoded: another App's, or exp too far"
        return None

    async def _endpoint(self, request: Request) -> Response:
        method, path, query = request.method, request.url.path, dict(request.query_params)
        headers, raw = {k.lower(): v for k, v in request.headers.items()}, await request.body()
        with self.lock:
            route = self.spec.route(method, path)
            status, body, extra = self._answer(method, path, query, headers, raw, route)
            log = {"status": status, "headers": headers, "response_headers": extra}
            self.requests.append(Record(method=method, path=path, response_body=body, **log))
            if route and isinstance(body, dict | list):
                where = (method, route[0], status, body)
                self.response_problems += self.spec.validate_response(*where)
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        media = "application/zip" if isinstance(body, bytes) else "application/json; charset=utf-8"
        extra["X-GitHub-Request-Id"] = uuid.uuid4().hex[:20].upper()
        return Response(content if body is not None else b"", status, extra, media)

    def _answer(self, method: str, path: str, query: Any, head: Any, raw: Any, route: Any) -> Any:
        """Status, body and extra headers of a request (``route``: ``Spec.route``'s)."""
        try:
            if route is None and method == "GET" and path.startswith(DOWNLOAD):
                return *self._download(path, query), {}
            if route is None:
                raise ApiError(404, "Not Found", violation="unknown endpoint")
            template, operation, params = route
            handler = getattr(self, operation.replace("/", "_").replace("-", "_"), None)
            if handler is None:
                raise ApiError(404, "Not Found", violation="an operation the fake does not serve")
            auth = head.get("authorization", "")
            problem = self._auth_problem(operation.startswith("apps/"), auth)
            if problem is not None:
                raise ApiError(401, problem)
            try:
                body = json.loads(raw) if raw else None
            except ValueError as error:
                raise ApiError(400, "Problems parsing JSON", violation="not JSON") from error
            problems = self.spec.validate_request(method, template, query, body)
            if problems:
                detail = [{"resource": template, "code": "invalid", "message": p} for p in problems]
                raise ApiError(422, "Invalid request.\n\n" + "\n".join(problems), detail, True)
            answer = handler(Req(path=path, params=params, query=query, body=body))
            return answer if len(answer) == 3 else (*answer, {})
        except ApiError as error:
            failure = error
        except Exception as error:  # a bug of the fake: answer 500 and make the test see it
            trace = f"fake GitHub failed: {error!r}\n{traceback.format_exc(limit=-3)}"
            failure = ApiError(500, trace, violation=True)
        if failure.violation:
            reason = failure.violation if isinstance(failure.violation, str) else failure.message
            what = {"method": method, "path": path, "status": failure.status, "reason": reason}
            self.violations.append(Record(**what))
        body = {"message": failure.message, "documentation_url": f"{self.url}/rest"}
        body |= {"status": str(failure.status), "errors": failure.errors}
        body = {key: value for key, value in body.items() if value}
        return failure.status, body, {}

    def _repo(self, req: Req) -> Record:
        return found(self.repos.get(f"{req.params['owner']}/{req.params['repo']}".lower()))

    def _pull(self, req: Req, key: str = "pull_number") -> Record:
        pulls = self.find("pull", repo=self._repo(req).full_name, number=int(req.params[key]))
        return found(pulls[0] if pulls else None)

    def _own(self, kind: str, req: Req, key: str) -> Record:
        record = self.records.get(int(req.params[key]))
        mine = record and (record.kind, record.repo) == (kind, self._repo(req).full_name)
        return found(record if mine else None)

    def _sha(self, req: Req, ref: str) -> str:
        return found(self.resolve(ref, self._repo(req).full_name))

    def _page(self, req: Req, items: list[Any], wrap: str | None = None) -> Answer:
        """A page of ``items`` with GitHub's ``Link`` header, in a ``{total_count, wrap}``."""
        size = max(1, min(100, int(req.query.get("per_page") or 30)))
        number, last = int(req.query.get("page") or 1), max(1, -(-len(items) // size))
        rels = {"prev": number - 1, "first": 1} if number > 1 else {}
        rels |= {"next": number + 1, "last": last} if number < last else {}
        pages = {rel: urllib.parse.urlencode(req.query | {"page": n}) for rel, n in rels.items()}
        links = [f'<{self.url}{req.path}?{page}>; rel="{rel}"' for rel, page in pages.items()]
        chunk = items[(number - 1) * size : number * size]
        body = chunk if wrap is None else {"total_count": len(items), wrap: chunk}
        return 200, body, {"Link": ", ".join(links)} if links else {}

    def apps_create_installation_access_token(self, req: Req) -> Answer:
        found(int(req.params["installation_id"]) == self.installation_id)
        token, expires = self.issue_token()
        body = self.example("installation-token", token=token, expires_at=iso(expires))
        body["permissions"] = req.field("permissions") or APP_PERMISSIONS
        body["repository_selection"] = "all"
        return 201, {key: value for key, value in body.items() if key != "repositories"}

    def apps_get_repo_installation(self, req: Req) -> Answer:
        owner, ident = self._repo(req).owner, self.installation_id
        body = self.example("installation", ids={"1": str(ident), "github": owner}, id=ident)
        body.update(account=self.user_json(owner), target_id=self.user_id(owner))
        body.update(app_id=self.app_id, app_slug=self.app_slug, client_id=f"Iv1.{self.app_id:016x}")
        body.update(permissions=APP_PERMISSIONS, events=APP_EVENTS, target_type="User")
        return 200, body

    def repos_get(self, req: Req) -> Answer:
        return 200, self.repo_json(self._repo(req))

    def repos_get_collaborator_permission_level(self, req: Req) -> Answer:
        login = found(req.params["username"].lower() in self.users and req.params["username"])
        role = self.permission(login, self._repo(req).full_name)
        keys = ("pull", "triage", "push", "maintain", "admin")
        user = self.user_json(login) | {"role_name": role}
        user["permissions"] = {key: ROLES.index(role) > i for i, key in enumerate(keys)}
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        return 200, {"permission": legacy, "role_name": role, "user": user}

    def git_get_ref(self, req: Req) -> Answer:
        repo, ref = self._repo(req), req.params["ref"]
        found(ref.startswith("heads/") and ref.removeprefix("heads/") in repo.branches)
        return 200, self.ref_json(repo, ref.removeprefix("heads/"))

    def git_create_ref(self, req: Req) -> Answer:
        repo, ref, sha = self._repo(req), req.field("ref", ""), req.field("sha", "")
        branch = ref.removeprefix("refs/heads/")
        taken = branch in repo.branches
        if branch == ref or taken or not self.git.exists(sha):
            message = "Reference already exists" if taken else "Object does not exist"
            raise ApiError(422, message, violation=branch == ref and "not a branch")
        self.move_branch(repo, branch, sha)
        return 201, self.ref_json(repo, branch)

    def repos_get_commit(self, req: Req) -> Answer:
        commit = self.get_commit(self._sha(req, req.params["ref"]))
        return 200, self.commit_json(self._repo(req), commit)

    def repos_get_content(self, req: Req) -> Answer:
        repo, path = self._repo(req), req.params["path"].strip("/")
        ref = req.query.get("ref") or repo.default_branch
        commit = self.get_commit(self._sha(req, ref))
        if path in commit.files:
            return 200, self.content_json(repo, path, ref, commit.blobs[path], commit.files[path])
        entries = found(self.git.folder(commit.sha, path))
        return 200, [self.content_json(repo, p, ref, b, commit.files.get(p)) for p, b in entries]

    def repos_create_or_update_file_contents(self, req: Req) -> Answer:
        repo, path, given = self._repo(req), req.params["path"].strip("/"), req.field("sha")
        branch = req.field("branch") or repo.default_branch
        current = self.get_commit(found(repo.branches.get(branch))).blobs.get(path)
        if current not in (None, given):
            raise ApiError(409 if given else 422, f"{path} does not match {given}")
        text = base64.b64decode(req.field("content"), validate=True).decode()
        by, message = self.bot_login, req.field("message")
        commit = self.get_commit(self.commit(branch, {path: text}, message, by, repo.full_name))
        content = self.content_json(repo, path, branch, commit.blobs[path], text)
        del content["content"], content["encoding"]
        body = {"content": content, "commit": self.git_commit_json(repo, commit)}
        return 201 if current is None else 200, body

    def pulls_list(self, req: Req) -> Answer:
        query, state = req.query, req.query.get("state", "open")
        owner, _, branch = query.get("head", ":").rpartition(":")
        pulls = [pr for pr in self.pulls(self._repo(req).full_name) if state in ("all", pr.state)]
        pulls = [pr for pr in pulls if query.get("base", pr.base) == pr.base]
        if "head" in query:
            head = f"{owner}/{self._repo(req).name}".lower() if owner else None
            pulls = [p for p in pulls if p.head == branch and head in (None, p.head_repo.lower())]
        pulls.sort(key=lambda pr: pr.number, reverse=query.get("direction", "desc") == "desc")
        return self._page(req, [self.pull_json(pr, simple=True) for pr in pulls])

    def pulls_create(self, req: Req) -> Answer:
        repo, base, head = self._repo(req), req.field("base"), req.field("head", "")
        owner, _, branch = head.rpartition(":")
        source = self.repos.get(f"{owner or repo.owner}/{repo.name}".lower())
        if base not in repo.branches:
            raise invalid("base")
        if source is None or branch not in source.branches:
            raise invalid("head")
        key, pulls = ("open", source.full_name, branch, base), self.pulls(repo.full_name)
        if any((pr.state, pr.head_repo, pr.head, pr.base) == key for pr in pulls):
            raise invalid("", "custom", f"A pull request already exists for {head}.")
        head_sha = source.branches[branch]
        if self.git.merge_base(head_sha, repo.branches[base]) == head_sha:
            raise invalid("", "custom", f"No commits between {base} and {branch}")
        title, body, at = req.field("title"), req.field("body") or "", {"repo": repo.full_name}
        at["head_repo"] = source.full_name
        number = self.open_pull(branch, base, title, body, self.bot_login, **at)
        return 201, self.pull_json(self.pull(number, repo.full_name))

    def pulls_update(self, req: Req) -> Answer:
        pr, state = self._pull(req), req.field("state", "")
        if req.field("base", pr.base) not in self._repo(req).branches:
            raise invalid("base")
        if state == "open" and pr.merged:
            raise invalid("state", "custom", "merged pull requests stay closed")
        pr.title, pr.body = req.field("title", pr.title), req.field("body", pr.body)
        pr.base, pr.updated_at = req.field("base", pr.base), now() if req.body else pr.updated_at
        if state in ("open", "closed") and state != pr.state:
            pr.state, pr.closed_at = state, now() if state == "closed" else None
        return 200, self.pull_json(pr)

    pulls_get = pulls_update  # with no body, it changes nothing

    def pulls_merge(self, req: Req) -> Answer:
        pr, method = self._pull(req), req.field("merge_method") or "merge"
        if not self.mergeable(pr):
            raise ApiError(405, "Pull Request is not mergeable")
        if req.field("sha", pr.head_sha) != pr.head_sha:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        title = f"Merge pull request #{pr.number} from {pr.head_repo.split('/')[0]}/{pr.head}"
        message = pr.title
        if method != "merge":  # squash and rebase: the title, then the commits' messages
            since = self.git.merge_base(pr.head_sha, self.pull_base_sha(pr))
            title, commits = f"{pr.title} (#{pr.number})", self.git.log(pr.head_sha, since)
            message = "\n\n".join(f"* {self.git.commit(sha).message}" for sha in commits)
        title, message = req.field("commit_title") or title, req.field("commit_message", message)
        text = f"{title}\n\n{message}" if message else title
        sha = self.merge_pull(pr, method, text, self.bot_login)
        return 200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}

    def pulls_list_files(self, req: Req) -> Answer:
        pr = self._pull(req)
        head = self.repo(pr.head_repo)
        listed = self.pull_files(pr)[: self.pull_files_limit]  # GitHub stops at 3,000 files
        return self._page(req, [self.diff_json(head, c, pr.head_sha) for c in listed])

    def issues_create_comment(self, req: Req) -> Answer:
        pr, body = self._pull(req, "issue_number"), req.field("body")
        if req.body is None:  # GET: the comments
            return self._page(req, [*map(self.comment_json, self.comments(pr.number, pr.repo))])
        return 201, self.comment_json(self.add_comment(pr.number, body, self.bot_login, pr.repo))

    issues_list_comments = issues_create_comment

    def issues_update_comment(self, req: Req) -> Answer:
        comment = self._own("comment", req, "comment_id")
        comment.body, comment.updated_at = req.field("body"), now()
        return 200, self.comment_json(comment)

    def reactions_create_for_issue_comment(self, req: Req) -> Answer:
        comment, match = self._own("comment", req, "comment_id"), {"user": self.bot_login}
        match |= {"comment_id": comment.id, "content": req.field("content")}
        mine = self.find("reaction", **match)
        made = mine[0] if mine else self.add("reaction", **match)
        body = self.example("reaction", of=made, node="Reaction", user=self.user_json(made.user))
        return 200 if mine else 201, body

    def issues_add_labels(self, req: Req) -> Answer:
        pr, repo = self._pull(req, "issue_number"), self._repo(req)
        for name in req.field("labels") if isinstance(req.body, dict) else req.body or []:
            canonical = self.label(repo, str(name))[0]
            pr.labels += [] if canonical in pr.labels else [canonical]
        return self._page(req, [self.label_json(repo, name) for name in pr.labels])

    issues_list_labels_on_issue = issues_add_labels

    def checks_create(self, req: Req) -> Answer:
        new = "check_run_id" not in req.params
        if new:
            sha, name = self._sha(req, req.field("head_sha")), req.field("name")
            run = self.add_check_run(self._repo(req).full_name, name, sha)
        run = run if new else self._own("check run", req, "check_run_id")
        run.name, run.status = req.field("name", run.name), req.field("status", run.status)
        for key in ("title", "summary", "text"):
            setattr(run, key, (req.field("output") or {}).get(key, getattr(run, key)))
        if req.field("conclusion") is not None:
            run.conclusion, run.status = req.field("conclusion"), "completed"
        run.completed_at = run.completed_at or (now() if run.status == "completed" else None)
        return 201 if new else 200, self.check_run_json(run)

    checks_update = checks_create

    def checks_list_for_ref(self, req: Req) -> Answer:
        runs = self.check_runs(self._sha(req, req.params["ref"]), self._repo(req).full_name)
        runs = [r for r in runs[::-1] if req.query.get("check_name", r.name) == r.name]
        if req.query.get("filter", "latest") == "latest":  # the newest run of each name
            runs = [r for i, r in enumerate(runs) if r.name not in {x.name for x in runs[:i]}]
        return self._page(req, [self.check_run_json(r) for r in runs], "check_runs")

    def actions_get_workflow(self, req: Req) -> Answer:
        workflow = self.workflow(req.params["workflow_id"], self._repo(req).full_name)
        return 200, self.workflow_json(found(workflow))

    def actions_create_workflow_dispatch(self, req: Req) -> Answer:
        workflow = found(self.workflow(req.params["workflow_id"], self._repo(req).full_name))
        ref, inputs, declared = req.field("ref"), req.field("inputs") or {}, workflow.inputs
        if not workflow.dispatchable or self.resolve(ref, workflow.repo) is None:
            raise ApiError(422, f"No workflow_dispatch trigger, or no ref {ref}")
        if set(inputs) - set(declared):
            unexpected = json.dumps(sorted(set(inputs) - set(declared)))
            raise ApiError(422, f"Unexpected inputs provided: {unexpected}")
        for name, spec in declared.items():
            if spec.get("required") and "default" not in spec and name not in inputs:
                raise ApiError(422, f"Required input '{name}' not provided")
        run = self.create_run(workflow, ref, "workflow_dispatch", inputs, repo=workflow.repo)
        record = {"repo": run.repo, "workflow": workflow.file_name, "ref": ref, "inputs": inputs}
        self.add("dispatch", **record, run_id=run.id)
        return 204, None

    def actions_list_workflow_runs(self, req: Req) -> Answer:
        repo, ident = self._repo(req).full_name, req.params.get("workflow_id")
        workflow = found(self.workflow(ident, repo)).id if ident else None
        runs = [r for r in self.runs(repo) if workflow in (None, r.workflow_id)]
        for key, name in (("event", "event"), ("branch", "head_branch"), ("head_sha", "head_sha")):
            runs = [r for r in runs if req.query.get(key, getattr(r, name)) == getattr(r, name)]
        status = req.query.get("status")
        runs = [r for r in runs[::-1] if status in (None, r.status, r.conclusion)]
        return self._page(req, [self.run_json(r) for r in runs], "workflow_runs")

    actions_list_workflow_runs_for_repo = actions_list_workflow_runs

    def actions_get_workflow_run(self, req: Req) -> Answer:
        return 200, self.run_json(self._own("run", req, "run_id"))

    def repos_list_activities(self, req: Req) -> Answer:
        if not self.activity_api:  # older GitHub Enterprise Servers have no such endpoint
            raise ApiError(404, "Not Found")
        found = self.find("activity", repo=self._repo(req).full_name)
        ref = req.query.get("ref")
        if ref:
            full = ref if ref.startswith("refs/") else f"refs/heads/{ref}"
            found = [a for a in found if a.ref == full]
        kind = req.query.get("activity_type")
        found = [a for a in found if kind in (None, a.activity_type)]
        if req.query.get("direction", "desc") == "desc":
            found = found[::-1]
        return self._page(req, [self.activity_json(a) for a in found])

    def actions_list_jobs_for_workflow_run(self, req: Req) -> Answer:
        run = self._own("run", req, "run_id")
        return self._page(req, [self.job_json(j) for j in self.jobs(run.id)], "jobs")

    def actions_list_workflow_run_artifacts(self, req: Req) -> Answer:
        kept = self.find("artifact", run_id=self._own("run", req, "run_id").id)
        kept = [a for a in kept if req.query.get("name", a.name) == a.name]
        return self._page(req, [self.artifact_json(a) for a in kept], "artifacts")

    def actions_download_artifact(self, req: Req) -> Answer:
        artifact = self._own("artifact", req, "artifact_id")
        signature = self.sign(f"artifact:{artifact.id}")
        return 302, None, {"Location": f"{self.url}{DOWNLOAD}{artifact.id}.zip?sig={signature}"}

    def _download(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        """The redirect's target: the signature is the credential."""
        name = path.removeprefix(DOWNLOAD).removesuffix(".zip")
        artifact = self.records.get(int(name)) if name.isdigit() else None
        if artifact is None or query.get("sig") != self.sign(f"artifact:{artifact.id}"):
            raise ApiError(404, "Not Found", violation="bad download")
        return 200, artifact_zip(artifact)
