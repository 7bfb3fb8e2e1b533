"""Response bodies shaped like GitHub's: the shared machinery, users and repositories.

``render_git``, ``render_pulls`` and ``render_actions`` add the rest; ``Renderer`` (in
render_actions.py) is the whole set.

Each body starts from GitHub's own example in the description (``components/examples``) so it
has every field GitHub sends; the fields the fake knows are then overwritten from its state. The
examples' hosts (api.github.com, github.com, ...) are swapped for the fake's base URL before any
state is filled in, so user-written text (comment bodies, commit messages) is never rewritten.
"""

from __future__ import annotations

import base64
import copy
import re
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar, cast

from .model import Repo, iso
from .openapi import Spec
from .state import FakeState

_GITHUB_URL = re.compile(
    r"^(?:https?://(?:[\w-]+\.)*(?:github\.com|githubusercontent\.com)|git://github\.com)"
)
_GIT_SSH = re.compile(r"^git@github\.com:")
T = TypeVar("T")
_TEMPLATES: dict[tuple[int, str, str], Any] = {}


def node_id(kind: str, number: int) -> str:
    """GitHub's legacy global node id (``MDQ6VXNlcjE=`` is ``04:User1``)."""
    return base64.b64encode(f"{len(kind):02d}:{kind}{number}".encode()).decode()


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every string in it (dict keys excepted)."""
    if isinstance(value, dict):
        return {key: map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [map_strings(item, change) for item in value]
    return change(value) if isinstance(value, str) else value


def retarget_hosts(value: T, base: str) -> T:
    """Every GitHub URL in a template, re-pointed at ``base`` (path kept)."""
    host = base.split("://", 1)[-1]

    def change(text: str) -> str:
        return _GIT_SSH.sub(f"git@{host}:", _GITHUB_URL.sub(base, text))

    return cast(T, map_strings(value, change))


def swap_prefix(value: T, old: str, new: str) -> T:
    """Replace the prefix ``old`` of every string (on a path boundary) with ``new``."""

    def change(text: str) -> str:
        rest = text[len(old) :]
        if text.startswith(old) and (not rest or rest[0] in "/{.?#"):
            return new + rest
        return text

    return cast(T, map_strings(value, change))


def fit(template: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``template`` with each of its keys that ``values`` has taken from ``values``."""
    return {key: values.get(key, item) for key, item in template.items()}


def quoted(text: str) -> str:
    return urllib.parse.quote(text, safe="/")


class CoreRenderer:
    """Bodies for one request: the state, the description and the fake's base URL."""

    def __init__(self, state: FakeState, spec: Spec, base: str) -> None:
        self.state = state
        self.spec = spec
        self.base = base

    def example(self, name: str, *path: str | int) -> dict[str, Any]:
        """A fresh copy of an example object (or of the one at ``path``), hosts re-pointed."""
        key = (id(self.spec), self.base, name)
        if key not in _TEMPLATES:
            _TEMPLATES[key] = retarget_hosts(self.spec.example(name), self.base)
        part = _TEMPLATES[key]
        for step in path:
            part = part[step]
        if not isinstance(part, dict):
            raise TypeError(f"example {name} {path} is not an object")
        return copy.deepcopy(part)

    def repo_api(self, repo: Repo | str) -> str:
        full = repo if isinstance(repo, str) else repo.full_name
        return f"{self.base}/repos/{full}"

    def repo_html(self, repo: Repo | str) -> str:
        full = repo if isinstance(repo, str) else repo.full_name
        return f"{self.base}/{full}"

    # -- users and repositories ----------------------------------------------------------------

    def user(self, login: str) -> dict[str, Any]:
        found = self.state.user(login)
        template = self.example("pull-request", "user")
        old = template["login"]
        quoted_login = urllib.parse.quote(found.login, safe="")
        body = swap_prefix(
            template, f"{self.base}/users/{old}", f"{self.base}/users/{quoted_login}"
        )
        body = swap_prefix(body, f"{self.base}/{old}", f"{self.base}/{quoted_login}")
        body.update(
            login=found.login,
            id=found.id,
            node_id=node_id(found.type if found.type != "Bot" else "Bot", found.id),
            avatar_url=f"{self.base}/avatars/u/{found.id}?v=4",
            type=found.type,
            site_admin=False,
        )
        if found.type == "Bot":
            body["html_url"] = f"{self.base}/apps/{found.login.removesuffix('[bot]')}"
        return body

    def _retarget_repo(self, template: dict[str, Any], repo: Repo) -> dict[str, Any]:
        old = template["full_name"]
        body = swap_prefix(template, f"{self.base}/repos/{old}", self.repo_api(repo))
        body = swap_prefix(body, f"{self.base}/{old}", self.repo_html(repo))
        host = self.base.split("://", 1)[-1]
        body = swap_prefix(body, f"git@{host}:{old}", f"git@{host}:{repo.full_name}")
        body.update(
            id=repo.id,
            node_id=node_id("Repository", repo.id),
            name=repo.name,
            full_name=repo.full_name,
            owner=self.user(repo.owner),
            private=repo.private,
            description=None,
            fork=repo.parent is not None,
        )
        return body

    def repo(self, repo: Repo, kind: str = "full") -> dict[str, Any]:
        """``full`` (GET repo), ``repository`` (pull heads), ``minimal`` (workflow runs)."""
        if kind == "minimal":
            return self._retarget_repo(self.example("workflow-run", "repository"), repo)
        if kind == "repository":
            template = self.example("pull-request", "head", "repo")
        else:
            template = self.example("full-repository-default-response")
            for key in ("parent", "source", "organization", "template_repository"):
                template.pop(key, None)
            if repo.parent is not None:
                template["parent"] = template["source"] = self.repo(
                    self.state.repo(repo.parent), "repository"
                )
        body = self._retarget_repo(template, repo)
        open_count = sum(1 for pr in self.state.pulls(repo.full_name) if pr.state == "open")
        body.update(
            homepage=None,
            language=None,
            mirror_url=None,
            license=None,
            default_branch=repo.default_branch,
            visibility="private" if repo.private else "public",
            topics=[],
            is_template=False,
            archived=False,
            disabled=False,
            forks_count=0,
            forks=0,
            stargazers_count=0,
            watchers_count=0,
            watchers=0,
            size=0,
            open_issues_count=open_count,
            open_issues=open_count,
            created_at=iso(repo.created_at),
            updated_at=iso(repo.pushed_at or repo.created_at),
            pushed_at=iso(repo.pushed_at or repo.created_at),
            permissions={
                "admin": False,
                "maintain": False,
                "push": True,
                "triage": True,
                "pull": True,
            },
        )
        body.pop("temp_clone_token", None)
        if kind == "full":
            body.update(network_count=0, subscribers_count=0)
        return body
