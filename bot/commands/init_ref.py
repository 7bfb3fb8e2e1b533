"""Does the repository that hosts attune's actions have the commit ``attune init`` pins?

A workflow pinned to a commit its host does not have fails at its first run, on the GPU runner,
long after the install. ``attune init`` asks GitHub's REST API first (``GET
/repos/{owner}/{name}/commits/{sha}``): a commit GitHub says is not there is refused; when the
question cannot be answered (no network, a private repository without a token, a rate limit)
init says so, and why, and writes the files anyway.

The API root is ``ATTUNE_GITHUB_API_URL`` (the App's own setting; default
``https://api.github.com``, GitHub Enterprise: ``https://HOST/api/v3``); a token in
``GITHUB_TOKEN`` is sent when set (a private host repository needs one).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

from gate.errors import AttuneError

API_VAR = "ATTUNE_GITHUB_API_URL"
DEFAULT_API = "https://api.github.com"
TOKEN_VAR = "GITHUB_TOKEN"
TIMEOUT_S = 10.0
REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")


def check_repo(repo: str) -> str:
    """``--action-repo`` as ``owner/name``; AttuneError for anything else."""
    if not REPO.fullmatch(repo) or repo.endswith((".", "/")) or ".." in repo:
        raise AttuneError(
            f"--action-repo: {repo!r} is not a GitHub repository as owner/name "
            "(the repository that hosts attune's actions/ folder)"
        )
    return repo


@dataclass
class RefCheck:
    checked: bool
    """Whether GitHub answered (found); False: it could not be asked, ``detail`` says why."""
    detail: str


def check_ref(repo: str, sha: str) -> RefCheck:
    """Ask the API whether ``repo`` has commit ``sha``. Raises AttuneError when GitHub says it
    does not; returns ``checked=False`` with the reason when the question got no answer."""
    api = (os.environ.get(API_VAR) or DEFAULT_API).rstrip("/")
    request = urllib.request.Request(
        f"{api}/repos/{repo}/commits/{sha}",
        headers={"Accept": "application/vnd.github+json", "User-Agent": "attune-init"},
    )
    token = os.environ.get(TOKEN_VAR)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            found = json.loads(answer.read(1024 * 1024)).get("sha", "")
    except urllib.error.HTTPError as exc:
        message = _message(exc)
        if exc.code == 422 or (exc.code == 404 and token):
            raise AttuneError(
                f"--ref: {repo} has no commit {sha} ({api} answered {exc.code} {message}); "
                "push that commit to the repository the workflows will use, or pass "
                "--action-repo/--ref of one it has"
            ) from None
        hint = (
            f" (set {TOKEN_VAR} to a token that may read {repo})"
            if exc.code in (401, 403, 404)
            else ""
        )
        return RefCheck(False, f"{api} answered {exc.code} {message}{hint}")
    except (OSError, ValueError) as exc:  # no network, DNS, TLS, a timeout, not JSON
        reason = getattr(exc, "reason", None) or exc
        return RefCheck(False, f"{api} could not be reached ({reason})")
    if str(found).lower() != sha:
        return RefCheck(False, f"{api} answered a commit that is not {sha}")
    return RefCheck(True, f"{repo} has {sha} ({api})")


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read(64 * 1024)).get("message", exc.reason))
    except (OSError, ValueError, AttributeError):
        return str(exc.reason)
