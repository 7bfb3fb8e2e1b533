"""The append-only, hash-chained event ledger in SQLite: every campaign transition, every charge."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel

from gate import ledger_file
from gate.errors import AttuneError
from gate.event_codec import EventError, parse_event, to_payload
from gate.events import MODELS, Event
from gate.models import canonical_json

EventKind = Literal[
    "campaign_opened",
    "forge_ready",
    "noise_calibrated",
    "checks_calibrated",
    "profile_requested",
    "candidate_proposed",
    "pr_opened",
    "gate_checked",
    "launch_refused",
    "trial_started",
    "trial_launched",
    "trial_finished",
    "trial_abandoned",
    "trial_judged",
    "pr_merged",
    "pr_closed",
    "campaign_stopped",
    "campaign_resumed",
    "lessons_proposed",
    "model_called",
    "agent_assumption",
    "run_requested",
    "noise_recalibrated",
    "confirmation_requested",
    "confirmation_finished",
]
"""What happened; a closed list, frozen by tests (adding one is a reviewed change)."""

EVENT_KINDS: tuple[str, ...] = get_args(EventKind)

GENESIS_HASH = "0" * 64
"""``prev_hash`` of the first event."""

_SELECT = f"SELECT {', '.join(ledger_file.COLUMNS)} FROM events"


class LedgerEvent(BaseModel):
    """One row of the ledger."""

    seq: int
    """1-based position in the chain; gapless."""
    time: float
    """Unix time of the append (s)."""
    campaign: str
    kind: EventKind
    payload: dict[str, Any]
    prev_hash: str
    """``hash`` of the previous event, or 64 zeros for the first."""
    hash: str
    """sha256 hex of canonical_json([seq, time, campaign, kind, payload, prev_hash])."""

    @property
    def event(self) -> Event:
        """The payload as its kind's typed, immutable event (0.1 payloads upcast)."""
        return parse_event(self.kind, self.payload)


class VerifyReport(BaseModel):
    """What ``attune ledger verify`` found."""

    ok: bool
    checked: int
    """Events whose link and hash were good, counted from seq 1."""
    first_broken_seq: int | None = None
    reason: str | None = None


def event_hash(seq: int, at: float, campaign: str, kind: str, payload: Any, prev_hash: str) -> str:
    """The chain hash of one event; ``payload`` is the decoded object, not its text."""
    body = canonical_json([seq, at, campaign, kind, payload, prev_hash])
    return hashlib.sha256(body.encode()).hexdigest()


class Ledger:
    """An open ledger file; safe to share between threads and processes.

    Writes go through ``BEGIN IMMEDIATE`` so two writers never read the same last hash,
    and ``synchronous=FULL`` so an acknowledged event survives power loss.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            ledger_file.create(self.path)
        ledger_file.check(self.path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def append(
        self, campaign: str, kind: EventKind, payload: dict[str, Any] | Event
    ) -> LedgerEvent:
        """Add one event at the end of the chain and return it as stored. The payload must
        validate against its kind's model (``gate.events``); nothing is written otherwise."""
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown ledger event kind {kind!r}; known: {', '.join(EVENT_KINDS)}")
        if isinstance(payload, Event):
            if kind != payload.KIND:
                raise EventError(f"a {payload.KIND} event appended as {kind}")
            event = payload
        else:
            event = parse_event(kind, {**payload, "v": MODELS[kind].VERSION})
        # Hash what will be read back: canonical_json stringifies what JSON cannot hold.
        text = canonical_json(to_payload(event))
        decoded = json.loads(text)
        with self._lock, self._transaction():
            last = self._conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            seq, prev = next(last, (0, GENESIS_HASH))
            seq += 1
            at = time.time()
            digest = event_hash(seq, at, campaign, kind, decoded, prev)
            row = (seq, at, campaign, kind, text, prev, digest)
            self._conn.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        return self._event(row)

    def events(self, campaign: str | None = None) -> list[LedgerEvent]:
        """All events, or one campaign's, in seq order."""
        query = f"{_SELECT} WHERE ?1 IS NULL OR campaign = ?1 ORDER BY seq"
        with self._lock:
            rows = self._conn.execute(query, (campaign,)).fetchall()
        return [self._event(row) for row in rows]

    def campaigns(self) -> list[str]:
        """Campaign names in the order they first appear."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT campaign FROM events GROUP BY campaign ORDER BY MIN(seq)"
            ).fetchall()
        return [name for (name,) in rows]

    def verify(self) -> VerifyReport:
        """Re-hash the whole chain and check the append-only triggers are still in place.

        Detects edited rows, edited hashes and deleted rows, but not the loss of the last
        events (truncation), nor a chain rewritten and re-hashed from the tampered row on.
        """
        prev, checked = GENESIS_HASH, 0
        with self._lock:
            rows = self._conn.execute(f"{_SELECT} ORDER BY seq").fetchall()
            found = self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            triggers = {name for (name,) in found}
        for seq, at, campaign, kind, text, prev_hash, digest in rows:
            expected = checked + 1
            reason = None
            if seq != expected:
                reason = f"seq {expected} is missing (next is {seq}): rows were deleted"
            elif prev_hash != prev:
                reason = f"prev_hash of seq {seq} does not match the hash of seq {seq - 1}"
            else:
                try:
                    decoded = json.loads(text)
                except (TypeError, ValueError):
                    reason = f"payload of seq {seq} is not JSON"
                else:
                    if event_hash(seq, at, campaign, kind, decoded, prev_hash) != digest:
                        reason = f"seq {seq} does not match its hash: the row was edited"
            if reason:
                return VerifyReport(
                    ok=False, checked=checked, first_broken_seq=expected, reason=reason
                )
            prev, checked = digest, expected
        missing = [name for name in ledger_file.TRIGGERS if name not in triggers]
        if missing:
            reason = f"append-only triggers are missing: {', '.join(missing)}"
            return VerifyReport(ok=False, checked=checked, reason=reason)
        return VerifyReport(ok=True, checked=checked)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _event(self, row: tuple[Any, ...]) -> LedgerEvent:
        fields = dict(zip(ledger_file.COLUMNS, row, strict=True))
        try:
            fields["payload"] = json.loads(fields["payload"])
            return LedgerEvent.model_validate(fields)
        except ValueError as e:  # pydantic's ValidationError is a ValueError
            raise AttuneError(
                f"event seq {fields['seq']} is unreadable ({e.__class__.__name__}); "
                "run `attune ledger verify`",
                path=str(self.path),
            ) from e
