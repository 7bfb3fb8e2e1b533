"""The ledger on real SQLite files: chain, append-only triggers, tamper detection, crashes."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.ledger import EVENT_KINDS, GENESIS_HASH, Ledger
from gate.models import canonical_json
from tests.events_factory import payload

REPO = Path(__file__).resolve().parents[1]


def _fill(path: Path, n: int = 4) -> None:
    with Ledger(path) as ledger:
        ledger.append("c1", "campaign_opened", payload("campaign_opened"))
        for i in range(1, n):
            ledger.append("c1", "trial_started", payload("trial_started", trial=f"baseline-{i}"))


def _raw(path: Path, *statements: str) -> None:
    """Write to the file behind the ledger's back, as an attacker or a careless script would."""
    conn = sqlite3.connect(path)
    try:
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _verify(path: Path) -> tuple[bool, int | None, str | None]:
    with Ledger(path) as ledger:
        report = ledger.verify()
    return report.ok, report.first_broken_seq, report.reason


def _child(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_append_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "ledger.db"
    with Ledger(path) as ledger:
        first = ledger.append("c1", "campaign_opened", payload("campaign_opened"))
        ledger.append("c2", "campaign_opened", payload("campaign_opened", budget_device_hours=1))
        profile = {"compute": 0.5, "communication": 0.1, "cpu": 0.3, "idle": 0.1}
        profile.update(step_seconds=0.2, steps=3)
        third = ledger.append("c1", "trial_finished", payload("trial_finished", profile=profile))
        assert [e.seq for e in ledger.events()] == [1, 2, 3]
        assert ledger.events("c1") == [first, third]
        assert ledger.campaigns() == ["c1", "c2"]
    with Ledger(path) as ledger:  # reopened: same events, same order
        events = ledger.events()
    assert events[0] == first
    assert events[2].payload == third.payload
    assert events[2].payload["profile"] == {**profile, "trace_path": None}
    assert events[0].prev_hash == GENESIS_HASH
    assert [e.prev_hash for e in events[1:]] == [e.hash for e in events[:-1]]


def test_hash_is_sha256_of_canonical_row(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        e = ledger.append("c1", "noise_calibrated", payload("noise_calibrated", mean=1234.5))
    body = canonical_json([e.seq, e.time, e.campaign, e.kind, e.payload, e.prev_hash])
    assert e.hash == hashlib.sha256(body.encode()).hexdigest()


def test_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path, 5)
    with Ledger(path) as ledger:
        report = ledger.verify()
    assert report.ok and report.checked == 5
    assert report.first_broken_seq is None and report.reason is None


def test_empty_ledger_verifies(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        assert ledger.verify().ok
        assert ledger.events() == [] and ledger.campaigns() == []


def test_values_json_cannot_hold_are_stored_as_text_and_still_verify(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        changes = {"log": (tmp_path / "a.log", tmp_path / "b.log")}
        e = ledger.append(
            "c1", "candidate_proposed", payload("candidate_proposed", changes=changes)
        )
        assert e.payload["changes"] == {"log": [str(tmp_path / "a.log"), str(tmp_path / "b.log")]}
        assert ledger.verify().ok


def test_unknown_kind_is_a_programming_error(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        with pytest.raises(ValueError, match="unknown ledger event kind 'trial_paused'"):
            ledger.append("c1", "trial_paused", {})  # type: ignore[arg-type]
        assert ledger.events() == []


def test_event_kinds_are_a_closed_list() -> None:
    # Adding a kind is a reviewed change to this test, not a drive-by.
    assert EVENT_KINDS == (
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
    )


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE events SET payload = '{\"budget_device_hours\":99}' WHERE seq = 1",
        "UPDATE events SET hash = 'x' WHERE seq = 2",
        "DELETE FROM events WHERE seq = 2",
        "DELETE FROM events",
        "INSERT OR REPLACE INTO events VALUES (2, 0, 'c1', 'trial_started', '{}', 'x', 'y')",
    ],
)
def test_raw_update_delete_and_replace_are_refused(tmp_path: Path, sql: str) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    with pytest.raises(sqlite3.IntegrityError, match="attune ledger is append-only"):
        _raw(path, sql)
    assert _verify(path) == (True, None, None)


def test_edited_payload_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(
        path,
        "DROP TRIGGER events_no_update",
        "UPDATE events SET payload = '{\"trial\":99}' WHERE seq = 3",
    )
    with Ledger(path) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert (report.first_broken_seq, report.checked) == (3, 2)
    assert report.reason == "seq 3 does not match its hash: the row was edited"


def test_edited_hash_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(path, "DROP TRIGGER events_no_update", f"UPDATE events SET hash = '{'f' * 64}'")
    ok, seq, _ = _verify(path)
    assert (ok, seq) == (False, 1)


def test_rehashed_row_breaks_the_next_link(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    with Ledger(path) as ledger:
        e = ledger.events()[1]
    forged = {"trial": 99}
    body = canonical_json([e.seq, e.time, e.campaign, e.kind, forged, e.prev_hash])
    digest = hashlib.sha256(body.encode()).hexdigest()
    _raw(
        path,
        "DROP TRIGGER events_no_update",
        f"UPDATE events SET payload = '{canonical_json(forged)}', hash = '{digest}' WHERE seq = 2",
    )
    ok, seq, reason = _verify(path)
    assert (ok, seq) == (False, 3)
    assert reason == "prev_hash of seq 3 does not match the hash of seq 2"


@pytest.mark.parametrize(("deleted", "broken"), [(1, 1), (2, 2), (3, 3)])
def test_deleted_row_is_detected(tmp_path: Path, deleted: int, broken: int) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(path, "DROP TRIGGER events_no_delete", f"DELETE FROM events WHERE seq = {deleted}")
    ok, seq, reason = _verify(path)
    assert (ok, seq) == (False, broken)
    assert reason is not None and "rows were deleted" in reason


def test_dropped_triggers_fail_verify_even_with_an_intact_chain(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(path, "DROP TRIGGER events_no_delete")
    ok, seq, reason = _verify(path)
    assert (ok, seq) == (False, None)
    assert reason == "append-only triggers are missing: events_no_delete"


def test_unparsable_payload_is_reported_not_crashed_on(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(path, "DROP TRIGGER events_no_update", "UPDATE events SET payload = '{' WHERE seq = 2")
    assert _verify(path) == (False, 2, "payload of seq 2 is not JSON")
    with Ledger(path) as ledger, pytest.raises(AttuneError, match="event seq 2 is unreadable"):
        ledger.events()


def test_random_bytes_are_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    data = random.Random(0).randbytes(8192)
    path.write_bytes(data)
    with pytest.raises(AttuneError) as info:
        Ledger(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not an attune ledger (file is not a database)")
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]


def test_garbage_after_a_sqlite_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    data = b"SQLite format 3\x00" + random.Random(1).randbytes(8192)
    path.write_bytes(data)
    with pytest.raises(AttuneError, match=r"not an attune ledger \(file is not a database"):
        Ledger(path)
    assert path.read_bytes() == data


def test_other_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    _raw(path, "CREATE TABLE users (name TEXT)", "INSERT INTO users VALUES ('ada')")
    data = path.read_bytes()
    with pytest.raises(AttuneError, match="without the attune events table") as info:
        Ledger(path)
    assert str(path) in str(info.value)
    assert path.read_bytes() == data


def test_empty_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    path.touch()
    with pytest.raises(AttuneError, match=r"not an attune ledger \(file is empty\)"):
        Ledger(path)
    assert path.read_bytes() == b""


def test_ledger_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


APPEND_FOREVER = """
    import sys
    from pathlib import Path
    from gate.ledger import Ledger
    from tests.events_factory import payload

    ledger = Ledger(Path(sys.argv[1]))
    i = 0
    while True:
        ledger.append(sys.argv[2], "trial_started", payload("trial_started", recipe="x" * 2000))
        i += 1
        print(i, flush=True)
"""


def test_survives_a_process_killed_mid_append(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    before = 0
    for round_, wait_for in enumerate([1, 37, 150]):
        child = _child(APPEND_FOREVER, str(path), f"round{round_}")
        assert child.stdout is not None
        for _ in range(wait_for):
            assert child.stdout.readline(), "the appender died on its own"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        # Every append the child reported was committed; at most one more may have landed.
        acknowledged = before + wait_for + sum(1 for _ in child.stdout)
        child.stdout.close()
        with Ledger(path) as ledger:
            report = ledger.verify()
            events = ledger.events()
        assert report.ok, report
        assert report.checked == len(events)
        assert acknowledged <= len(events) <= acknowledged + 1
        before = len(events)
        assert all(e.payload["recipe"] == "x" * 2000 for e in events)


APPEND_N = """
    import sys
    from pathlib import Path
    from gate.ledger import Ledger
    from tests.events_factory import payload

    with Ledger(Path(sys.argv[1])) as ledger:
        for i in range(int(sys.argv[3])):
            ledger.append(sys.argv[2], "trial_started", payload("trial_started", trial=f"t{i}"))
"""


def test_concurrent_first_open_and_appends_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "ledger.db"
    children = [_child(APPEND_N, str(path), f"c{n}", "40") for n in range(4)]
    assert [child.wait(timeout=120) for child in children] == [0, 0, 0, 0]
    with Ledger(path) as ledger:
        report = ledger.verify()
        events = ledger.events()
        assert sorted(ledger.campaigns()) == ["c0", "c1", "c2", "c3"]
    assert report.ok and report.checked == 160
    assert [e.seq for e in events] == list(range(1, 161))
    for n in range(4):  # each writer's events are in its own order
        trials = [e.payload["trial"] for e in events if e.campaign == f"c{n}"]
        assert trials == [f"t{i}" for i in range(40)]
    leftovers = sorted(p.name for p in path.parent.iterdir())
    assert leftovers == ["ledger.db", "ledger.db.lock"]


def test_a_second_open_in_one_process_keeps_the_wal_of_the_first(tmp_path: Path) -> None:
    """Opening and closing another handle on the ledger in the same process (a verify before a
    resume, a GitHub service call beside a campaign thread) must not drop the first one's
    locks: another process closing the ledger would then delete the write-ahead log that the
    first is still appending to, and every event after it is lost to readers and to a kill."""
    path = tmp_path / "ledger.db"
    count = "import sys; from gate.ledger import Ledger; print(len(Ledger(sys.argv[1]).events()))"

    def seen_elsewhere() -> int:
        child = _child(count, str(path))
        out, _ = child.communicate(timeout=60)
        return int(out)

    with Ledger(path) as ledger:
        ledger.append("c1", "campaign_opened", payload("campaign_opened"))
        Ledger(path).close()
        ledger.append("c1", "trial_started", payload("trial_started", trial="baseline-1"))
        assert seen_elsewhere() == 2
        ledger.append("c1", "trial_started", payload("trial_started", trial="baseline-2"))
        assert seen_elsewhere() == 3
        assert (tmp_path / "ledger.db-wal").exists()
