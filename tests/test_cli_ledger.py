"""`attune ledger verify|show` on real ledger files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bot.cli import main
from gate.ledger import Ledger
from tests.events_factory import payload


def make_ledger(path: Path) -> None:
    with Ledger(path) as ledger:
        opened = payload("campaign_opened", baseline="b", budget_device_hours=1.0)
        ledger.append("c1", "campaign_opened", opened)
        started = payload("trial_started", trial="t1", fingerprint="f", devices=2)
        ledger.append("c1", "trial_started", started)
        finished = payload(
            "trial_finished",
            trial="t1",
            fingerprint="f",
            status="failed",
            score=None,
            allocated_at=100.0,
            released_at=190.0,
            devices=2,
            device_seconds=180.0,
        )
        ledger.append("c1", "trial_finished", finished)


def test_verify_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path)
    assert main(["ledger", "verify", "--ledger", str(path)]) == 0
    assert "3 events, hash chain intact" in capsys.readouterr().out
    assert main(["ledger", "show", "--ledger", str(path)]) == 0
    out = capsys.readouterr().out
    assert "trial_finished" in out
    assert "180.0 device-seconds = 0.0500 GPU-hours of 1.0000 budgeted" in out


def test_verify_reports_first_broken_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.db"
    make_ledger(path)
    con = sqlite3.connect(path)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("UPDATE events SET payload = replace(payload, '190.0', '110.0') WHERE seq = 3")
    con.commit()
    con.close()
    assert main(["ledger", "verify", "--ledger", str(path)]) == 1
    assert "broken at seq 3" in capsys.readouterr().out


def test_corrupted_ledger_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(b"\x00garbage" * 512)
    before = path.read_bytes()
    assert main(["ledger", "show", "--ledger", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ledger.db: not an attune ledger" in err[0]
    assert path.read_bytes() == before


def test_missing_ledger_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ledger", "verify", "--ledger", str(tmp_path / "none.db")]) == 2
    assert "none.db: no ledger here" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
