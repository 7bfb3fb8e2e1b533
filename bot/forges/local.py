"""The embedded forge: branches of a real git repository are pull requests, records in SQLite."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path, PurePosixPath
from typing import Any

from bot.forges.git_plumbing import Plumbing
from bot.interfaces import (
    CheckResult,
    Comment,
    ForgeError,
    HeadMoved,
    PullRequest,
    marker_name,
    marker_tag,
    split_marker,
)

SCHEMA_VERSION = 1
_SCHEMA = f"""
CREATE TABLE prs (
    number INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL,
    base TEXT NOT NULL, head TEXT NOT NULL, state TEXT NOT NULL, labels TEXT NOT NULL,
    head_sha TEXT NOT NULL, merged_sha TEXT, created_at REAL NOT NULL
);
CREATE INDEX prs_head ON prs (head);
CREATE TABLE checks (
    pr INTEGER NOT NULL, name TEXT NOT NULL, conclusion TEXT NOT NULL, summary TEXT NOT NULL,
    PRIMARY KEY (pr, name)
);
CREATE TABLE comments (
    id INTEGER PRIMARY KEY, pr INTEGER NOT NULL, body TEXT NOT NULL, marker TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL
);
PRAGMA user_version = {SCHEMA_VERSION};
"""
_PR_FIELDS = (
    "number",
    "title",
    "body",
    "base",
    "head",
    "state",
    "labels",
    "head_sha",
    "merged_sha",
)
_PR_COLUMNS = ", ".join(_PR_FIELDS)


class LocalForge:
    """A forge in ``root``: the git repository ``root/repo`` and the records ``root/forge.db``.

    Commits are made with plumbing (``git_plumbing``): no operation depends on the working tree.
    """

    def __init__(self, root: Path, *, create: bool = True) -> None:
        self.root = Path(root).resolve()  # git runs with GIT_DIR set: relative paths break it
        self.repo = self.root / "repo"
        self.db_path = self.root / "forge.db"
        self.git = Plumbing(self.repo)
        if not create and not (self.db_path.is_file() and (self.repo / ".git").is_dir()):
            raise ForgeError("no local forge here (pass --workdir DIR)", path=str(self.root))
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.repo / ".git").is_dir():
            self.repo.mkdir(exist_ok=True)
            self.git.cmd("init", "-q", "-b", "main")
        if not self.db_path.exists():
            _create_db(self.db_path)
        self._db = sqlite3.connect(self.db_path, timeout=30.0)
        self._db.execute("PRAGMA journal_mode = WAL")

    def __enter__(self) -> LocalForge:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

    def disconnect(self) -> None:
        """Close the database (``close(number)`` closes a pull request)."""
        self._db.close()

    # -- pull requests -------------------------------------------------------------------------

    def open_tuned(self, recipe_path: str, recipe_text: str, title: str, body: str) -> PullRequest:
        head = f"tune/{PurePosixPath(recipe_path).stem}"
        existing = self._by_head(head)
        if existing is not None:
            return existing
        if self.git.ref(head) is None:
            main = self.git.ref("main")
            blob = self.git.cmd("hash-object", "--stdin", stdin=recipe_text)
            if main is None or self.git.resolve(f"{main}:{recipe_path}") != blob:
                tree = self.git.tree(main, recipe_path, recipe_text)
                parent = ["-p", main] if main is not None else []
                commit = self.git.cmd("commit-tree", tree, *parent, "-m", f"Add {recipe_path}")
                self.git.set_ref("main", commit, main)
            self.git.set_ref(head, self.head_sha("main"), None)
        return self._insert(title, body, "main", head, ["attune"])

    def head_sha(self, branch: str) -> str:
        sha = self.git.ref(branch)
        if sha is None:
            raise ForgeError(f"no branch {branch!r} in {self.repo}")
        return sha

    def open_candidate(
        self,
        *,
        branch: str,
        base: str,
        base_sha: str,
        recipe_path: str,
        recipe_text: str,
        title: str,
        body: str,
        labels: list[str],
    ) -> PullRequest:
        existing = self._by_head(branch)
        if existing is not None:
            return existing
        if self.git.run(["check-ref-format", "--branch", branch]).returncode != 0:
            raise ForgeError(f"{branch!r} is not a valid branch name")
        if self.head_sha(base) != base_sha:
            raise HeadMoved(f"{base} moved from {base_sha} to {self.head_sha(base)}")
        tree = self.git.tree(base_sha, recipe_path, recipe_text)
        current = self.git.ref(branch)
        if current is None or not self.git.is_commit_on(current, base_sha, tree):
            # a branch left by a crash before its pull request was recorded is rebuilt
            commit = self.git.cmd("commit-tree", tree, "-p", base_sha, "-m", title)
            self.git.set_ref(branch, commit, current)
        return self._insert(title, body, base, branch, labels)

    def get(self, number: int) -> PullRequest:
        query = f"SELECT {_PR_COLUMNS} FROM prs WHERE number = ?"
        found = self._db.execute(query, (number,)).fetchone()
        if found is None:
            raise ForgeError(f"no pull request #{number}", path=str(self.root))
        return self._pull(found)

    def pulls(self) -> list[PullRequest]:
        rows = self._db.execute(f"SELECT {_PR_COLUMNS} FROM prs ORDER BY number").fetchall()
        return [self._pull(row) for row in rows]

    def set_check(self, number: int, check: CheckResult) -> None:
        self.get(number)
        self._write(
            "INSERT INTO checks VALUES (?, ?, ?, ?) ON CONFLICT (pr, name) DO UPDATE"
            " SET conclusion = excluded.conclusion, summary = excluded.summary",
            (number, check.name, check.conclusion, check.summary),
        )

    def merge(self, number: int, *, expected_base_sha: str, expected_head_sha: str) -> str:
        pr = self.get(number)
        if pr.merged_sha is not None:
            return pr.merged_sha
        if pr.state == "closed":
            raise ForgeError(f"pull request #{number} is closed; it cannot be merged")
        base_sha, head_sha = self.head_sha(pr.base), self.head_sha(pr.head)
        if head_sha != expected_head_sha:
            raise HeadMoved(
                f"pull request #{number}: head moved from {expected_head_sha} (benchmarked) "
                f"to {head_sha}; nothing was merged"
            )
        tree, message = self.git.cmd("rev-parse", f"{head_sha}^{{tree}}"), f"{pr.title} (#{number})"
        if base_sha == expected_base_sha:
            if self.git.cmd("merge-base", base_sha, head_sha) != base_sha:
                raise ForgeError(
                    f"pull request #{number}: {pr.head} is not based on the head of {pr.base}"
                    f" ({base_sha}); squashing it would revert {pr.base}'s newer commits"
                )
            merged = self.git.cmd("commit-tree", tree, "-p", base_sha, "-m", message)
            self.git.set_ref(pr.base, merged, base_sha)
        elif self.git.is_commit_on(base_sha, expected_base_sha, tree, message):
            merged = base_sha  # merged by an earlier call that stopped before recording it
        else:
            moved = f"expected {expected_base_sha}, found {base_sha}"
            raise ForgeError(f"pull request #{number}: base moved: {moved}")
        update = "UPDATE prs SET state = 'merged', merged_sha = ?, head_sha = ? WHERE number = ?"
        self._write(update, (merged, head_sha, number))
        return merged

    def close(self, number: int) -> None:
        pr = self.get(number)
        if pr.state == "merged":
            raise ForgeError(f"pull request #{number} is merged; it cannot be closed")
        self._write("UPDATE prs SET state = 'closed' WHERE number = ?", (number,))

    def comment(self, number: int, body: str, *, marker: str | None = None) -> Comment:
        self.get(number)
        now = time.time()
        name = marker_name(marker) if marker is not None else None
        if name is not None:  # stored as GitHub shows it: the hidden marker line first
            _, bare = split_marker(body)
            body = f"{marker_tag(name)}\n{bare}"
        query = "SELECT id FROM comments WHERE pr = ? AND marker = ? ORDER BY id LIMIT 1"
        found = self._db.execute(query, (number, name)).fetchone() if name else None
        if found is not None:
            cid = int(found[0])
            update = "UPDATE comments SET body = ?, updated_at = ? WHERE id = ?"
            self._write(update, (body, now, cid))
        else:
            cid = self._write(
                "INSERT INTO comments (pr, body, marker, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (number, body, name, now, now),
            )
        return Comment(id=cid, pr=number, body=split_marker(body)[1] if name else body, marker=name)

    def comments(self, number: int) -> list[Comment]:
        self.get(number)
        query = "SELECT id, body, marker FROM comments WHERE pr = ? ORDER BY id"
        rows = self._db.execute(query, (number,)).fetchall()
        return [
            Comment(
                id=cid, pr=number, body=split_marker(body)[1] if marker else body, marker=marker
            )
            for cid, body, marker in rows
        ]

    def diff(self, number: int) -> str:
        """Open or closed: ``base...head`` (from their merge base); merged: what the squash
        commit changed."""
        pr = self.get(number)
        flags = ["diff", "--no-color", "--no-ext-diff", "--no-textconv"]
        if pr.merged_sha is not None:
            return self.git.cmd(*flags, f"{pr.merged_sha}^", pr.merged_sha, strip=False)
        return self.git.cmd(*flags, f"refs/heads/{pr.base}...refs/heads/{pr.head}", strip=False)

    # -- records -------------------------------------------------------------------------------

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        """Run one statement in its own transaction; return the last inserted row id."""
        with self._db:
            return int(self._db.execute(sql, params).lastrowid or 0)

    def _by_head(self, head: str) -> PullRequest | None:
        query = f"SELECT {_PR_COLUMNS} FROM prs WHERE head = ? ORDER BY number DESC LIMIT 1"
        row = self._db.execute(query, (head,)).fetchone()
        return None if row is None else self._pull(row)

    def _insert(
        self, title: str, body: str, base: str, head: str, labels: list[str]
    ) -> PullRequest:
        number = self._write(
            "INSERT INTO prs (title, body, base, head, state, labels, head_sha, created_at)"
            " VALUES (?, ?, ?, ?, 'open', ?, ?, ?)",
            (title, body, base, head, json.dumps(labels), self.head_sha(head), time.time()),
        )
        return self.get(number)

    def _pull(self, row: tuple[Any, ...]) -> PullRequest:
        """A record as shown: its checks, and the branch's current head while the branch exists."""
        pr = dict(zip(_PR_FIELDS, row, strict=True))
        query = "SELECT name, conclusion, summary FROM checks WHERE pr = ? ORDER BY rowid"
        checks = self._db.execute(query, (pr["number"],)).fetchall()
        pr["checks"] = [CheckResult(name=n, conclusion=c, summary=s) for n, c, s in checks]
        pr["labels"] = json.loads(pr["labels"])
        pr["head_sha"] = self.git.ref(pr["head"]) or pr["head_sha"]
        return PullRequest(**pr)


def _create_db(path: Path) -> None:
    """Build the schema in a temporary file and move it in, so a crash leaves no half schema."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(tmp)) as con:
        con.executescript(_SCHEMA)
    os.replace(tmp, path)
