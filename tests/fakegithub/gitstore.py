"""The fake's git: one real bare repository, driven with git's plumbing commands.

Every repository of the fake keeps its objects there (forks share objects, as on GitHub) and its
branches in its own namespace, ``refs/namespaces/<owner>/refs/namespaces/<name>/refs/heads/``.
Commits never change, so what git says about given commits is remembered.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


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
        self._memo: dict[tuple[str, ...], tuple[int, str]] = {}
        self._commits: dict[str, Commit] = {}
        self.run("init", "--quiet", "--bare")

    def run(self, *args: str, stdin: bytes = b"", ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        """``git args`` here: its exit code (one of ``ok``) and output; remembered for the
        commands whose answer about given commits never changes."""
        if args in self._memo:
            return self._memo[args]
        command = ["git", "-C", self._folder.name, "-c", "core.quotePath=false", *args]
        done = subprocess.run(command, input=stdin, capture_output=True, env=self._env)
        if done.returncode not in ok:
            raise RuntimeError(f"git {args[0]}: {done.stderr.decode(errors='replace')}")
        result = done.returncode, done.stdout.decode(errors="replace")
        if args[0] in ("merge-base", "rev-list", "merge-tree", "diff-tree", "ls-tree"):
            self._memo[args] = result
        return result

    def set_branch(self, repo: str, branch: str, sha: str) -> None:
        owner, name = repo.split("/")
        namespace = f"refs/namespaces/{owner}/refs/namespaces/{name}"
        self.run("update-ref", f"{namespace}/refs/heads/{branch}", sha)

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
        return self.commit(self.run("fast-import", "--quiet", "--force", stdin=script)[1].strip())

    def exists(self, sha: str) -> bool:
        """Whether ``sha`` is the full sha of a commit here."""
        if sha in self._commits or not re.fullmatch(r"[0-9a-f]{40}", sha):
            return sha in self._commits
        return self.run("cat-file", "-e", f"{sha}^{{commit}}", ok=(0, 1, 128))[0] == 0

    def commit(self, sha: str) -> Commit:
        if sha in self._commits:
            return self._commits[sha]
        header, _, message = self.run("cat-file", "commit", sha)[1].partition("\n\n")
        fields = [line.split(" ", 1) for line in header.splitlines()]
        author = next(value for key, value in fields if key == "author")
        listing = self.run("ls-tree", "-r", "-z", "--full-tree", sha)[1].split("\0")
        blobs = {entry.split("\t", 1)[1]: entry.split()[2] for entry in listing if entry}
        command = ["git", "-C", self._folder.name, "cat-file", "--batch"]
        stdin = "".join(f"{b}\n" for b in blobs.values()).encode()
        out = subprocess.run(command, input=stdin, capture_output=True, env=self._env).stdout
        files, at = {}, 0
        for path in blobs:  # each blob: "<sha> blob <size>\n<data>\n"
            start = out.index(b"\n", at) + 1
            size = int(out[at : start - 1].split()[2])
            files[path], at = out[start : start + size].decode(errors="replace"), start + size + 1
        parents = tuple(value for key, value in fields if key == "parent")
        name, date = author.rsplit(" <", 1)[0], datetime.fromtimestamp(int(author.split()[-2]), UTC)
        made = Commit(sha, fields[0][1], parents, message, name, date, files, blobs)
        return self._commits.setdefault(sha, made)

    def folder(self, sha: str, path: str) -> list[tuple[str, str]]:
        """``(path, object sha)`` of each entry of folder ``path`` (``""``: the root)."""
        code, out = self.run("ls-tree", "-z", f"{sha}:{path}", ok=(0, 128))
        entries = [entry.split("\t", 1) for entry in out.split("\0") if entry and code == 0]
        return [(f"{path}/{name}".lstrip("/"), info.split()[2]) for info, name in entries]

    def merge_base(self, a: str, b: str) -> str | None:
        code, out = self.run("merge-base", a, b, ok=(0, 1))
        return out.strip() if code == 0 else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.run("merge-base", "--is-ancestor", ancestor, descendant, ok=(0, 1))[0] == 0

    def log(self, head: str, exclude: str | None) -> list[str]:
        """Commits reachable from ``head`` but not from ``exclude``, oldest first."""
        excluded = [f"^{exclude}"] if exclude else []
        return self.run("rev-list", "--reverse", head, *excluded)[1].split()

    def merge_tree(self, base: str, head: str) -> str | None:
        """The tree of git's three-way merge of ``head`` into ``base``, ``None`` on a conflict."""
        code, out = self.run("merge-tree", "--write-tree", "--no-messages", base, head, ok=(0, 1))
        return out.split("\n")[0] if code == 0 else None

    def diff(self, old: str | None, new: str) -> list[FileChange]:
        """The files that differ from commit ``old`` (``None``: none) to ``new``."""
        args = ("-r", "-p", "--no-renames", "--full-index", old or EMPTY_TREE, new)
        changes = []
        for section in re.split(r"^diff --git ", self.run("diff-tree", *args)[1], flags=re.M)[1:]:
            head, _, hunks = section.partition("\n@@")
            names = head.split("\n", 1)[0]  # "a/<path> b/<path>", the same path twice
            status = "added" if "\nnew file" in head else "modified"
            status = "removed" if "\ndeleted" in head else status
            blobs = re.findall(r"^index (\w+)\.\.(\w+)", head, flags=re.M) or [("", "")]
            patch = ("@@" + hunks).rstrip("\n") if hunks else ""
            signs = [line[:1] for line in patch.splitlines()]
            sha = blobs[0][0] if status == "removed" else blobs[0][1]
            path = names[2 : 2 + (len(names) - 5) // 2]
            changes.append(FileChange(path, status, sha, patch, signs.count("+"), signs.count("-")))
        return changes
