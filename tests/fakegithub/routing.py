"""Routes, request context, replies, errors and pagination for the fake's handlers.

Handlers are plain functions ``(Ctx) -> Reply`` registered on ``ROUTER`` with the path template
exactly as the description spells it (``/repos/{owner}/{repo}/pulls/{pull_number}``), so the
same template finds both the handler and the operation to validate against.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .model import PullRequest, Repo
from .render_actions import Renderer
from .state import FakeState

Auth = Literal["token", "jwt"]

MULTI_SEGMENT = frozenset({"path", "ref", "branch"})
"""Path parameters that may contain slashes (branch names, file paths)."""
NUMERIC = frozenset(
    {
        "issue_number",
        "pull_number",
        "comment_id",
        "check_run_id",
        "run_id",
        "artifact_id",
        "installation_id",
    }
)


class ApiError(Exception):
    """An error reply in GitHub's shape: ``{"message", "documentation_url", "status"}``
    (plus ``errors`` for validation failures)."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | None = None,
        violation: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.violation = violation
        """The fake cannot do this (GitHub could): recorded as a violation."""


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def validation_failed(resource: str, field_name: str, code: str, message: str = "") -> ApiError:
    error: dict[str, Any] = {"resource": resource, "field": field_name, "code": code}
    if message:
        error["message"] = message
    return ApiError(422, "Validation Failed", [error])


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    """Non-JSON content (zip downloads); ``body`` is then ignored."""
    media_type: str = "application/json; charset=utf-8"


@dataclass
class Ctx:
    """What a handler sees of one request."""

    state: FakeState
    render: Renderer
    base: str
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    actor: str
    """Login acting: the App's bot user for installation tokens."""

    def repo(self) -> Repo:
        found = self.state.find_repo(self.params["owner"], self.params["repo"])
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

    def paginate(self, items: list[Any], wrap: str | None = None) -> Reply:
        """One page of ``items`` (``per_page``/``page``) with GitHub's ``Link`` header;
        ``wrap`` names the list in a ``{"total_count", wrap}`` object."""
        per_page = max(1, min(100, int(self.query.get("per_page", 30) or 30)))
        page = max(1, int(self.query.get("page", 1) or 1))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def link(number: int, rel: str) -> str:
            query = dict(self.query, page=str(number))
            if "per_page" in self.query:
                query["per_page"] = str(per_page)
            return f'<{self.base}{self.path}?{urllib.parse.urlencode(query)}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links = [link(page - 1, "prev"), link(1, "first"), *links]
        headers = {"Link": ", ".join(links)} if links else {}
        body: Any = chunk if wrap is None else {"total_count": len(items), wrap: chunk}
        return Reply(200, body, headers)


Handler = Callable[[Ctx], Reply]


@dataclass
class Route:
    method: str
    template: str
    handler: Handler
    auth: Auth
    pattern: re.Pattern[str]
    weight: int
    """Literal characters in the template: the most specific match wins."""


def compile_template(template: str) -> re.Pattern[str]:
    regex = ""
    for part in re.split(r"(\{[a-z_]+\})", template):
        if part.startswith("{"):
            name = part[1:-1]
            body = "[^/]+"
            if name in MULTI_SEGMENT:
                body = ".*" if name == "path" else ".+"  # contents/ is the root folder
            elif name in NUMERIC:
                body = "[0-9]+"
            regex += f"(?P<{name}>{body})"
        else:
            regex += re.escape(part)
    return re.compile(f"^{regex}$")


class Router:
    def __init__(self) -> None:
        self.routes: list[Route] = []

    def route(
        self, method: str, template: str, auth: Auth = "token"
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            weight = len(re.sub(r"\{[a-z_]+\}", "", template))
            pattern = compile_template(template)
            self.routes.append(Route(method, template, handler, auth, pattern, weight))
            return handler

        return register

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        best: tuple[Route, dict[str, str]] | None = None
        for route in self.routes:
            if route.method != method:
                continue
            found = route.pattern.match(path)
            if found and (best is None or route.weight > best[0].weight):
                best = (route, found.groupdict())
        return best


ROUTER = Router()
