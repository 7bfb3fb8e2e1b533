"""The fake's git: one real bare repository, driven with git's plumbing commands. Every
repository of the fake keeps its objects there (forks share objects, as on GitHub) and its
branches in its own namespace (``refs/namespaces/<owner>/refs/namespaces/<name>/refs/heads/``).
What git says about given commits never changes, so it is remembered.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from types import SimpleNamespace

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
Tree = Mapping[str, str | None] | str | None


class Record(SimpleNamespace):
    """A commit, a changed file, or one of the fake's records (state.py)."""


class GitStore:
    """A bare repository in a temporary folder (removed with this object)."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="fakegithub-")
        self._env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        self._memo: dict[tuple[str, ...], tuple[int, str]] = {}
        self._commits: dict[str, Record] = {}
        self.run("init", "--quiet", "--bare")

    def run(self, *args: str, stdin: bytes = b"", ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        """``git args``: its exit code (one of ``ok``) and output."""
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

    def write(self, parents: tuple[str, ...], message: str, author: str, content: Tree) -> Record:
        """A commit of ``content``: a tree's sha, or changes to the first parent's files (path
        -> text, ``None`` deletes), made with ``git fast-import``."""
        stamp = int(datetime.now(UTC).timestamp())
        who = f"{author} <{author}@users.noreply.github.com> {stamp} +0000"
        lines = [f"commit refs/fake/scratch\nmark :1\nauthor {who}\ncommitter {who}\n".encode()]
        lines.append(b"data %d\n%s\n" % (len(message.encode()), message.encode()))
        lines += [f"{'merge' if i else 'from'} {p}\n".encode() for i, p in enumerate(parents)]
        lines += [f'M 040000 {content} ""\n'.encode()] if isinstance(content, str) else []
        for path, text in (content if isinstance(content, Mapping) else {}).items():
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

    def commit(self, sha: str) -> Record:
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
        made = Record(sha=sha, tree=fields[0][1], parents=parents, message=message, blobs=blobs)
        made.author, made.files = author.rsplit(" <", 1)[0], files
        made.date = datetime.fromtimestamp(int(author.split()[-2]), UTC)
        return self._commits.setdefault(sha, made)

    def folder(self, sha: str, path: str) -> list[tuple[str, str]]:
        """``(path, object sha)`` of each entry of folder ``path`` (``""``: the root)."""
        code, out = self.run("ls-tree", "-z", f"{sha}:{path}", ok=(0, 128))
        entries = [entry.split("\t", 1) for entry in out.split("\0") if entry and code == 0]
        return [(f"{path}/{name}".lstrip("/"), info.split()[2]) for info, name in entries]

    def merge_base(self, a: str, b: str) -> str | None:
        code, out = self.run("merge-base", a, b, ok=(0, 1))
        return out.strip() if code == 0 else None

    def log(self, head: str, exclude: str | None) -> list[str]:
        """Commits reachable from ``head`` but not from ``exclude``, oldest first."""
        excluded = [f"^{exclude}"] if exclude else []
        return self.run("rev-list", "--reverse", head, *excluded)[1].split()

    def merge_tree(self, base: str, head: str) -> str | None:
        """The tree of git's three-way merge of ``head`` into ``base``, ``None`` on a conflict."""
        code, out = self.run("merge-tree", "--write-tree", "--no-messages", base, head, ok=(0, 1))
        return out.split("\n")[0] if code == 0 else None

    def diff(self, old: str | None, new: str) -> list[Record]:
        """The files that differ from commit ``old`` (``None``: none) to ``new``."""
        args = ("-r", "-p", "--no-renames", "--full-index", old or EMPTY_TREE, new)
        changes = []
        for section in re.split(r"^diff --git ", self.run("diff-tree", *args)[1], flags=re.M)[1:]:
            head, _, hunks = section.partition("\n@@")
            names = head.split("\n", 1)[0]  # "a/<path> b/<path>", the same path twice
            status = "removed" if "\ndeleted" in head else "added" if "\nnew file" in head else ""
            blobs = re.findall(r"^index (\w+)\.\.(\w+)", head, flags=re.M) or [("", "")]
            patch = ("@@" + hunks).rstrip("\n") if hunks else ""
            signs = [line[:1] for line in patch.splitlines()]
            made = Record(filename=names[2 : (len(names) - 1) // 2], status=status or "modified")
            made.sha, made.patch = blobs[0][0] if status == "removed" else blobs[0][1], patch
            made.additions, made.deletions = signs.count("+"), signs.count("-")
            changes.append(made)
        return changes
