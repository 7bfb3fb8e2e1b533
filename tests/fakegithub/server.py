"""The fake GitHub's HTTP side: a Starlette app served by uvicorn on 127.0.0.1 in a thread::

    with FakeGitHub() as fake:                    # or fake.start() ... fake.stop()
        fake.create_repo("octo", "recipes", {"README.md": "hi\\n"})
        app = github.Auth.AppAuth(fake.app_id, fake.private_key_pem)
        auth = app.get_installation_auth(fake.installation_id)
        gh = github.Github(base_url=fake.url, auth=auth)

Authentication is a GitHub App's: the token endpoints want a JWT signed with the App's key
(RS256, ``iss`` = ``app_id``, ``exp`` in the future and at most 10 minutes after ``iat``),
every other endpoint an installation token. Each request is routed (handlers.py),
authenticated, validated against the description, answered from the state (state.py) and
logged in ``requests``; an unknown or invalid one is recorded in ``violations``. With
``validate_responses``, every JSON answer off its schema is recorded in ``response_problems``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import traceback
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as StarletteRoute

from .handlers import DOWNLOAD, ApiError, Ctx, Reply, Route, match, serve_download
from .openapi import EXTRA_OPERATIONS, fixtures_dir, load_spec
from .render import Renderer
from .state import FakeState, RequestRecord, Violation
from .webhooks import Webhooks


@cache
def _key_pair() -> tuple[str, Any]:
    """An RSA key pair (PEM private key, public key), made once per process: it is slow."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return pem.decode(), key.public_key()


class FakeGitHub(FakeState):
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
        self.url = ""
        """``http://127.0.0.1:PORT`` once started."""
        self.render = Renderer(self, self.spec, self.url)
        self.webhooks = Webhooks(self)
        methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
        self.app = Starlette(
            routes=[StarletteRoute("/{path:path}", self._endpoint, methods=methods)]
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeGitHub:
        """Listen on a free port of 127.0.0.1; returns once requests are served."""
        if self._server is not None:
            return self
        sock = socket.socket()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delayed-ACK stalls
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.render = Renderer(self, self.spec, self.url)
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", loop="asyncio")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-github", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake GitHub did not start")
            time.sleep(0.002)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=5)
        self._server = self._thread = None

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
        options = {"require": ["exp", "iat", "iss"]}
        try:
            claims = jwt.decode(credential.strip(), self._public_key, ["RS256"], options=options)
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
        query = dict(request.query_params)
        reply = self.process(request.method, request.url.path, query, headers, await request.body())
        content = reply.raw
        if content is None and reply.body is not None and reply.status not in (204, 302, 304):
            content = json.dumps(reply.body).encode()
        media = "application/zip" if reply.raw is not None else "application/json; charset=utf-8"
        rate = {"Limit": "5000", "Remaining": "4999", "Used": "1", "Resource": "core"}
        out = {f"X-RateLimit-{key}": value for key, value in rate.items()}
        out["X-RateLimit-Reset"] = str(int(time.time()) + 3600)
        out.update(
            {
                "X-GitHub-Media-Type": "github.v3; format=json",
                "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
            }
        )
        return Response(
            content or b"", reply.status, out | reply.headers, media if content else None
        )

    def process(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw: bytes
    ) -> Reply:
        """Answer one request (what the HTTP endpoint does, without a socket)."""
        with self.lock:
            found, body = match(method, path), raw or None
            template = found[0].template if found else None
            try:
                body = json.loads(raw) if raw else None
                reply = self._answer(
                    found, method, path, query, headers.get("authorization", ""), body
                )
            except json.JSONDecodeError:
                reply = self._error(
                    method,
                    path,
                    ApiError(400, "Problems parsing JSON", violation="body is not JSON"),
                )
            except ApiError as error:
                reply = self._error(method, path, error)
            except Exception as error:  # a bug of the fake: answer 500 and make the test see it
                trace = traceback.format_exc(limit=-3)
                failed = ApiError(500, f"fake GitHub failed: {error!r}\n{trace}", violation=True)
                reply = self._error(method, path, failed)
            query_text = "&".join(f"{k}={v}" for k, v in query.items())
            record = (method, path, query_text, reply.status, template, body, reply.body, headers)
            self.requests.append(RequestRecord(*record, reply.headers))
            if (
                self.validate_responses
                and template
                and reply.raw is None
                and reply.body is not None
            ):
                self.response_problems += self.spec.validate_response(
                    method, template, reply.status, reply.body
                )
            return reply

    def _error(self, method: str, path: str, error: ApiError) -> Reply:
        if error.violation:
            reason = error.violation if isinstance(error.violation, str) else error.message
            self.violations.append(Violation(method, path, error.status, reason))
        body = {
            "message": error.message,
            "documentation_url": f"{self.url}/rest",
            "status": str(error.status),
        }
        return Reply(error.status, body | ({"errors": error.errors} if error.errors else {}))

    def _answer(
        self,
        found: tuple[Route, dict[str, str]] | None,
        method: str,
        path: str,
        query: dict[str, str],
        auth: str,
        body: Any,
    ) -> Reply:
        if found is None and method == "GET" and path.startswith(DOWNLOAD):
            return serve_download(self, path, query)
        if found is None:
            raise ApiError(404, "Not Found", violation="unknown endpoint")
        route, params = found
        problem = self._auth_problem(route.auth, auth)
        if problem is not None:
            raise ApiError(401, problem)
        if (
            self.spec.operation(method, route.template) is None
            and (method, route.template) not in EXTRA_OPERATIONS
        ):
            raise ApiError(404, "Not Found", violation="not described")
        problems = self.spec.validate_request(method, route.template, query, body, body is not None)
        if problems:
            errors = [
                {"resource": route.template, "code": "invalid", "message": p} for p in problems
            ]
            raise ApiError(
                422, "Invalid request.\n\n" + "\n".join(problems), errors, violation=True
            )
        ctx = Ctx(
            self, Renderer(self, self.spec, self.url), path, params, query, body, self.bot_login
        )
        return route.handler(ctx)
