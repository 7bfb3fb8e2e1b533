"""What `attune ledger verify` proves beyond the chain itself: anchors kept outside the ledger
catch a cut-off tail and a chain re-hashed after an edit; the append-only triggers are compared
by their SQL text; a previous release's ledger verifies as before and says it is unkeyed;
`tune --resume`, `report` and `stop` refuse a broken chain, naming the row, before acting; and a
chain keyed with a key kept outside the ledger's directory cannot be re-hashed without it."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from bot.agents.rules import RulesAgent
from bot.campaign.context import CampaignContext
from bot.campaign.executor import LocalExecutor
from bot.cli import main
from bot.forges.local import LocalForge
from bot.render import CAMPAIGN_MARKER
from gate.errors import AttuneError
from gate.ledger import Anchor, Ledger, event_hash
from gate.ledger_key import KEY_ENV, key_id
from gate.models import canonical_json
from gate.registry import load_registry
from tests.events_factory import payload

LEDGER_01 = Path(__file__).resolve().parent / "fixtures" / "ledgers" / "attune-0.1.db"
NO_DELETE = (
    "CREATE TRIGGER events_no_delete BEFORE DELETE ON events\n"
    "BEGIN SELECT RAISE(ABORT, 'attune ledger is append-only'); END"
)
NO_UPDATE = NO_DELETE.replace("no_delete", "no_update").replace("DELETE", "UPDATE")


def _fill(path: Path, n: int = 5) -> Anchor:
    """A campaign of ``n`` events; returns its head."""
    with Ledger(path) as ledger:
        ledger.append("c1", "campaign_opened", payload("campaign_opened"))
        for i in range(1, n):
            ledger.append("c1", "trial_started", payload("trial_started", trial=f"baseline-{i}"))
        head = ledger.head()
    assert head is not None and head.seq == n
    return head


def _raw(path: Path, *statements: str) -> None:
    """Write behind the ledger's back, as someone with the file would."""
    conn = sqlite3.connect(path)
    try:
        for sql in statements:
            conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _cut_tail(path: Path, keep: int) -> None:
    """Delete the events after ``keep`` and put the trigger back exactly as it was."""
    _raw(
        path,
        "DROP TRIGGER events_no_delete",
        f"DELETE FROM events WHERE seq > {keep}",
        NO_DELETE,
    )


def _rehash_from(path: Path, seq: int, forged: dict[str, object]) -> None:
    """Edit one payload and re-hash every link from it on, triggers put back as they were:
    the chain is self-consistent again."""
    with Ledger(path) as ledger:
        events = ledger.events()
    statements = ["DROP TRIGGER events_no_update"]
    prev = events[seq - 2].hash if seq > 1 else "0" * 64
    for e in events[seq - 1 :]:
        body = forged if e.seq == seq else e.payload
        digest = event_hash(e.seq, e.time, e.campaign, e.kind, body, prev)
        text = canonical_json(body).replace("'", "''")
        statements.append(
            f"UPDATE events SET payload = '{text}', prev_hash = '{prev}', hash = '{digest}' "
            f"WHERE seq = {e.seq}"
        )
        prev = digest
    _raw(path, *statements, NO_UPDATE)


# --- anchors --------------------------------------------------------------------------------


def test_a_cut_off_tail_verifies_alone_and_fails_against_its_anchor(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    head = _fill(path)
    _cut_tail(path, keep=3)
    with Ledger(path) as ledger:
        assert ledger.verify().ok  # the chain alone cannot tell
        report = ledger.verify([head])
    assert not report.ok
    assert report.first_broken_seq == 4
    assert report.reason is not None and "ends at seq 3" in report.reason
    assert "last 2 events were cut off" in report.reason


def test_a_rehashed_chain_verifies_alone_and_fails_against_its_anchor(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    head = _fill(path)
    forged = payload("trial_started", trial="baseline-1", devices=1, forecast_device_seconds=0)
    _rehash_from(path, 2, forged)
    with Ledger(path) as ledger:
        assert ledger.verify().ok
        assert ledger.events()[1].payload["forecast_device_seconds"] == 0
        report = ledger.verify([head])
        earlier = ledger.verify([Anchor(seq=1, hash=ledger.events()[0].hash)])
    assert not report.ok and report.first_broken_seq == head.seq
    assert (
        report.reason is not None and "rewritten and re-hashed at or before seq 5" in report.reason
    )
    assert earlier.ok and earlier.anchors == 1  # the rows before the edit are untouched


def test_an_anchor_of_an_intact_ledger_holds_as_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    head = _fill(path, n=3)
    with Ledger(path) as ledger:
        ledger.append("c1", "trial_started", payload("trial_started", trial="baseline-9"))
        report = ledger.verify([head])
    assert report.ok and report.anchors == 1 and report.head is not None
    assert report.head.seq == 4


@pytest.mark.parametrize("text", ["", "5", "0:" + "a" * 64, "3:abc", "x:" + "a" * 64])
def test_a_malformed_anchor_is_a_clear_error(text: str) -> None:
    with pytest.raises(AttuneError, match="an anchor is SEQ:HASH"):
        Anchor.parse(text)


def test_verify_cli_takes_anchors_and_prints_the_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.db"
    head = _fill(path)
    assert main(["ledger", "verify", "--ledger", str(path), "--anchor", str(head)]) == 0
    out = capsys.readouterr().out
    assert "1 anchor held" in out and f"head (anchor): {head}" in out
    _cut_tail(path, keep=4)
    assert main(["ledger", "verify", "--ledger", str(path)]) == 0
    capsys.readouterr()
    assert main(["ledger", "verify", "--ledger", str(path), "--anchor", str(head)]) == 1
    assert "broken at seq 5" in capsys.readouterr().out
    assert main(["ledger", "verify", "--ledger", str(path), "--anchor", "5"]) == 2
    assert "an anchor is SEQ:HASH" in capsys.readouterr().err


# --- triggers by their text ------------------------------------------------------------------


def test_a_trigger_recreated_to_refuse_nothing_fails_verify(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(path, "DROP TRIGGER events_no_update", NO_UPDATE.replace("\nBEGIN", " WHEN 0\nBEGIN"))
    _raw(path, "UPDATE events SET time = time WHERE seq = 1")  # now allowed
    with Ledger(path) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert report.reason == (
        "append-only triggers were changed (their SQL differs): events_no_update"
    )


def test_an_extra_trigger_fails_verify(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    _fill(path)
    _raw(
        path,
        "CREATE TRIGGER events_sneak AFTER INSERT ON events BEGIN SELECT 1; END",
    )
    with Ledger(path) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert report.reason == "triggers that attune never creates are present: events_sneak"


# --- a previous release's ledger ----------------------------------------------------------


def test_a_0_1_ledger_verifies_as_before_and_says_it_is_unkeyed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "attune-0.1.db"
    shutil.copy(LEDGER_01, path)
    with Ledger(path) as ledger:
        report = ledger.verify()
        head = ledger.head()
    assert report.ok and report.checked == 39 and not report.keyed
    assert report.head == head
    assert main(["ledger", "verify", "--ledger", str(path), "--anchor", str(head)]) == 0
    out = capsys.readouterr().out
    assert "ok, 39 events, hash chain intact, 1 anchor held" in out
    assert "unkeyed chain" in out


# --- refused before acting ----------------------------------------------------------------


@pytest.fixture
def broken_campaign(tmp_path: Path) -> Path:
    """A campaign directory whose ledger was edited at seq 3 (triggers dropped, row changed)."""
    workdir = tmp_path / "campaign"
    workdir.mkdir()
    _fill(workdir / "ledger.db")
    _raw(
        workdir / "ledger.db",
        "DROP TRIGGER events_no_update",
        "UPDATE events SET payload = replace(payload, 'baseline-2', 'baseline-7') WHERE seq = 3",
        NO_UPDATE,
    )
    return workdir


@pytest.mark.parametrize(
    ("argv", "action"),
    [
        (["tune", "--resume"], "resume the campaign"),
        (["report"], "write its report"),
        (["stop"], "request a stop"),
    ],
)
def test_resume_report_and_stop_refuse_a_broken_chain_naming_the_row(
    broken_campaign: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    action: str,
) -> None:
    before = sorted(p.name for p in broken_campaign.iterdir())
    assert main([*argv, str(broken_campaign)]) == 2
    err = capsys.readouterr().err
    assert "hash chain is broken at seq 3" in err and f"refusing to {action}" in err
    assert "seq 3 does not match its hash" in err
    with Ledger(broken_campaign / "ledger.db") as ledger:
        assert len(ledger.events()) == 5  # nothing appended
    after = {p.name for p in broken_campaign.iterdir()}
    assert after - set(before) <= {"campaign.lock", "ledger.db-wal", "ledger.db-shm"}
    assert "report.md" not in after and "stop-requested" not in after


# --- a keyed chain --------------------------------------------------------------------------


@pytest.fixture
def keyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """ATTUNE_LEDGER_KEY_FILE set to a key kept outside the ledger's directory."""
    key = b"0123456789abcdef0123456789abcdef"
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "ledger.key").write_bytes(key + b"\n")
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "secrets" / "ledger.key"))
    return key


def test_a_keyed_chain_catches_a_row_rehashed_without_the_key(
    tmp_path: Path, keyed: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state" / "ledger.db"
    _fill(path)
    with Ledger(path) as ledger:
        report = ledger.verify()
        assert ledger.keyed_by == key_id(keyed)
    assert report.ok and report.keyed
    assert main(["ledger", "verify", "--ledger", str(path)]) == 0
    assert f"keyed chain (HMAC-SHA256, key id {key_id(keyed)})" in capsys.readouterr().out
    forged = payload("trial_started", trial="baseline-1", devices=1, forecast_device_seconds=0)
    _rehash_from(path, 2, forged)  # every link after the edit re-hashed, as sha256 does it
    with Ledger(path) as ledger:
        report = ledger.verify()
    assert not report.ok and report.first_broken_seq == 2
    assert report.reason == "seq 2 does not match its hash: the row was edited"


def test_a_keyed_chain_needs_its_key_to_be_verified_or_extended(
    tmp_path: Path, keyed: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state" / "ledger.db"
    _fill(path)
    monkeypatch.delenv(KEY_ENV)
    with Ledger(path) as ledger:
        report = ledger.verify()
        assert not report.ok and report.keyed
        assert f"keyed (key id {key_id(keyed)}): set {KEY_ENV}" in str(report.reason)
        with pytest.raises(AttuneError, match="chain is keyed"):
            ledger.append("c1", "trial_started", payload("trial_started", trial="baseline-9"))
    other = tmp_path / "secrets" / "other.key"
    other.write_bytes(b"f" * 32)
    monkeypatch.setenv(KEY_ENV, str(other))
    with Ledger(path) as ledger:
        report = ledger.verify()
    assert not report.ok and f"but the key in {KEY_ENV} has id {key_id(b'f' * 32)}" in str(
        report.reason
    )


def test_a_keyed_ledger_stripped_of_its_key_says_it_is_unkeyed(
    tmp_path: Path, keyed: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "state" / "ledger.db"
    _fill(path)
    _raw(path, "DROP TABLE chain_key")
    _rehash_from(path, 1, payload("campaign_opened"))  # the whole chain, as sha256
    assert main(["ledger", "verify", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert "unkeyed chain" in out and "was created without a key" in out


@pytest.mark.parametrize("where", ["beside", "short"])
def test_a_key_beside_the_ledger_or_too_short_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    key = tmp_path / ("state" if where == "beside" else "keys") / "ledger.key"
    key.parent.mkdir()
    key.write_bytes(b"0123456789abcdef0123" if where == "beside" else b"short")
    monkeypatch.setenv(KEY_ENV, str(key))
    message = "inside the ledger's directory" if where == "beside" else "at least 16"
    with pytest.raises(AttuneError, match=message):
        Ledger(tmp_path / "state" / "ledger.db")
    assert not (tmp_path / "state" / "ledger.db").exists()


# --- where anchors are kept -----------------------------------------------------------------


def _anchor_in(text: str) -> str:
    return text.split("Ledger anchor: `", 1)[1].split("`", 1)[0]


def test_the_report_carries_an_anchor_that_later_catches_a_cut_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "campaign"
    workdir.mkdir()
    head = _fill(workdir / "ledger.db")
    assert main(["report", str(workdir)]) == 0
    anchor = _anchor_in((workdir / "report.md").read_text())
    assert anchor == str(head)
    _cut_tail(workdir / "ledger.db", keep=4)
    capsys.readouterr()
    ledger = str(workdir / "ledger.db")
    assert main(["ledger", "verify", "--ledger", ledger, "--anchor", anchor]) == 1
    assert "its last 1 event was cut off" in capsys.readouterr().out


def test_the_campaign_comment_carries_the_ledger_head(tmp_path: Path) -> None:
    registry = load_registry("embedded", "1")
    with Ledger(tmp_path / "ledger.db") as ledger, LocalForge(tmp_path / "forge") as forge:
        opened = payload("campaign_opened")
        pr = forge.open_tuned(opened["recipe_path"], opened["recipe_text"], "tune", "body")
        ledger.append("c1", "campaign_opened", opened)
        ledger.append("c1", "forge_ready", payload("forge_ready", tuned_pr=pr.number))
        core = CampaignContext(
            name="c1",
            ledger=ledger,
            forge=forge,
            executor=LocalExecutor(
                ledger=ledger,
                campaign="c1",
                registry=registry,
                workdir=tmp_path,
                budget_device_seconds=60,
                steps=4,
                warmup=1,
            ),
            agent=RulesAgent(),
            registry=registry,
        )
        core.update_campaign_comment()
        head = ledger.head()
        (comment,) = forge.comments(pr.number)
    assert comment.marker == CAMPAIGN_MARKER and head is not None
    assert _anchor_in(comment.body) == str(head)
