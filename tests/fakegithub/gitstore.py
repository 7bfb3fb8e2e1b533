"""A tiny content-addressed commit store: enough git for branches, contents, diffs and merges.

A commit holds a full snapshot of its files (path -> text). Its sha is the sha1 of its tree,
parents, author, date and message, the way git hashes a commit object; blob shas are git's own
(``sha1("blob <size>\\0" + data)``), so the contents API reports the sha git would.
"""

from __future__ import annotations

import difflib
import hashlib
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime


def blob_sha(text: str) -> str:
    """Git's blob sha of ``text`` (UTF-8)."""
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def tree_sha(files: dict[str, str]) -> str:
    """A stable sha for a snapshot (a flat stand-in for git's nested trees)."""
    entries = "".join(f"{path}\0{blob_sha(text)}\n" for path, text in sorted(files.items()))
    return hashlib.sha1(b"tree " + entries.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Commit:
    sha: str
    tree: str
    files: dict[str, str]
    parents: tuple[str, ...]
    message: str
    author: str
    """Login of the author."""
    date: datetime


@dataclass(frozen=True)
class FileChange:
    path: str
    status: str
    """``added``, ``removed`` or ``modified``."""
    old: str | None
    new: str | None

    def patch(self) -> tuple[str, int, int]:
        """``(unified diff without file headers, additions, deletions)`` as GitHub shows it."""
        return unified_patch(self.old or "", self.new or "")


def unified_patch(old: str, new: str) -> tuple[str, int, int]:
    """A git-style hunk list (``@@ ... @@`` onwards) with the additions and deletions counts."""
    lines = list(
        difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), n=3)
    )[2:]
    out: list[str] = []
    additions = deletions = 0
    for line in lines:
        if line.startswith("+"):
            additions += 1
        elif line.startswith("-"):
            deletions += 1
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out).removesuffix("\n"), additions, deletions


def changes(old: dict[str, str], new: dict[str, str]) -> list[FileChange]:
    """The files that differ between two snapshots, sorted by path."""
    result = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "modified"
        result.append(FileChange(path, status, before, after))
    return result


@dataclass
class ObjectStore:
    """Every commit of every repository, by sha (forks share objects, as on GitHub)."""

    commits: dict[str, Commit] = field(default_factory=dict)

    def make_commit(
        self,
        files: dict[str, str],
        parents: tuple[str, ...],
        message: str,
        author: str,
        date: datetime | None = None,
    ) -> Commit:
        date = date or datetime.now(UTC).replace(microsecond=0)
        tree = tree_sha(files)
        header = f"tree {tree}\n" + "".join(f"parent {p}\n" for p in parents)
        header += f"author {author} {int(date.timestamp())}\n\n{message}"
        sha = hashlib.sha1(header.encode("utf-8")).hexdigest()
        commit = Commit(sha, tree, dict(files), parents, message, author, date)
        self.commits.setdefault(sha, commit)
        return self.commits[sha]

    def get(self, sha: str) -> Commit | None:
        return self.commits.get(sha)

    def ancestors(self, sha: str) -> list[str]:
        """``sha`` and every commit reachable from it, nearest first."""
        order: list[str] = []
        seen: set[str] = set()
        queue = deque([sha])
        while queue:
            current = queue.popleft()
            if current in seen or current not in self.commits:
                continue
            seen.add(current)
            order.append(current)
            queue.extend(self.commits[current].parents)
        return order

    def merge_base(self, a: str, b: str) -> str | None:
        """The nearest commit reachable from both (``None`` for unrelated histories)."""
        from_b = set(self.ancestors(b))
        return next((sha for sha in self.ancestors(a) if sha in from_b), None)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor in self.ancestors(descendant)

    def changes_since_base(self, base: str, head: str) -> list[FileChange]:
        """What ``head`` changed since its merge base with ``base`` (a pull request's files)."""
        merge_base = self.merge_base(head, base)
        old = self.commits[merge_base].files if merge_base else {}
        return changes(old, self.commits[head].files)

    def three_way(self, base: str, head: str) -> dict[str, str] | None:
        """``base``'s files with ``head``'s changes applied; ``None`` on a conflict (both sides
        changed the same file differently since their merge base)."""
        merge_base = self.merge_base(head, base)
        ancestor = self.commits[merge_base].files if merge_base else {}
        ours = dict(self.commits[base].files)
        for change in changes(ancestor, self.commits[head].files):
            if ours.get(change.path) not in (change.old, change.new):
                return None
            if change.new is None:
                ours.pop(change.path, None)
            else:
                ours[change.path] = change.new
        return ours
