"""The fake's git: one real bare repository, driven with git's plumbing commands.

Every repository of the fake keeps its objects there (forks share objects, as on GitHub) and its
branches under its own namespace, ``refs/namespaces/<owner>/refs/namespaces/<name>/refs/heads/``
(``git --namespace=<owner>/<name>`` sees one repository). Commits never change, so whatever is
read from them (snapshots, merge bases, diffs, merges) is cached.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
"""Git's empty tree: the parent side of a root commit's diff."""
T = TypeVar("T")


def blob_sha(text: str) -> str:
    """Git's blob sha of ``text`` (UTF-8), as ``git hash-object`` computes it."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    parents: tuple[str, ...]
    message: str
    author: str
    """Login of the author (the name git records)."""
    date: datetime
    files: dict[str, str]
    """The snapshot: path -> text."""
    blobs: dict[str, str]
    """Path -> blob sha."""


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str
    """``added``, ``removed`` or ``modified`` (GitHub's words)."""
    sha: str
    """The file's blob: the new one, the old one for a removal."""
    patch: str
    """Git's hunks (``@@ ...`` onwards), without the final newline, as GitHub shows them."""
    additions: int
    deletions: int


class GitStore:
    """A bare repository in a temporary folder (removed with this object)."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="fakegithub-")
        self.path = self._folder.name
        self._env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        self._memo: dict[tuple[str, ...], Any] = {}
        self.git("init", "--quiet", "--bare")

    def git(self, *args: str, stdin: bytes = b"", codes: tuple[int, ...] = (0,)) -> str:
        """Run ``git args`` in the repository; its output (``codes``: exit codes not an error,
        the code is then the output's first line)."""
        command = ["git", "-C", self.path, "-c", "core.quotePath=false", *args]
        done = subprocess.run(command, input=stdin, capture_output=True, env=self._env)
        if done.returncode not in codes:
            raise RuntimeError(f"git {args[0]} failed: {done.stderr.decode(errors='replace')}")
        text = done.stdout.decode()
        return text if codes == (0,) else f"{done.returncode}\n{text}"

    def _cached(self, key: tuple[str, ...], make: Callable[[], T]) -> T:
        if key not in self._memo:
            self._memo[key] = make()
        result: T = self._memo[key]
        return result

    @staticmethod
    def ref(repo: str, branch: str) -> str:
        owner, name = repo.split("/")
        return f"refs/namespaces/{owner}/refs/namespaces/{name}/refs/heads/{branch}"

    def set_branches(self, repo: str, branches: Mapping[str, str]) -> None:
        """Point branches of ``repo`` (``owner/name``) at commits."""
        lines = "".join(f"update {self.ref(repo, b)} {sha}\n" for b, sha in branches.items())
        self.git("update-ref", "--stdin", stdin=lines.encode())

    # -- writing -------------------------------------------------------------------------------

    def write(
        self,
        parents: tuple[str, ...],
        message: str,
        author: str,
        email: str,
        changes: Mapping[str, str | None] | None = None,
        tree: str | None = None,
    ) -> Commit:
        """A commit of ``tree``, or of the first parent's files with ``changes`` (``None``
        deletes a path), through ``git fast-import``."""
        stamp = int(datetime.now(UTC).timestamp())
        data = message.encode()
        script = [
            b"reset refs/fake/scratch\ncommit refs/fake/scratch\nmark :1\n",
            f"author {author} <{email}> {stamp} +0000\n".encode(),
            f"committer {author} <{email}> {stamp} +0000\n".encode(),
            b"data %d\n%s\n" % (len(data), data),
        ]
        script += [f"{'from' if i == 0 else 'merge'} {p}\n".encode() for i, p in enumerate(parents)]
        if tree is not None:
            script.append(f'M 040000 {tree} ""\n'.encode())
        for path, text in (changes or {}).items():
            if text is None:
                script.append(f"D {path}\n".encode())
            else:
                blob = text.encode()
                script.append(
                    b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(blob), blob)
                )
        script.append(b"\nget-mark :1\n")
        sha = self.git("fast-import", "--quiet", "--force", stdin=b"".join(script)).strip()
        return self.commit(sha)

    # -- reading -------------------------------------------------------------------------------

    def exists(self, sha: str) -> bool:
        """Whether ``sha`` is a full commit sha of the repository."""
        if ("commit", sha) in self._memo:
            return True
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return False
        return self.git("cat-file", "-e", f"{sha}^{{commit}}", codes=(0, 1, 128))[0] == "0"

    def commit(self, sha: str) -> Commit:
        return self._cached(("commit", sha), lambda: self._read_commit(sha))

    def _read_commit(self, sha: str) -> Commit:
        header, _, message = self.git("cat-file", "commit", sha).partition("\n\n")
        fields = [line.split(" ", 1) for line in header.splitlines()]
        author = next(value for key, value in fields if key == "author")
        name, _, rest = author.rpartition(" <")
        date = datetime.fromtimestamp(int(rest.split()[-2]), UTC)
        listing = self.git("ls-tree", "-r", "-z", "--full-tree", sha).split("\0")[:-1]
        blobs = {e.split("\t", 1)[1]: e.split("\t", 1)[0].split()[2] for e in listing}
        files: dict[str, str] = {}
        if blobs:
            out = subprocess.run(
                ["git", "-C", self.path, "cat-file", "--batch"],
                input="".join(f"{b}\n" for b in blobs.values()).encode(),
                capture_output=True,
                env=self._env,
                check=True,
            ).stdout
            at = 0
            for path in blobs:
                end = out.index(b"\n", at)
                size = int(out[at:end].split()[2])
                files[path] = out[end + 1 : end + 1 + size].decode("utf-8", errors="replace")
                at = end + 2 + size
        tree = next(value for key, value in fields if key == "tree")
        parents = tuple(value for key, value in fields if key == "parent")
        return Commit(sha, tree, parents, message, name, date, files, blobs)

    def folder(self, sha: str, path: str) -> list[tuple[str, str]]:
        """``(path, object sha)`` of each entry of folder ``path`` at commit ``sha``."""
        code, _, out = self.git("ls-tree", "-z", f"{sha}:{path}", codes=(0, 128)).partition("\n")
        entries = [e.split("\t", 1) for e in out.split("\0") if e] if code == "0" else []
        return [(f"{path}/{name}".lstrip("/"), info.split()[2]) for info, name in entries]

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor (``None`` for unrelated histories)."""
        out = self._cached(("base", a, b), lambda: self.git("merge-base", a, b, codes=(0, 1)))
        code, _, sha = out.partition("\n")
        return sha.strip() if code == "0" else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        key = ("ancestor", ancestor, descendant)
        run = ("merge-base", "--is-ancestor", ancestor, descendant)
        return self._cached(key, lambda: self.git(*run, codes=(0, 1)))[0] == "0"

    def log(self, head: str, exclude: str | None) -> list[str]:
        """Commits reachable from ``head`` but not from ``exclude``, oldest first."""
        args = ["rev-list", "--reverse", head] + ([f"^{exclude}"] if exclude else [])
        return self._cached(("log", head, exclude or ""), lambda: self.git(*args).split())

    def merge_tree(self, base: str, head: str) -> str | None:
        """The tree of merging ``head`` into ``base`` (git's three-way merge), ``None`` on a
        conflict."""
        run = ("merge-tree", "--write-tree", "--no-messages", base, head)
        out = self._cached(("merge", base, head), lambda: self.git(*run, codes=(0, 1)))
        return out.split("\n")[1] if out[0] == "0" else None

    def diff(self, old: str | None, new: str) -> list[FileChange]:
        """What changed from commit ``old`` (``None``: nothing) to ``new``, by path."""
        args = ("diff-tree", "-r", "-p", "--no-renames", "--full-index", old or EMPTY_TREE, new)
        return self._cached(("diff", old or "", new), lambda: _parse_diff(self.git(*args)))


def _parse_diff(out: str) -> list[FileChange]:
    changes = []
    for section in re.split(r"^diff --git ", out, flags=re.M)[1:]:
        head, _, hunks = section.partition("\n@@")
        names = head.split("\n", 1)[0]  # "a/<path> b/<path>": no renames, the same path twice
        path = names[2 : 2 + (len(names) - 5) // 2]
        status = (
            "added" if "\nnew file" in head else "removed" if "\ndeleted" in head else "modified"
        )
        found = re.search(r"^index (\w+)\.\.(\w+)", head, flags=re.M)
        old_blob, new_blob = found.groups() if found else ("", "")
        patch = ("@@" + hunks).rstrip("\n") if hunks else ""
        lines = patch.splitlines()
        adds = sum(1 for line in lines if line.startswith("+"))
        dels = sum(1 for line in lines if line.startswith("-"))
        sha = old_blob if status == "removed" else new_blob
        changes.append(FileChange(path, status, sha, patch, adds, dels))
    return changes
