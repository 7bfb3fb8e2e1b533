"""A restarted app verifies the ledger before it recovers a campaign from it: a broken chain is
refused, naming the row, and nothing is started, dispatched or appended."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.ledger import Ledger
from tests.fakegithub import FakeGitHub
from tests.github_harness import App, seed_repo
from tests.test_github_recover import opened_by_an_app_that_died

NO_UPDATE = (
    "CREATE TRIGGER events_no_update BEFORE UPDATE ON events\n"
    "BEGIN SELECT RAISE(ABORT, 'attune ledger is append-only'); END"
)


def test_recovery_refuses_an_edited_ledger_naming_the_row(tmp_path: Path) -> None:
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        opened_by_an_app_that_died(fake, tmp_path, number)
        conn = sqlite3.connect(tmp_path / "ledger.db")
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET payload = replace(payload, '0.05', '500') WHERE seq = 1")
        conn.execute(NO_UPDATE)
        conn.commit()
        conn.close()
        app = App(fake, tmp_path)  # not served: its recovery is called as the lifespan does
        with pytest.raises(AttuneError, match="hash chain is broken at seq 1") as info:
            app.campaigns.recover()
        assert "refusing to recover its campaigns" in str(info.value)
        assert app.campaigns.running == {} and fake.dispatches() == []
    with Ledger(tmp_path / "ledger.db") as ledger:
        assert len(ledger.events()) == 1
