"""``attune ledger verify|show``: check the hash chain; print events, GPU-hours and the speedup
(from ``CampaignState``, like every other surface)."""

from __future__ import annotations

from pathlib import Path

from bot.campaign_state import fold
from bot.console import console
from bot.render import cost_line, ledger_table
from bot.report_judgement import confirmation_text
from gate.errors import AttuneError
from gate.ledger import Ledger


def _open(path: Path) -> Ledger:
    if not path.exists():
        raise AttuneError("no ledger here (pass --ledger PATH)", path=str(path))
    return Ledger(path)


def ledger_verify(path: Path) -> int:
    """Exit 0 when the chain verifies, 1 with the first broken link otherwise."""
    with _open(path) as ledger:
        report = ledger.verify()
    if report.ok:
        console.print(f"{path}: ok, {report.checked} events, hash chain intact")
        return 0
    at = f" at seq {report.first_broken_seq}" if report.first_broken_seq is not None else ""
    console.print(f"[red]{path}: broken{at}[/]: {report.reason}")
    return 1


def ledger_show(path: Path, *, campaign: str | None) -> int:
    with _open(path) as ledger:
        campaigns = [campaign] if campaign else ledger.campaigns()
        if campaign and campaign not in ledger.campaigns():
            raise AttuneError(f"no campaign {campaign!r} in this ledger", path=str(path))
        for name in campaigns:
            events = ledger.events(name)
            console.print(ledger_table(events))
            state = fold(name, events)
            console.print(f"{name}: {cost_line(state)}")
            if state.judgement.confirmed:
                console.print(f"{name}: {confirmation_text(state.judgement.confirmed)}")
    return 0
