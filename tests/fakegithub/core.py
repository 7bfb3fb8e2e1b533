"""The core of the fake's state: identities, installation tokens, repositories and git.

``StateCore`` is the base ``PullsMixin`` (pulls.py) and ``ActionsMixin`` (actions.py) build on;
``FakeState`` (state.py) puts them together and documents the whole test API.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import secrets
import string
import threading
from datetime import datetime, timedelta

from .gitstore import Commit, ObjectStore
from .model import PERMISSIONS, PullRequest, Repo, RequestRecord, User, Violation, now

TOKEN_ALPHABET = string.ascii_letters + string.digits


class StateCore:
    """Identities, tokens, repositories and git. Thread-safe through ``lock`` (an ``RLock``)."""

    def __init__(
        self, *, app_id: int = 424242, app_slug: str = "attune", installation_id: int = 111
    ) -> None:
        self.lock = threading.RLock()
        self.app_id = app_id
        self.app_slug = app_slug
        self.installation_id = installation_id
        self.tokens: dict[str, datetime] = {}
        """Installation tokens issued -> expiry."""
        self._secret = secrets.token_bytes(16)
        self.store = ObjectStore()
        self.repos: dict[str, Repo] = {}
        self.users: dict[str, User] = {}
        self.pull_requests: dict[tuple[str, int], PullRequest] = {}
        self.requests: list[RequestRecord] = []
        self.violations: list[Violation] = []
        self.response_problems: list[str] = []
        self._ids = itertools.count(1_000_001)
        self._primary: str | None = None
        self.user(self.bot_login, "Bot")

    # -- identities ----------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def issue_token(self, lifetime: timedelta = timedelta(hours=1)) -> tuple[str, datetime]:
        """A fresh installation token (``ghs_...``) and its expiry, as the token endpoint
        hands out; tests may call it to skip the JWT exchange."""
        with self.lock:
            token = "ghs_" + "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(36))
            self.tokens[token] = now() + lifetime
            return token, self.tokens[token]

    def token_valid(self, token: str) -> bool:
        expiry = self.tokens.get(token)
        return expiry is not None and expiry > now()

    def sign(self, text: str) -> str:
        """An unguessable signature for ``text`` (download URLs)."""
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()[:32]

    @property
    def bot_login(self) -> str:
        """The App's user, author of everything the bot writes (``attune[bot]``)."""
        return f"{self.app_slug}[bot]"

    def user(self, login: str, kind: str | None = None) -> User:
        """The user ``login``, created on first mention."""
        with self.lock:
            found = self.users.get(login.lower())
            if found is None:
                found = User(login, self.next_id(), "Bot" if login.endswith("[bot]") else "User")
                self.users[login.lower()] = found
            if kind in ("User", "Bot", "Organization"):
                found.type = kind  # type: ignore[assignment]
            return found

    # -- repositories and git ------------------------------------------------------------------

    def create_repo(
        self,
        owner: str,
        name: str,
        files: dict[str, str] | None = None,
        default_branch: str = "main",
        private: bool = False,
        message: str = "Initial commit",
    ) -> Repo:
        """A repository whose default branch holds one commit with ``files``."""
        with self.lock:
            self.user(owner)
            repo = Repo(self.next_id(), owner, name, default_branch, private, now())
            root = self.store.make_commit(dict(files or {}), (), message, owner)
            repo.branches[default_branch] = root.sha
            repo.pushed_at = root.date
            self.repos[repo.full_name.lower()] = repo
            self._primary = self._primary or repo.full_name.lower()
            return repo

    def repo(self, full_name: str | None = None) -> Repo:
        """The repository ``owner/name`` (case-insensitive); the first one when ``None``."""
        with self.lock:
            key = (full_name or self._primary or "").lower()
            if key not in self.repos:
                raise KeyError(f"no repository {full_name!r}")
            return self.repos[key]

    def find_repo(self, owner: str, name: str) -> Repo | None:
        return self.repos.get(f"{owner}/{name}".lower())

    def fork_repo(self, user: str, repo: str | None = None) -> Repo:
        """``user``'s fork of ``repo`` (created on first call with copies of its branches)."""
        with self.lock:
            parent = self.repo(repo)
            fork = self.find_repo(user, parent.name)
            if fork is None:
                self.user(user)
                fork = Repo(self.next_id(), user, parent.name, parent.default_branch, False, now())
                fork.branches = dict(parent.branches)
                fork.parent = parent.full_name
                fork.pushed_at = parent.pushed_at
                self.repos[fork.full_name.lower()] = fork
            return fork

    def set_permission(self, login: str, permission: str, repo: str | None = None) -> None:
        """Give ``login`` a role on ``repo``: admin/maintain/write/triage/read/none."""
        if permission not in PERMISSIONS:
            raise ValueError(f"unknown permission {permission!r}")
        with self.lock:
            self.user(login)
            self.repo(repo).permissions[login.lower()] = permission

    def permission(self, login: str, repo: str | None = None) -> str:
        """``login``'s role: set one, admin for the owner, else read (public) or none."""
        with self.lock:
            target = self.repo(repo)
            if login.lower() in target.permissions:
                return target.permissions[login.lower()]
            if login.lower() == target.owner.lower():
                return "admin"
            return "none" if target.private else "read"

    def resolve(self, ref: str, repo: str | None = None) -> str | None:
        """A branch name, ``heads/..``/``refs/heads/..`` or a (full) commit sha -> sha."""
        with self.lock:
            target = self.repo(repo)
            name = ref.removeprefix("refs/").removeprefix("heads/")
            if name in target.branches:
                return target.branches[name]
            if self.store.get(ref) is not None:
                return ref
            return None

    def head(self, branch: str, repo: str | None = None) -> str:
        """Head sha of ``branch``."""
        with self.lock:
            return self.repo(repo).branches[branch]

    def get_commit(self, sha: str) -> Commit:
        found = self.store.get(sha)
        if found is None:
            raise KeyError(f"no commit {sha}")
        return found

    def files_at(self, ref: str, repo: str | None = None) -> dict[str, str]:
        """The snapshot at a branch or sha."""
        with self.lock:
            sha = self.resolve(ref, repo)
            if sha is None:
                raise KeyError(f"unknown ref {ref!r}")
            return dict(self.get_commit(sha).files)

    def commit(
        self,
        branch: str,
        files: dict[str, str | None],
        message: str = "Update files",
        author: str = "octocat",
        repo: str | None = None,
    ) -> str:
        """One commit on ``branch`` writing ``files`` (``None`` deletes); returns its sha."""
        with self.lock:
            target = self.repo(repo)
            parent = target.branches[branch]
            snapshot = dict(self.get_commit(parent).files)
            for path, text in files.items():
                if text is None:
                    snapshot.pop(path, None)
                else:
                    snapshot[path] = text
            self.user(author)
            made = self.store.make_commit(snapshot, (parent,), message, author)
            self.move_branch(target, branch, made.sha)
            return made.sha

    def move_branch(self, target: Repo, branch: str, sha: str) -> None:
        target.branches[branch] = sha
        target.pushed_at = now()
        for pr in self.pull_requests.values():
            if pr.state == "open" and pr.head_repo == target.full_name and pr.head == branch:
                pr.head_sha = sha
                pr.updated_at = now()

    def create_branch(self, name: str, from_sha: str | None = None, repo: str | None = None) -> str:
        """Branch ``name`` at ``from_sha`` (default: the default branch's head); returns it."""
        with self.lock:
            target = self.repo(repo)
            if name in target.branches:
                raise ValueError(f"branch {name!r} exists")
            sha = from_sha or target.branches[target.default_branch]
            self.get_commit(sha)
            target.branches[name] = sha
            return sha
