"""The append-only, hash-chained event ledger in SQLite: every campaign transition, every charge."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel

from gate import ledger_file
from gate.errors import AttuneError
from gate.event_codec import EventError, parse_event, to_payload
from gate.events import MODELS, Event
from gate.ledger_key import chain_key, key_from_environment, key_id
from gate.ledger_proof import Anchor as Anchor
from gate.ledger_proof import VerifyReport as VerifyReport
from gate.ledger_proof import anchor_problem
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
    "tool_started",
    "tool_finished",
    "conversation_trimmed",
    "proposal_refused",
    "prediction_made",
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


def event_hash(
    seq: int,
    at: float,
    campaign: str,
    kind: str,
    payload: Any,
    prev_hash: str,
    key: bytes | None = None,
) -> str:
    """The chain hash of one event; ``payload`` is the decoded object, not its text. Plain
    sha256 in an unkeyed ledger, HMAC-SHA256 under ``key`` in a keyed one."""
    body = canonical_json([seq, at, campaign, kind, payload, prev_hash]).encode()
    if key is None:
        return hashlib.sha256(body).hexdigest()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


class Ledger:
    """An open ledger file; safe to share between threads and processes.

    Writes go through ``BEGIN IMMEDIATE`` so two writers never read the same last hash,
    and ``synchronous=FULL`` so an acknowledged event survives power loss.
    """

    def __init__(self, path: Path, key: bytes | None = None) -> None:
        """``key``: the chain key (default: the file ``ATTUNE_LEDGER_KEY_FILE`` names, when
        set); a ledger created with one is keyed (``gate.ledger_key``)."""
        self.path = Path(path)
        self._key = key if key is not None else key_from_environment(self.path.parent)
        if not self.path.exists():
            ledger_file.create(self.path, key_id(self._key) if self._key else None)
        ledger_file.check(self.path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = FULL")
        self.keyed_by = ledger_file.stored_key_id(self._conn)
        """The id of the key the chain is keyed with; None: an unkeyed (sha256) chain."""

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
        key = self._chain_key()
        with self._lock, self._transaction():
            last = self._conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            seq, prev = next(last, (0, GENESIS_HASH))
            seq += 1
            at = time.time()
            digest = event_hash(seq, at, campaign, kind, decoded, prev, key)
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

    def head(self) -> Anchor | None:
        """The last event's (seq, hash); None while the ledger is empty."""
        with self._lock:
            row = self._conn.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            found = row.fetchone()
        return None if found is None else Anchor(seq=found[0], hash=found[1])

    def verify(self, anchors: Sequence[Anchor] = ()) -> VerifyReport:
        """Re-hash the whole chain, check the append-only triggers are in place as created
        (compared by their SQL text), and check the chain against ``anchors``.

        Without an anchor this detects edited rows, edited hashes and deleted rows, but not the
        loss of the last events (truncation), nor a chain rewritten and re-hashed from the
        tampered row on; an anchor past the end names a cut-off tail, and an anchor whose seq
        holds another hash a rewritten chain.
        """
        keyed = self.keyed_by is not None
        try:
            key = self._chain_key()
        except AttuneError as exc:
            return VerifyReport(ok=False, checked=0, reason=str(exc), keyed=keyed)
        prev, checked = GENESIS_HASH, 0
        head: Anchor | None = None
        with self._lock:
            rows = self._conn.execute(f"{_SELECT} ORDER BY seq").fetchall()
            found = self._conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"
            ).fetchall()
        hashes: dict[int, str] = {}

        def broken(reason: str, seq: int | None = None) -> VerifyReport:
            return VerifyReport(
                ok=False,
                checked=checked,
                first_broken_seq=seq,
                reason=reason,
                head=head,
                keyed=keyed,
            )

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
                    if event_hash(seq, at, campaign, kind, decoded, prev_hash, key) != digest:
                        reason = f"seq {seq} does not match its hash: the row was edited"
            if reason:
                return broken(reason, expected)
            prev, checked = digest, expected
            head = Anchor(seq=seq, hash=digest)
            hashes[seq] = digest
        trigger_problem = ledger_file.trigger_problem(dict(found))
        if trigger_problem:
            return broken(trigger_problem)
        problem = anchor_problem(hashes, anchors)
        if problem:
            return broken(problem[1], problem[0])
        return VerifyReport(ok=True, checked=checked, head=head, anchors=len(anchors), keyed=keyed)

    def _chain_key(self) -> bytes | None:
        return chain_key(self.keyed_by, self._key, self.path)

    def require_intact(self, action: str) -> None:
        """Refuse to ``action`` (resume, report, stop, recover) on a broken chain, naming the
        first broken row, so nothing is acted on or appended after an edit."""
        report = self.verify()
        if report.ok:
            return
        at = f" at seq {report.first_broken_seq}" if report.first_broken_seq is not None else ""
        raise AttuneError(
            f"the ledger's hash chain is broken{at} ({report.reason}); refusing to {action}; "
            "`attune ledger verify` shows it",
            path=str(self.path),
        )

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
