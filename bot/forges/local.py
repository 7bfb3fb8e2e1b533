"""The embedded forge: branches of a real git repository are pull requests, records in SQLite."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from bot.interfaces import CheckResult, Comment, PullRequest
from gate.errors import AttuneError

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
_PR_COLUMNS = "number, title, body, base, head, state, labels, head_sha, merged_sha"
_IDENTITY = {
    "GIT_AUTHOR_NAME": "attune",
    "GIT_AUTHOR_EMAIL": "attune@localhost",
    "GIT_COMMITTER_NAME": "attune",
    "GIT_COMMITTER_EMAIL": "attune@localhost",
}
_ZERO = "0" * 40
"""As an old value of ``git update-ref``: the ref must not exist yet."""


class ForgeError(AttuneError):
    """A forge operation that cannot be done: git failed, a PR is missing, the base moved."""


def _marker(marker: str) -> str:
    """``attune:cost`` from ``attune:cost`` or ``<!-- attune:cost -->``."""
    inner = re.fullmatch(r"\s*<!--\s*(.*?)\s*-->\s*", marker)
    return inner.group(1) if inner else marker.strip()


class LocalForge:
    """A forge in ``root``: the git repository ``root/repo`` and the records ``root/forge.db``.

    Commits are made with plumbing (a temporary index, ``commit-tree``, ``update-ref`` with the
    expected old value), so no operation depends on the working tree; the working tree of the
    checked-out branch is brought along afterwards so that the repository can be read by hand.
    """

    def __init__(self, root: Path, *, create: bool = True) -> None:
        self.root = Path(root)
        self.repo = self.root / "repo"
        self.db_path = self.root / "forge.db"
        if not create and not (self.db_path.is_file() and (self.repo / ".git").is_dir()):
            raise ForgeError("no local forge here (pass --workdir DIR)", path=str(self.root))
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.repo / ".git").is_dir():
            self._run(["init", "-q", "-b", "main", str(self.repo)], cwd=self.root)
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
            if main is None or self._blob_at(main, recipe_path) != self._hash(recipe_text):
                commit = self._commit(main, recipe_path, recipe_text, f"Add {recipe_path}")
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
        recipe_path: str,
        recipe_text: str,
        title: str,
        body: str,
        labels: list[str],
    ) -> PullRequest:
        existing = self._by_head(branch)
        if existing is not None:
            return existing
        self._run(["check-ref-format", "--branch", branch])
        base_sha = self.head_sha(base)
        tree = self._tree(base_sha, recipe_path, recipe_text)
        current = self._ref(branch)
        if current is None or not self._is_commit_on(current, base_sha, tree):
            # a branch left by a crash before its pull request was recorded is rebuilt
            commit = self._git("commit-tree", tree, "-p", base_sha, "-m", title)
            self._set_ref(branch, commit, current)
        return self._insert(title, body, base, branch, labels)

    def get(self, number: int) -> PullRequest:
        row = self._db.execute(f"SELECT {_PR_COLUMNS} FROM prs WHERE number = ?", (number,))
        found = row.fetchone()
        if found is None:
            raise ForgeError(f"no pull request #{number}", path=str(self.root))
        return self._pull(found)

    def pulls(self) -> list[PullRequest]:
        rows = self._db.execute(f"SELECT {_PR_COLUMNS} FROM prs ORDER BY number").fetchall()
        return [self._pull(row) for row in rows]

    def set_check(self, number: int, check: CheckResult) -> None:
        self.get(number)
        with self._db:
            self._db.execute(
                "INSERT INTO checks VALUES (?, ?, ?, ?) ON CONFLICT (pr, name) DO UPDATE"
                " SET conclusion = excluded.conclusion, summary = excluded.summary",
                (number, check.name, check.conclusion, check.summary),
            )

    def merge(self, number: int, *, expected_base_sha: str) -> str:
        pr = self.get(number)
        if pr.state == "merged" and pr.merged_sha is not None:
            return pr.merged_sha
        if pr.state == "closed":
            raise ForgeError(f"pull request #{number} is closed; it cannot be merged")
        base_sha, head_sha = self.head_sha(pr.base), self.head_sha(pr.head)
        tree = self._git("rev-parse", f"{head_sha}^{{tree}}")
        message = f"{pr.title} (#{number})"
        if base_sha != expected_base_sha and not self._is_commit_on(
            base_sha, expected_base_sha, tree, message
        ):
            raise ForgeError(
                f"pull request #{number}: base moved: expected {expected_base_sha}, found {base_sha}"
            )
        if base_sha == expected_base_sha:
            if not self._is_ancestor(base_sha, head_sha):
                raise ForgeError(
                    f"pull request #{number}: {pr.head} is not based on the head of {pr.base}"
                    f" ({base_sha}); squashing it would revert {pr.base}'s newer commits"
                )
            merged = self._git("commit-tree", tree, "-p", base_sha, "-m", message)
            self._set_ref(pr.base, merged, base_sha)
        else:  # merged by an earlier call that stopped before recording it
            merged = base_sha
        with self._db:
            self._db.execute(
                "UPDATE prs SET state = 'merged', merged_sha = ?, head_sha = ? WHERE number = ?",
                (merged, head_sha, number),
            )
        return merged

    def close(self, number: int) -> None:
        pr = self.get(number)
        if pr.state == "merged":
            raise ForgeError(f"pull request #{number} is merged; it cannot be closed")
        with self._db:
            self._db.execute("UPDATE prs SET state = 'closed' WHERE number = ?", (number,))

    def comment(self, number: int, body: str, *, marker: str | None = None) -> Comment:
        self.get(number)
        now = time.time()
        name = _marker(marker) if marker is not None else None
        if name is not None and f"<!-- {name} -->" not in body:
            body = f"<!-- {name} -->\n{body}"
        with self._db:
            found = None
            if name is not None:
                found = self._db.execute(
                    "SELECT id FROM comments WHERE pr = ? AND marker = ? ORDER BY id LIMIT 1",
                    (number, name),
                ).fetchone()
            if found is not None:
                cid = int(found[0])
                self._db.execute(
                    "UPDATE comments SET body = ?, updated_at = ? WHERE id = ?", (body, now, cid)
                )
            else:
                cur = self._db.execute(
                    "INSERT INTO comments (pr, body, marker, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (number, body, name, now, now),
                )
                cid = int(cur.lastrowid or 0)
        return Comment(id=cid, pr=number, body=body, marker=name)

    def comments(self, number: int) -> list[Comment]:
        self.get(number)
        rows = self._db.execute(
            "SELECT id, body, marker FROM comments WHERE pr = ? ORDER BY id", (number,)
        ).fetchall()
        return [Comment(id=cid, pr=number, body=body, marker=marker) for cid, body, marker in rows]

    def diff(self, number: int) -> str:
        """Open or closed: ``base...head`` (from their merge base); merged: what the squash
        commit changed."""
        pr = self.get(number)
        flags = ["diff", "--no-color", "--no-ext-diff", "--no-textconv"]
        if pr.merged_sha is not None:
            return self._git(*flags, f"{pr.merged_sha}^", pr.merged_sha, strip=False)
        return self._git(*flags, f"refs/heads/{pr.base}...refs/heads/{pr.head}", strip=False)

    # -- records -------------------------------------------------------------------------------

    def _by_head(self, head: str) -> PullRequest | None:
        rows = self._db.execute(
            f"SELECT {_PR_COLUMNS} FROM prs WHERE head = ? ORDER BY number DESC LIMIT 1", (head,)
        ).fetchone()
        return None if rows is None else self._pull(rows)

    def _insert(
        self, title: str, body: str, base: str, head: str, labels: list[str]
    ) -> PullRequest:
        with self._db:
            cur = self._db.execute(
                "INSERT INTO prs (title, body, base, head, state, labels, head_sha, created_at)"
                " VALUES (?, ?, ?, ?, 'open', ?, ?, ?)",
                (title, body, base, head, json.dumps(labels), self.head_sha(head), time.time()),
            )
        return self.get(int(cur.lastrowid or 0))

    def _pull(self, row: tuple[Any, ...]) -> PullRequest:
        number, title, body, base, head, state, labels, head_sha, merged_sha = row
        checks = self._db.execute(
            "SELECT name, conclusion, summary FROM checks WHERE pr = ? ORDER BY rowid", (number,)
        ).fetchall()
        return PullRequest(
            number=number,
            title=title,
            body=body,
            base=base,
            head=head,
            state=state,
            labels=json.loads(labels),
            checks=[CheckResult(name=n, conclusion=c, summary=s) for n, c, s in checks],
            head_sha=self._ref(head) or head_sha,
            merged_sha=merged_sha,
        )

    # -- git -----------------------------------------------------------------------------------

    def _run(
        self, args: list[str], *, cwd: Path | None = None, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        full.update(_IDENTITY, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
        if cwd is None:  # never let git discover an enclosing repository
            full.update(GIT_DIR=str(self.repo / ".git"), GIT_WORK_TREE=str(self.repo))
        full.update(env)
        cmd = ["git", "-c", "commit.gpgsign=false", *args]
        return subprocess.run(
            cmd, cwd=cwd or self.repo, env=full, input=stdin, capture_output=True, text=True
        )

    def _git(self, *args: str, stdin: str | None = None, strip: bool = True, **env: str) -> str:
        proc = self._run(list(args), stdin=stdin, **env)
        if proc.returncode != 0:
            stderr = "; ".join(line for line in proc.stderr.splitlines() if line.strip())
            raise ForgeError(f"`git {' '.join(args)}` failed (exit {proc.returncode}): {stderr}")
        return proc.stdout.strip() if strip else proc.stdout

    def _ref(self, branch: str) -> str | None:
        proc = self._run(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"])
        return proc.stdout.strip() if proc.returncode == 0 else None

    def _hash(self, text: str) -> str:
        return self._git("hash-object", "--stdin", stdin=text)

    def _blob_at(self, commit: str, path: str) -> str | None:
        proc = self._run(["rev-parse", "--verify", "--quiet", f"{commit}:{path}"])
        return proc.stdout.strip() if proc.returncode == 0 else None

    def _tree(self, parent: str | None, path: str, text: str) -> str:
        """The tree of ``parent`` with ``path`` holding ``text``; built in a temporary index."""
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts or not pure.parts:
            raise ForgeError(f"recipe path must be relative inside the repository: {path!r}")
        blob = self._git("hash-object", "-w", "--stdin", stdin=text)
        with tempfile.TemporaryDirectory(prefix="attune-index-") as tmp:
            index = str(Path(tmp) / "index")
            if parent is not None:
                self._git("read-tree", parent, GIT_INDEX_FILE=index)
            info = f"100644,{blob},{pure.as_posix()}"
            self._git("update-index", "--add", "--cacheinfo", info, GIT_INDEX_FILE=index)
            return self._git("write-tree", GIT_INDEX_FILE=index)

    def _commit(self, parent: str | None, path: str, text: str, message: str) -> str:
        tree = self._tree(parent, path, text)
        parents = ["-p", parent] if parent is not None else []
        return self._git("commit-tree", tree, *parents, "-m", message)

    def _is_commit_on(self, commit: str, parent: str, tree: str, message: str | None = None) -> bool:
        """Whether ``commit`` is one commit on top of ``parent`` with ``tree`` (and message)."""
        fmt = self._git("log", "-1", "--format=%P%n%T%n%B", commit).split("\n", 2)
        parents, got_tree, body = fmt[0], fmt[1], fmt[2] if len(fmt) > 2 else ""
        same = parents == parent and got_tree == tree
        return same and (message is None or body.strip() == message)

    def _is_ancestor(self, ancestor: str, commit: str) -> bool:
        proc = self._run(["merge-base", "--is-ancestor", ancestor, commit])
        if proc.returncode > 1:
            raise ForgeError(f"`git merge-base` failed: {proc.stderr.strip()}")
        return proc.returncode == 0

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
    fd, tmp = tempfile.mkstemp(prefix=".forge-", suffix=".db", dir=path.parent)
    os.close(fd)
    try:
        con = sqlite3.connect(tmp)
        try:
            con.executescript(_SCHEMA)
            con.execute("PRAGMA journal_mode = WAL")
        finally:
            con.close()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
