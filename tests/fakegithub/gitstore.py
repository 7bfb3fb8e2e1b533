"""The fake's git: one real bare repository, driven with git's plumbing commands.

Every repository of the fake keeps its objects there (forks share objects, as on GitHub) and its
branches in its own namespace, ``refs/namespaces/<owner>/refs/namespaces/<name>/refs/heads/``.
Commits never change, so what is read from them (snapshots, merge bases, diffs, merges) is
cached.
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
from typing import Any, TypeVar, cast

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
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
    date: datetime
    files: dict[str, str]
    blobs: dict[str, str]
    """Path -> blob sha."""


@dataclass(frozen=True)
class FileChange:
    filename: str
    status: str
    """``added``, ``removed`` or ``modified`` (GitHub's words)."""
    sha: str
    patch: str
    """Git's hunks without the final newline, as GitHub shows them."""
    additions: int
    deletions: int


class GitStore:
    """A bare repository in a temporary folder (removed with this object)."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="fakegithub-")
        self._env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        self._memo: dict[tuple[str, ...], Any] = {}
        self.run("init", "--quiet", "--bare")

    def run(self, *args: str, stdin: bytes = b"", ok: tuple[int, ...] = (0,)) -> tuple[int, bytes]:
        """``git args`` in the repository: its exit code (one of ``ok``) and output."""
        command = ["git", "-C", self._folder.name, "-c", "core.quotePath=false", *args]
        done = subprocess.run(command, input=stdin, capture_output=True, env=self._env)
        if done.returncode not in ok:
            raise RuntimeError(f"git {args[0]}: {done.stderr.decode(errors='replace')}")
        return done.returncode, done.stdout

    def _once(self, key: tuple[str, ...], make: Callable[[], T]) -> T:
        if key not in self._memo:
            self._memo[key] = make()
        return cast(T, self._memo[key])

    def set_branch(self, repo: str, branch: str, sha: str) -> None:
        owner, name = repo.split("/")
        ref = f"refs/namespaces/{owner}/refs/namespaces/{name}/refs/heads/{branch}"
        self.run("update-ref", ref, sha)

    def write(
        self,
        parents: tuple[str, ...],
        message: str,
        author: str,
        changes: Mapping[str, str | None] | None = None,
        tree: str | None = None,
    ) -> Commit:
        """A commit of ``tree``, or of the first parent's files with ``changes`` (``None``
        deletes a file), made with ``git fast-import``."""
        stamp = int(datetime.now(UTC).timestamp())
        who = f"{author} <{author}@users.noreply.github.com> {stamp} +0000"
        lines = [f"commit refs/fake/scratch\nmark :1\nauthor {who}\ncommitter {who}\n".encode()]
        lines.append(b"data %d\n%s\n" % (len(message.encode()), message.encode()))
        lines += [f"{'merge' if i else 'from'} {p}\n".encode() for i, p in enumerate(parents)]
        lines += [f'M 040000 {tree} ""\n'.encode()] if tree else []
        for path, text in (changes or {}).items():
            data = (text or "").encode()
            add = b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data)
            lines.append(f"D {path}\n".encode() if text is None else add)
        script = b"reset refs/fake/scratch\n" + b"".join(lines) + b"\nget-mark :1\n"
        return self.commit(
            self.run("fast-import", "--quiet", "--force", stdin=script)[1].decode().strip()
        )

    def exists(self, sha: str) -> bool:
        """Whether ``sha`` is the full sha of a commit here."""
        if ("commit", sha) in self._memo or not re.fullmatch(r"[0-9a-f]{40}", sha):
            return ("commit", sha) in self._memo
        return self.run("cat-file", "-e", f"{sha}^{{commit}}", ok=(0, 1, 128))[0] == 0

    def commit(self, sha: str) -> Commit:
        return self._once(("commit", sha), lambda: self._read(sha))

    def _read(self, sha: str) -> Commit:
        header, _, message = self.run("cat-file", "commit", sha)[1].decode().partition("\n\n")
        fields = [line.split(" ", 1) for line in header.splitlines()]
        author = next(value for key, value in fields if key == "author")
        listing = self.run("ls-tree", "-r", "-z", "--full-tree", sha)[1].decode().split("\0")
        blobs = {entry.split("\t", 1)[1]: entry.split()[2] for entry in listing if entry}
        out = self.run(
            "cat-file", "--batch", stdin="".join(f"{b}\n" for b in blobs.values()).encode()
        )[1]
        files, at = {}, 0
        for path in blobs:  # each blob: "<sha> blob <size>\n<data>\n"
            start = out.index(b"\n", at) + 1
            size = int(out[at : start - 1].split()[2])
            files[path], at = out[start : start + size].decode(errors="replace"), start + size + 1
        parents = tuple(value for key, value in fields if key == "parent")
        date = datetime.fromtimestamp(int(author.split()[-2]), UTC)
        return Commit(
            sha, fields[0][1], parents, message, author.rsplit(" <", 1)[0], date, files, blobs
        )

    def folder(self, sha: str, path: str) -> list[tuple[str, str]]:
        """``(path, object sha)`` of each entry of folder ``path`` (``""``: the root)."""
        code, out = self.run("ls-tree", "-z", f"{sha}:{path}", ok=(0, 128))
        entries = [
            entry.split("\t", 1) for entry in out.decode().split("\0") if entry and code == 0
        ]
        return [(f"{path}/{name}".lstrip("/"), info.split()[2]) for info, name in entries]

    def merge_base(self, a: str, b: str) -> str | None:
        code, out = self._once(("base", a, b), lambda: self.run("merge-base", a, b, ok=(0, 1)))
        return out.decode().strip() if code == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        run = ("merge-base", "--is-ancestor", ancestor, descendant)
        return self._once(run, lambda: self.run(*run, ok=(0, 1)))[0] == 0

    def log(self, head: str, exclude: str | None) -> list[str]:
        """Commits reachable from ``head`` but not from ``exclude``, oldest first."""
        run = ("rev-list", "--reverse", head, *([f"^{exclude}"] if exclude else []))
        return self._once(run, lambda: self.run(*run)[1].decode().split())

    def merge_tree(self, base: str, head: str) -> str | None:
        """The tree of git's three-way merge of ``head`` into ``base``, ``None`` on a conflict."""
        run = ("merge-tree", "--write-tree", "--no-messages", base, head)
        code, out = self._once(run, lambda: self.run(*run, ok=(0, 1)))
        return out.decode().split("\n")[0] if code == 0 else None

    def diff(self, old: str | None, new: str) -> list[FileChange]:
        """The files that differ from commit ``old`` (``None``: none) to ``new``."""
        run = ("diff-tree", "-r", "-p", "--no-renames", "--full-index", old or EMPTY_TREE, new)
        return self._once(run, lambda: _parse_diff(self.run(*run)[1].decode(errors="replace")))


def _parse_diff(out: str) -> list[FileChange]:
    changes = []
    for section in re.split(r"^diff --git ", out, flags=re.M)[1:]:
        head, _, hunks = section.partition("\n@@")
        names = head.split("\n", 1)[0]  # "a/<path> b/<path>", the same path twice
        path = names[2 : 2 + (len(names) - 5) // 2]
        status = (
            "added" if "\nnew file" in head else "removed" if "\ndeleted" in head else "modified"
        )
        blobs = re.findall(r"^index (\w+)\.\.(\w+)", head, flags=re.M) or [("", "")]
        patch = ("@@" + hunks).rstrip("\n") if hunks else ""
        signs = [line[:1] for line in patch.splitlines()]
        sha = blobs[0][0] if status == "removed" else blobs[0][1]
        changes.append(FileChange(path, status, sha, patch, signs.count("+"), signs.count("-")))
    return changes
