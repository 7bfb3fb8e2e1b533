"""Git plumbing for the embedded forge: commits without a working tree.

Commits are made with a temporary index, ``commit-tree`` and ``update-ref`` with the expected
old value, so no operation depends on the working tree and a branch moves only from where the
caller saw it. The checked-out branch's files are brought along afterwards for people reading
the repository by hand.
"""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from bot.interfaces import ForgeError

log = logging.getLogger("attune")

_IDENTITY = {
    "GIT_AUTHOR_NAME": "attune",
    "GIT_AUTHOR_EMAIL": "attune@localhost",
    "GIT_COMMITTER_NAME": "attune",
    "GIT_COMMITTER_EMAIL": "attune@localhost",
}
_ZERO = "0" * 40
"""As an old value of ``git update-ref``: the ref must not exist yet."""


class Plumbing:
    """The git repository (with its working tree) at ``repo``."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def run(
        self, args: list[str], *, stdin: str | None = None, index: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        # the inherited GIT_* (a hook's GIT_DIR, GIT_INDEX_FILE) and user config never apply;
        # GIT_DIR is always set, so git cannot discover an enclosing repository
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(_IDENTITY, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
        env.update(GIT_DIR=str(self.repo / ".git"), GIT_WORK_TREE=str(self.repo))
        if index is not None:
            env["GIT_INDEX_FILE"] = index
        cmd = ["git", "-c", "commit.gpgsign=false", *args]
        return subprocess.run(
            cmd, cwd=self.repo, env=env, input=stdin, capture_output=True, text=True
        )

    def cmd(
        self, *args: str, stdin: str | None = None, index: str | None = None, strip: bool = True
    ) -> str:
        proc = self.run(list(args), stdin=stdin, index=index)
        if proc.returncode != 0:
            stderr = "; ".join(line for line in proc.stderr.splitlines() if line.strip())
            raise ForgeError(f"`git {' '.join(args)}` failed (exit {proc.returncode}): {stderr}")
        return proc.stdout.strip() if strip else proc.stdout

    def resolve(self, rev: str) -> str | None:
        proc = self.run(["rev-parse", "--verify", "--quiet", rev])
        return proc.stdout.strip() if proc.returncode == 0 else None

    def ref(self, branch: str) -> str | None:
        return self.resolve(f"refs/heads/{branch}^{{commit}}")

    def tree(self, parent: str | None, path: str, text: str) -> str:
        """The tree of ``parent`` with ``path`` holding ``text``; built in a temporary index."""
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise ForgeError(f"recipe path must be relative inside the repository: {path!r}")
        blob = self.cmd("hash-object", "-w", "--stdin", stdin=text)
        with tempfile.TemporaryDirectory(prefix="attune-index-") as tmp:
            index = str(Path(tmp) / "index")
            if parent is not None:
                self.cmd("read-tree", parent, index=index)
            info = f"100644,{blob},{pure.as_posix()}"
            self.cmd("update-index", "--add", "--cacheinfo", info, index=index)
            return self.cmd("write-tree", index=index)

    def is_commit_on(self, commit: str, parent: str, tree: str, message: str | None = None) -> bool:
        """Whether ``commit`` is one commit on top of ``parent`` with ``tree`` (and message)."""
        fmt = self.cmd("log", "-1", "--format=%P%n%T%n%B", commit).split("\n", 2)
        parents, got_tree, body = fmt[0], fmt[1], fmt[2] if len(fmt) > 2 else ""
        same = parents == parent and got_tree == tree
        return same and (message is None or body.strip() == message)

    def set_ref(self, branch: str, new: str, old: str | None) -> None:
        """Move ``branch`` from ``old`` (None: must not exist) to ``new``, atomically."""
        ref = f"refs/heads/{branch}"
        self.cmd("update-ref", "-m", f"attune: {branch}", ref, new, old or _ZERO)
        if self.run(["symbolic-ref", "-q", "HEAD"]).stdout.strip() != ref:
            return
        # the checked-out branch moved: bring the index and files along for people reading it
        trees = [old, new] if old is not None else [new]
        proc = self.run(["read-tree", "-m", "-u", *trees])
        if proc.returncode != 0:
            log.warning("working tree of %s not updated: %s", self.repo, proc.stderr.strip())
