"""The embedded forge: branches of a real git repository are pull requests, records in SQLite."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

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

log = logging.getLogger("attune")

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
_IDENTITY = {
    "GIT_AUTHOR_NAME": "attune",
    "GIT_AUTHOR_EMAIL": "attune@localhost",
    "GIT_COMMITTER_NAME": "attune",
    "GIT_COMMITTER_EMAIL": "attune@localhost",
}
_ZERO = "0" * 40
"""As an old value of ``git update-ref``: the ref must not exist yet."""


class LocalForge:
    """A forge in ``root``: the git repository ``root/repo`` and the records ``root/forge.db``.

    Commits are made with plumbing (a temporary index, ``commit-tree``, ``update-ref`` with the
    expected old value), so no operation depends on the working tree; the working tree of the
    checked-out branch is brought along afterwards so that the repository can be read by hand.
    """

    def __init__(self, root: Path, *, create: bool = True) -> None:
        self.root = Path(root).resolve()  # git runs with GIT_DIR set: relative paths break it
        self.repo = self.root / "repo"
        self.db_path = self.root / "forge.db"
        if not create and not (self.db_path.is_file() and (self.repo / ".git").is_dir()):
            raise ForgeError("no local forge here (pass --workdir DIR)", path=str(self.root))
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.repo / ".git").is_dir():
            self.repo.mkdir(exist_ok=True)
            self._git("init", "-q", "-b", "main")
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
        if self._ref(head) is None:
            main = self._ref("main")
            blob = self._git("hash-object", "--stdin", stdin=recipe_text)
            if main is None or self._resolve(f"{main}:{recipe_path}") != blob:
                tree = self._tree(main, recipe_path, recipe_text)
                parent = ["-p", main] if main is not None else []
                commit = self._git("commit-tree", tree, *parent, "-m", f"Add {recipe_path}")
                self._set_ref("main", commit, main)
            self._set_ref(head, self.head_sha("main"), None)
        return self._insert(title, body, "main", head, ["attune"])

    def head_sha(self, branch: str) -> str:
        sha = self._ref(branch)
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
        if self._run(["check-ref-format", "--branch", branch]).returncode != 0:
            raise ForgeError(f"{branch!r} is not a valid branch name")
        if self.head_sha(base) != base_sha:
            raise HeadMoved(f"{base} moved from {base_sha} to {self.head_sha(base)}")
        tree = self._tree(base_sha, recipe_path, recipe_text)
        current = self._ref(branch)
        if current is None or not self._is_commit_on(current, base_sha, tree):
            # a branch left by a crash before its pull request was recorded is rebuilt
            commit = self._git("commit-tree", tree, "-p", base_sha, "-m", title)
            self._set_ref(branch, commit, current)
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
        tree, message = self._git("rev-parse", f"{head_sha}^{{tree}}"), f"{pr.title} (#{number})"
        if base_sha == expected_base_sha:
            if self._git("merge-base", base_sha, head_sha) != base_sha:
                raise ForgeError(
                    f"pull request #{number}: {pr.head} is not based on the head of {pr.base}"
                    f" ({base_sha}); squashing it would revert {pr.base}'s newer commits"
                )
            merged = self._git("commit-tree", tree, "-p", base_sha, "-m", message)
            self._set_ref(pr.base, merged, base_sha)
        elif self._is_commit_on(base_sha, expected_base_sha, tree, message):
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
            return self._git(*flags, f"{pr.merged_sha}^", pr.merged_sha, strip=False)
        return self._git(*flags, f"refs/heads/{pr.base}...refs/heads/{pr.head}", strip=False)

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
        pr["head_sha"] = self._ref(pr["head"]) or pr["head_sha"]
        return PullRequest(**pr)

    # -- git -----------------------------------------------------------------------------------

    def _run(
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

    def _git(
        self, *args: str, stdin: str | None = None, index: str | None = None, strip: bool = True
    ) -> str:
        proc = self._run(list(args), stdin=stdin, index=index)
        if proc.returncode != 0:
            stderr = "; ".join(line for line in proc.stderr.splitlines() if line.strip())
            raise ForgeError(f"`git {' '.join(args)}` failed (exit {proc.returncode}): {stderr}")
        return proc.stdout.strip() if strip else proc.stdout

    def _resolve(self, rev: str) -> str | None:
        proc = self._run(["rev-parse", "--verify", "--quiet", rev])
        return proc.stdout.strip() if proc.returncode == 0 else None

    def _ref(self, branch: str) -> str | None:
        return self._resolve(f"refs/heads/{branch}^{{commit}}")

    def _tree(self, parent: str | None, path: str, text: str) -> str:
        """The tree of ``parent`` with ``path`` holding ``text``; built in a temporary index."""
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise ForgeError(f"recipe path must be relative inside the repository: {path!r}")
        blob = self._git("hash-object", "-w", "--stdin", stdin=text)
        with tempfile.TemporaryDirectory(prefix="attune-index-") as tmp:
            index = str(Path(tmp) / "index")
            if parent is not None:
                self._git("read-tree", parent, index=index)
            info = f"100644,{blob},{pure.as_posix()}"
            self._git("update-index", "--add", "--cacheinfo", info, index=index)
            return self._git("write-tree", index=index)

    def _is_commit_on(
        self, commit: str, parent: str, tree: str, message: str | None = None
    ) -> bool:
        """Whether ``commit`` is one commit on top of ``parent`` with ``tree`` (and message)."""
        fmt = self._git("log", "-1", "--format=%P%n%T%n%B", commit).split("\n", 2)
        parents, got_tree, body = fmt[0], fmt[1], fmt[2] if len(fmt) > 2 else ""
        same = parents == parent and got_tree == tree
        return same and (message is None or body.strip() == message)

    def _set_ref(self, branch: str, new: str, old: str | None) -> None:
        """Move ``branch`` from ``old`` (None: must not exist) to ``new``, atomically."""
        ref = f"refs/heads/{branch}"
        self._git("update-ref", "-m", f"attune: {branch}", ref, new, old or _ZERO)
        if self._run(["symbolic-ref", "-q", "HEAD"]).stdout.strip() != ref:
            return
        # the checked-out branch moved: bring the index and files along for people reading it
        trees = [old, new] if old is not None else [new]
        proc = self._run(["read-tree", "-m", "-u", *trees])
        if proc.returncode != 0:
            log.warning("working tree of %s not updated: %s", self.repo, proc.stderr.strip())


def _create_db(path: Path) -> None:
    """Build the schema in a temporary file and move it in, so a crash leaves no half schema."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    tmp.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(tmp)) as con:
        con.executescript(_SCHEMA)
    os.replace(tmp, path)
