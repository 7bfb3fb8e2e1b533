"""The app's durable inbox: webhook deliveries seen and the commands they carry, in SQLite.

A command is written in the same transaction as its delivery record, before the webhook is
answered, so an app killed after its 202 still has it: a worker drains the queue, and a
restarted app drains what the previous one left. A delivery id seen before is a redelivery; a
comment id seen before is the same command delivered again under another id (GitHub's manual
redelivery, a second webhook on the same App): both are dropped. Rows older than the retention
are pruned, so the file does not grow forever.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

Accepted = Literal["queued", "recorded", "duplicate delivery", "duplicate comment"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, event TEXT NOT NULL, received_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS commands (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery TEXT NOT NULL,
    comment_id INTEGER UNIQUE,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'started', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0,
    received_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS commands_open ON commands (state, seq);
"""


class Delivery(NamedTuple):
    """A verified webhook delivery and the command it carries, if any."""

    delivery: str
    event: str
    command: dict[str, Any] | None = None
    comment_id: int | None = None


class QueuedCommand(BaseModel):
    """A comment event waiting to be handled."""

    seq: int
    delivery: str
    comment_id: int | None
    payload: dict[str, Any]
    attempts: int
    """How many times a worker took it before (a restart after a kill mid-handling)."""


class Inbox:
    """Deliveries and queued commands; safe to share between the request handler and workers."""

    def __init__(self, path: Path, *, retention_s: float = 30 * 86400.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.retention_s = retention_s
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a 202 promises the command survives
        self._db.executescript(_SCHEMA)
        # commands a killed app had taken but not finished are taken again (handlers are
        # idempotent by comment id); in this process, a started command is one worker's
        self._db.execute("UPDATE commands SET state = 'queued' WHERE state = 'started'")
        self._pruned_at = 0.0
        self.ready = threading.Event()
        """Set whenever a command is queued; workers wait on it."""
        if self.pending():
            self.ready.set()

    def accept(
        self,
        delivery: str,
        event: str,
        *,
        command: dict[str, Any] | None = None,
        comment_id: int | None = None,
    ) -> Accepted:
        """Record ``delivery`` and, in the same transaction, queue ``command`` (a payload)."""
        return self.accept_many([Delivery(delivery, event, command, comment_id)])[0]

    def accept_many(self, batch: list[Delivery]) -> list[Accepted]:
        """``accept`` for several deliveries in ONE transaction (one fsync): concurrent
        webhooks are committed together instead of queueing behind each other's fsync."""
        now = time.time()
        outcomes: list[Accepted] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for item in batch:
                    outcomes.append(self._accept_one(item, now))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            if now - self._pruned_at > 3600.0:
                self._prune(now)
        if "queued" in outcomes:
            self.ready.set()
        return outcomes

    def _accept_one(self, item: Delivery, now: float) -> Accepted:
        cur = self._db.execute(
            "INSERT OR IGNORE INTO deliveries VALUES (?, ?, ?)", (item.delivery, item.event, now)
        )
        if cur.rowcount != 1:
            return "duplicate delivery"
        if item.command is None:
            return "recorded"
        cur = self._db.execute(
            "INSERT OR IGNORE INTO commands (delivery, comment_id, payload, state, received_at) "
            "VALUES (?, ?, ?, 'queued', ?)",
            (item.delivery, item.comment_id, json.dumps(item.command), now),
        )
        return "queued" if cur.rowcount == 1 else "duplicate comment"

    def take(self) -> QueuedCommand | None:
        """The oldest queued command, marked started (by one worker only)."""
        with self._lock:
            row = self._db.execute(
                "SELECT seq, delivery, comment_id, payload, attempts FROM commands "
                "WHERE state = 'queued' ORDER BY seq LIMIT 1"
            ).fetchone()
            if row is None:
                self.ready.clear()
                return None
            self._db.execute(
                "UPDATE commands SET state = 'started', attempts = attempts + 1 WHERE seq = ?",
                (row[0],),
            )
        seq, delivery, comment_id, payload, attempts = row
        return QueuedCommand(
            seq=seq,
            delivery=delivery,
            comment_id=comment_id,
            payload=json.loads(payload),
            attempts=attempts,
        )

    def done(self, seq: int) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE commands SET state = 'done', finished_at = ? WHERE seq = ?",
                (time.time(), seq),
            )

    def pending(self) -> int:
        with self._lock:
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM commands WHERE state != 'done'"
            ).fetchone()
        return int(count)

    def handled(self) -> list[tuple[str, int]]:
        """(delivery, attempts) of every command done, oldest first (for operators, tests)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT delivery, attempts FROM commands WHERE state = 'done' ORDER BY seq"
            ).fetchall()
        return [(str(d), int(a)) for d, a in rows]

    def prune(self) -> None:
        """Drop deliveries and finished commands older than the retention."""
        with self._lock:
            self._prune(time.time())

    def _prune(self, now: float) -> None:
        cutoff = now - self.retention_s
        self._db.execute("DELETE FROM deliveries WHERE received_at < ?", (cutoff,))
        self._db.execute("DELETE FROM commands WHERE state = 'done' AND received_at < ?", (cutoff,))
        self._pruned_at = now

    def close(self) -> None:
        with self._lock:
            self._db.close()


class GroupCommit:
    """Concurrent webhook requests share inbox transactions: while one batch commits (in a
    thread, so the event loop keeps accepting), the next arrivals gather into the next batch.
    Used from one event loop."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self._pending: list[tuple[Delivery, asyncio.Future[Accepted]]] = []
        self._flushing = False

    async def accept(self, item: Delivery) -> Accepted:
        future: asyncio.Future[Accepted] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    outcomes = await asyncio.to_thread(
                        self.inbox.accept_many, [item for item, _ in batch]
                    )
                except Exception as exc:  # each waiting request answers with the error
                    for _, future in batch:
                        future.set_exception(exc)
                    continue
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    future.set_result(outcome)
        finally:
            self._flushing = False
