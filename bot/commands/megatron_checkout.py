"""The Megatron-LM checkout ``attune train-env`` builds a training environment from, pinned by
commit or by content, not only by tag.

A tag names a commit only for as long as nobody moves it. ``--megatron`` (``ATTUNE_MEGATRON`` in
``attune-bench.yml``) is a tag that ``runners.megatron.pins.MEGATRON_COMMITS`` pins to a commit,
a tag that ``MEGATRON_TREE_DIGESTS`` pins to the content of its released megatron-core wheel, or
a full 40-hex commit. A tag is cloned (``git clone --depth 1 --branch``), a commit fetched by
itself (``git fetch --depth 1 REPO COMMIT``); then, before anything of the checkout is installed
or run, its ``git rev-parse HEAD`` must be the pinned commit, or, for a tag pinned by content
only, every ``*.py`` file under ``megatron/core`` and ``megatron/training`` must be the wheel's
(``runners.megatron.tree``). Otherwise ``train-env`` refuses (exit 2) and builds nothing from
it. A tag pinned by neither is refused before anything is fetched.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bot.console import console
from gate.errors import AttuneError
from runners.megatron.pins import MEGATRON_COMMITS, MEGATRON_TREE_DIGESTS
from runners.megatron.tree import checkout_entries, first_difference, pinned_manifest

MEGATRON_REPO = "https://github.com/NVIDIA/Megatron-LM"
COMMIT = re.compile(r"^[0-9a-f]{40}$")
"""A full commit id: what ``--megatron`` may give instead of a tag."""


def pinned_commit(ref: str) -> str | None:
    """The commit ``ref`` (a pinned tag, or a full commit) must check out; None for a tag pinned
    by content only (``MEGATRON_TREE_DIGESTS``); AttuneError for a tag pinned by neither."""
    if COMMIT.match(ref):
        return ref
    commit = MEGATRON_COMMITS.get(ref)
    if commit is None and ref not in MEGATRON_TREE_DIGESTS:
        known = ", ".join(f"{t} ({c})" for t, c in sorted(MEGATRON_COMMITS.items()))
        by_content = ", ".join(sorted(MEGATRON_TREE_DIGESTS.keys() - MEGATRON_COMMITS.keys()))
        raise AttuneError(
            f"megatron: the tag {ref} has no pinned commit in attune (runners/megatron/pins.py "
            f"pins {known}; by content: {by_content or 'none'}), and a tag can be moved: give "
            f"the full 40-hex commit it names instead (--megatron, ATTUNE_MEGATRON in "
            f"attune-bench.yml), read from a trusted copy with "
            f"`git ls-remote {MEGATRON_REPO} 'refs/tags/{ref}^{{}}'`"
        )
    return commit


def pin_name(ref: str) -> str:
    """What ``ref`` is pinned to, for the cache folder's name: the commit, or the tree digest."""
    commit = pinned_commit(ref)
    if commit is not None:
        return ref if COMMIT.match(ref) else f"{ref}-{commit[:12]}"
    return f"{ref}-tree{MEGATRON_TREE_DIGESTS[ref][:12]}"


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


def verify_tree(checkout: Path, tag: str, head: str) -> None:
    """AttuneError naming the first file of the checkout's ``megatron/core`` and
    ``megatron/training`` Python files that is not the released wheel's, if one is not."""
    digest = MEGATRON_TREE_DIGESTS[tag]
    try:
        expected = pinned_manifest(tag, digest)
    except ValueError as e:  # an installation of attune that lost or changed its manifest
        raise AttuneError(f"Megatron-LM {tag} is pinned by content, but {e}") from e
    difference = first_difference(expected, checkout_entries(checkout))
    if difference is not None:
        raise AttuneError(
            f"Megatron-LM {tag} (commit {head}) is not the released megatron-core's source: "
            f"{difference}; nothing of the checkout was installed or run (a moved tag, or a "
            "repository that is not NVIDIA's, must not reach the GPU runner)",
            path=str(checkout),
        )
    console.print(
        f"Megatron-LM {tag} at commit {head}: its {len(expected)} Python files under "
        f"megatron/core and megatron/training are the released wheel's (tree digest "
        f"{digest[:12]}, runners/megatron/pins.py); nothing else of the checkout is pinned",
        markup=False,
        highlight=False,
    )


def verify_checkout(checkout: Path, ref: str) -> str:
    """The checkout's commit when it is the one ``ref`` is pinned to, or, for a tag pinned by
    content only, when its files are the pinned ones; else AttuneError."""
    expected, head = pinned_commit(ref), head_commit(checkout)
    if expected is None:
        verify_tree(checkout, ref, head)
        return head
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
    pinned_commit(ref)  # a tag pinned by neither commit nor content is refused before fetching
    for command in fetch_commands(ref, repo or MEGATRON_REPO, checkout):
        console.print(f"$ {' '.join(command)}", markup=False, highlight=False)
        if subprocess.run(command, check=False).returncode != 0:
            raise AttuneError(f"fetching Megatron-LM {ref} failed: {command[:6]}...")
    return verify_checkout(checkout, ref)
