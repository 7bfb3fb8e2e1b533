"""Webhook deliveries already handled, so that a redelivery does nothing twice."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path


class DeliveryLog:
    """``X-GitHub-Delivery`` ids in SQLite: survives a restarted app."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS deliveries "
            "(id TEXT PRIMARY KEY, event TEXT NOT NULL, received_at REAL NOT NULL)"
        )

    def first_time(self, delivery: str, event: str) -> bool:
        """Record ``delivery``; False when it was recorded before (a redelivery)."""
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO deliveries VALUES (?, ?, ?)", (delivery, event, time.time())
            )
            return cur.rowcount == 1

    def close(self) -> None:
        self._db.close()
