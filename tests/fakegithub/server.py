"""The HTTP side of the fake: a Starlette app served by uvicorn on 127.0.0.1 in a thread.

``FakeGitHub`` is a ``FakeState`` (see state.py and actions.py for the test API) that also
listens::

    with FakeGitHub() as fake:               # or fake.start() ... fake.stop()
        fake.create_repo("octo", "recipes", {"README.md": "hi\\n"})
        auth = github.Auth.AppAuth(fake.app_id, fake.private_key_pem)
        gi = github.GithubIntegration(auth=auth, base_url=fake.url)
        token = gi.get_access_token(fake.installation_id).token
        gh = github.Github(base_url=fake.url, auth=github.Auth.Token(token))

Authentication works like a GitHub App's: the fake makes an RSA key pair; ``POST
/app/installations/{id}/access_tokens`` and ``GET /repos/{o}/{r}/installation`` want a JWT
signed with it (RS256, ``iss`` = ``app_id``, ``exp`` in the future, at most 10 minutes after
``iat``); every other endpoint wants ``Authorization: token|Bearer <installation token>``.

Each request is matched against the handlers (``routing.ROUTER``), authenticated, validated
against the description (openapi.py), answered from the state, logged in ``requests``, and, when
it is unknown or invalid, recorded in ``violations``. With ``validate_responses`` every JSON
response of a described operation is checked against its schema; mismatches go to
``response_problems``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import traceback
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import handlers_actions, handlers_pulls, handlers_repo  # noqa: F401  (register routes)
from .handlers_actions import DOWNLOAD_PREFIX, serve_download
from .model import RequestRecord, Violation
from .openapi import EXTRA_OPERATIONS, Spec, fixtures_dir, load_spec
from .render import retarget_hosts
from .render_actions import Renderer
from .routing import ROUTER, ApiError, Ctx, Reply
from .state import FakeState
from .webhooks import Webhooks

DOCS_URL = "https://docs.github.com/rest"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_KEY_LOCK = threading.Lock()
_KEYS: list[tuple[str, Any]] = []


def _key_pair() -> tuple[str, Any]:
    """An RSA key pair (PEM private key, public key object), made once per process."""
    with _KEY_LOCK:
        if not _KEYS:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ).decode()
            _KEYS.append((pem, key.public_key()))
        return _KEYS[0]


class FakeGitHub(FakeState):
    """A GitHub the bot's PyGithub code can talk to over HTTP. See the module docstring."""

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
        """The GitHub fixtures folder (description and recorded webhooks)."""
        self.spec: Spec = load_spec(str(self.fixtures / "rest-api-subset.json"))
        self.private_key_pem, self._public_key = _key_pair()
        self.validate_responses = validate_responses
        self.url = ""
        """``http://127.0.0.1:PORT`` once started."""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.webhooks = Webhooks(self)
        """Webhook payload builders for this fake (webhooks.py)."""
        self.app = Starlette(routes=[Route("/{path:path}", self._endpoint, methods=METHODS)])

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        """Listen on a free port of 127.0.0.1; returns once requests are served."""
        if self._server is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms delayed-ACK stalls
        sock.bind(("127.0.0.1", 0))
        self._socket = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="off", loop="asyncio"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-github", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake GitHub server did not start")
            time.sleep(0.002)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- credentials ---------------------------------------------------------------------------

    def app_jwt(self, lifetime: int = 540) -> str:
        """A JWT for the App, as ``github.Auth.AppAuth`` makes one."""
        stamp = int(time.time())
        claims = {"iat": stamp - 60, "exp": stamp + lifetime, "iss": str(self.app_id)}
        return jwt.encode(claims, self.private_key_pem, algorithm="RS256")

    def _jwt_problem(self, token: str) -> str | None:
        try:
            claims = jwt.decode(
                token,
                self._public_key,
                algorithms=["RS256"],
                options={"require": ["exp", "iat", "iss"], "verify_iss": False},
                leeway=0,
            )
        except jwt.ExpiredSignatureError:
            return (
                "'Expiration time' claim ('exp') must be a numeric value representing the future"
                " time at which the assertion expires"
            )
        except jwt.PyJWTError:
            return "A JSON web token could not be decoded"
        if str(claims["iss"]) != str(self.app_id):
            return "A JSON web token could not be decoded"
        if int(claims["exp"]) - int(claims["iat"]) > 660:
            return "'Expiration time' claim ('exp') is too far in the future"
        return None

    def _auth_problem(self, kind: str, header: str) -> str | None:
        scheme, _, credential = header.partition(" ")
        credential = credential.strip()
        if scheme.lower() not in ("token", "bearer") or not credential:
            return "Requires authentication" if not header else "Bad credentials"
        if kind == "jwt":
            return self._jwt_problem(credential)
        return None if self.token_valid(credential) else "Bad credentials"

    # -- requests ------------------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> Response:
        raw = await request.body()
        headers = {key.lower(): value for key, value in request.headers.items()}
        query = {key: value for key, value in request.query_params.items()}
        reply = self.process(request.method, request.url.path, query, headers, raw)
        if reply.raw is not None:
            content = reply.raw
        elif reply.status in (204, 302, 304) or reply.body is None:
            content = b""
        else:
            content = json.dumps(reply.body).encode()
        response_headers = {
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "4999",
            "X-RateLimit-Used": "1",
            "X-RateLimit-Resource": "core",
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
            **reply.headers,
        }
        media = reply.media_type if content else None
        return Response(content, reply.status, response_headers, media_type=media)

    def _error(self, error: ApiError) -> Reply:
        body: dict[str, Any] = {
            "message": error.message,
            "documentation_url": retarget_hosts(DOCS_URL, self.url),
            "status": str(error.status),
        }
        if error.errors is not None:
            body["errors"] = error.errors
        return Reply(error.status, body)

    def process(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw: bytes
    ) -> Reply:
        """Answer one request (what the HTTP endpoint does, callable without a socket)."""
        with self.lock:
            template, reply, body = self._answer(method, path, query, headers, raw)
            record = RequestRecord(
                method,
                path,
                "&".join(f"{k}={v}" for k, v in query.items()),
                reply.status,
                template,
                body,
                reply.body,
                headers,
                dict(reply.headers),
            )
            self.requests.append(record)
            if (
                self.validate_responses
                and template
                and reply.raw is None
                and reply.body is not None
            ):
                for problem in self.spec.validate_response(
                    method, template, reply.status, reply.body
                ):
                    self.response_problems.append(problem)
            return reply

    def _violation(self, method: str, path: str, reply: Reply, reason: str) -> Reply:
        self.violations.append(Violation(method, path, reply.status, reason))
        return reply

    def _answer(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], raw: bytes
    ) -> tuple[str | None, Reply, Any]:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                reply = self._error(ApiError(400, "Problems parsing JSON"))
                return None, self._violation(method, path, reply, "body is not JSON"), raw
        ctx = Ctx(
            self,
            Renderer(self, self.spec, self.url),
            self.url,
            method,
            path,
            {},
            query,
            body,
            self.bot_login,
        )
        if method == "GET" and path.startswith(DOWNLOAD_PREFIX):
            try:
                return None, serve_download(ctx), body
            except ApiError as error:
                return None, self._violation(method, path, self._error(error), "bad download"), body
        matched = ROUTER.match(method, path)
        if matched is None:
            reply = self._error(ApiError(404, "Not Found"))
            return None, self._violation(method, path, reply, "unknown endpoint"), body
        route, params = matched
        ctx.params = params
        problem = self._auth_problem(route.auth, headers.get("authorization", ""))
        if problem is not None:
            return route.template, self._error(ApiError(401, problem)), body
        known = self.spec.operation(method, route.template) is not None
        if not known and (method, route.template) not in EXTRA_OPERATIONS:
            reply = self._error(ApiError(404, "Not Found"))
            return route.template, self._violation(method, path, reply, "not described"), body
        problems = self.spec.validate_request(method, route.template, query, body, bool(raw))
        if problems:
            message = "Invalid request.\n\n" + "\n".join(problems)
            errors = [
                {"resource": route.template, "code": "invalid", "message": p} for p in problems
            ]
            reply = self._error(ApiError(422, message, errors))
            return route.template, self._violation(method, path, reply, message), body
        try:
            reply = route.handler(ctx)
        except ApiError as error:
            reply = self._error(error)
            if error.violation:
                self._violation(method, path, reply, error.message)
        except Exception as error:  # a bug of the fake: answer 500 and make the test see it
            reply = self._error(ApiError(500, f"fake GitHub failed: {error!r}"))
            trace = traceback.format_exc(limit=-3)
            self._violation(method, path, reply, f"fake GitHub failed: {error!r}\n{trace}")
        return route.template, reply, body
