"""The ledger's SQLite file: created once and atomically, and refused unless it is an attune
ledger (the events table, its append-only triggers, the schema version)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sqlite3
import tempfile
from pathlib import Path

from gate.errors import AttuneError

SCHEMA_VERSION = 1
"""Stored in ``PRAGMA user_version``."""

COLUMNS = ["seq", "time", "campaign", "kind", "payload", "prev_hash", "hash"]
APPEND_ONLY = "attune ledger is append-only"
SCHEMA = f"""
CREATE TABLE events (
    seq INTEGER PRIMARY KEY,
    time REAL NOT NULL,
    campaign TEXT NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX events_campaign ON events (campaign, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END;
-- INSERT OR REPLACE deletes the old row without firing delete triggers, so every insert
-- must name a seq past the last one (append() always does).
CREATE TRIGGER events_no_replace BEFORE INSERT ON events
WHEN NEW.seq <= (SELECT COALESCE(MAX(seq), 0) FROM events)
BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END;
PRAGMA user_version = {SCHEMA_VERSION};
"""
TRIGGERS = ("events_no_update", "events_no_delete", "events_no_replace")
KEY_TABLE = "chain_key"
"""Present only in a keyed ledger: one row, the id of its chain key (``gate.ledger_key``)."""


def create(path: Path, key_id: str | None = None) -> None:
    """Build the schema in a temp file and move it into place, once, under a file lock; with
    ``key_id``, a keyed ledger."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if path.exists():  # another process created it while we waited
            return
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
        try:
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")  # persistent: kept in the file header
                conn.executescript(SCHEMA)
                if key_id is not None:
                    conn.execute(f"CREATE TABLE {KEY_TABLE} (id TEXT NOT NULL)")
                    conn.execute(f"INSERT INTO {KEY_TABLE} VALUES (?)", (key_id,))
            finally:
                conn.close()
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)


def check(path: Path) -> None:
    """Refuse anything but an attune ledger, without writing to it.

    The check uses a read-only connection: a read-write one could checkpoint a foreign
    database's write-ahead log into it on close.
    """

    def refuse(why: str) -> AttuneError:
        return AttuneError(
            f"not an attune ledger ({why}); move it away or choose another ledger path",
            path=str(path),
        )

    # No open() of the file here: closing any descriptor of it drops every POSIX lock this
    # process holds on it, those of its open SQLite connections too, and another process
    # could then checkpoint and delete the write-ahead log they are still writing to.
    if path.stat().st_size == 0:
        raise refuse("file is empty")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
        try:
            columns = [row[1] for row in conn.execute("PRAGMA table_info(events)")]
            (version,) = conn.execute("PRAGMA user_version").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        detail = "" if str(e) == "file is not a database" else f": {e}"
        raise refuse(f"file is not a database{detail}") from e
    if columns != COLUMNS:
        raise refuse("SQLite database without the attune events table")
    if version != SCHEMA_VERSION:
        raise refuse(f"schema version {version}, this attune reads {SCHEMA_VERSION}")


@functools.cache
def trigger_sql() -> dict[str, str]:
    """Each append-only trigger's SQL text as SQLite stores it for ``SCHEMA``."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        return dict(rows.fetchall())
    finally:
        conn.close()


def trigger_problem(found: dict[str, str]) -> str | None:
    """What is wrong with a ledger's triggers (name -> SQL text), or None. A trigger is
    compared by its text: one re-created under its name with a condition that never holds
    (``WHEN 0``) refuses nothing, and an extra trigger can change or refuse what is appended."""
    expected = trigger_sql()
    missing = [name for name in TRIGGERS if name not in found]
    if missing:
        return f"append-only triggers are missing: {', '.join(missing)}"
    changed = [name for name in TRIGGERS if found[name] != expected[name]]
    if changed:
        return f"append-only triggers were changed (their SQL differs): {', '.join(changed)}"
    extra = sorted(name for name in found if name not in expected)
    if extra:
        return f"triggers that attune never creates are present: {', '.join(extra)}"
    return None


def stored_key_id(conn: sqlite3.Connection) -> str | None:
    """The id of the key a ledger's chain is keyed with; None for an unkeyed ledger."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (KEY_TABLE,)
    ).fetchone()
    if found is None:
        return None
    row = conn.execute(f"SELECT id FROM {KEY_TABLE} LIMIT 1").fetchone()
    return None if row is None else str(row[0])
