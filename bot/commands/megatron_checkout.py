"""The Megatron-LM checkout ``attune train-env`` builds a training environment from, pinned by
commit, not only by tag.

A tag names a commit only for as long as nobody moves it. ``--megatron`` (``ATTUNE_MEGATRON`` in
``attune-bench.yml``) is a tag that ``runners.megatron.pins.MEGATRON_COMMITS`` pins to a commit,
or a full 40-hex commit. A tag is cloned (``git clone --depth 1 --branch``), a commit fetched by
itself (``git fetch --depth 1 REPO COMMIT``); then the checkout's ``git rev-parse HEAD`` must
be that commit, before anything of the checkout is installed or run. Otherwise ``train-env``
refuses (exit 2) and builds nothing from it. A tag with no pinned commit is refused before
anything is fetched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bot.console import console
from gate.errors import AttuneError
from runners.megatron.pins import MEGATRON_COMMITS

MEGATRON_REPO = "https://github.com/NVIDIA/Megatron-LM"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
"""A full commit id: what ``--megatron`` may give instead of a tag."""


def pinned_commit(ref: str) -> str:
    """The commit ``ref`` (a pinned tag, or a full commit) must check out; AttuneError for a
    tag attune has no commit for."""
    if COMMIT.match(ref):
        return ref
    commit = MEGATRON_COMMITS.get(ref)
    if commit is None:
        known = ", ".join(f"{t} ({c})" for t, c in sorted(MEGATRON_COMMITS.items()))
        raise AttuneError(
            f"megatron: the tag {ref} has no pinned commit in attune (runners/megatron/pins.py "
            f"pins {known}), and a tag can be moved: give the full 40-hex commit it names "
            f"instead (--megatron, ATTUNE_MEGATRON in attune-bench.yml), read from a trusted "
            f"copy with `git ls-remote {MEGATRON_REPO} 'refs/tags/{ref}^{{}}'`"
        )
    return commit


def release_of(ref: str) -> str:
    """The tag a pinned commit is (for the version checks keyed by tag), else ``ref``."""
    return next((tag for tag, commit in MEGATRON_COMMITS.items() if commit == ref), ref)


def fetch_commands(ref: str, repo: str, checkout: Path) -> list[list[str]]:
    """The git commands that fetch ``ref`` from ``repo`` into ``checkout`` (no verification)."""
    if COMMIT.match(ref):
        at = ["git", "-C", str(checkout)]
        return [
            ["git", "init", "--quiet", str(checkout)],
            [*at, "fetch", "--quiet", "--depth", "1", repo, ref],
            [*at, "-c", "advice.detachedHead=false", "checkout", "--quiet", "FETCH_HEAD"],
        ]
    return [
        ["git", "-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1",
         "--branch", ref, repo, str(checkout)],
    ]  # fmt: skip


def head_commit(checkout: Path) -> str:
    """``git rev-parse HEAD`` of ``checkout``."""
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--verify", "HEAD^{commit}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AttuneError(f"not a git checkout ({done.stderr.strip()})", path=str(checkout))
    return done.stdout.strip()


def verify_checkout(checkout: Path, ref: str) -> str:
    """The checkout's commit when it is the one ``ref`` is pinned to; else AttuneError."""
    expected, head = pinned_commit(ref), head_commit(checkout)
    if head != expected:
        what = "the tag now names" if not COMMIT.match(ref) else "fetching it checked out"
        raise AttuneError(
            f"Megatron-LM {ref}: {what} commit {head}, not the pinned {expected}; nothing of "
            "the checkout was installed or run (a moved tag, or a repository that is not "
            "NVIDIA's, must not reach the GPU runner)",
            path=str(checkout),
        )
    return head


def checkout_megatron(ref: str, checkout: Path, *, repo: str | None = None) -> str:
    """Fetch ``ref`` into ``checkout`` (which must not exist yet) and verify it; the commit."""
    pinned_commit(ref)  # an unpinned tag is refused before anything is fetched
    for command in fetch_commands(ref, repo or MEGATRON_REPO, checkout):
        console.print(f"$ {' '.join(command)}", markup=False, highlight=False)
        if subprocess.run(command, check=False).returncode != 0:
            raise AttuneError(f"fetching Megatron-LM {ref} failed: {command[:6]}...")
    return verify_checkout(checkout, ref)
