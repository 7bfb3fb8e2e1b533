"""``attune ledger verify|show``: check the hash chain; print events, GPU-hours and the speedup
(from ``CampaignState``, like every other surface)."""

from __future__ import annotations

import os
from pathlib import Path

from bot.commands.parser import DEFAULT_LEDGER
from bot.console import console
from bot.render import cost_line, ledger_table
from bot.render.words import count
from bot.report.judgement import confirmation_text
from bot.report.predictions import error_summary, prediction_rows
from bot.state.fold import fold
from gate.errors import AttuneError
from gate.ledger import Anchor, Ledger
from gate.ledger_key import KEY_ENV


def default_ledger() -> Path:
    """``--ledger`` left out: ``ledger.db`` when the current directory is a campaign's (what
    ``attune tune`` and ``attune demo`` write), else the App's ``.attune/ledger.db``."""
    here = Path("ledger.db")
    return here if here.is_file() else DEFAULT_LEDGER


def _open(path: Path) -> Ledger:
    if not path.exists():
        raise AttuneError(
            "no ledger here: pass --ledger DIR/ledger.db, or run this inside a campaign's "
            "directory",
            path=str(path),
        )
    return Ledger(path)


_UNKEYED_WITH_KEY = (
    f"; {KEY_ENV} is set, but this ledger was created without a key (or its key table was "
    "removed and its chain re-hashed)"
)


def ledger_verify(path: Path, anchors: list[str] | None = None) -> int:
    """Exit 0 when the chain verifies (against every ``SEQ:HASH`` anchor given), 1 with the
    first broken link otherwise. The head it prints is the anchor to keep for later."""
    parsed = [Anchor.parse(text) for text in anchors or []]
    with _open(path) as ledger:
        report, keyed_by = ledger.verify(parsed), ledger.keyed_by
    if report.ok:
        against = f", {count(report.anchors, 'anchor')} held" if report.anchors else ""
        console.print(
            f"{path}: ok, {report.checked} events, hash chain intact{against}", soft_wrap=True
        )
        if report.head is not None:
            console.print(f"head (anchor): {report.head}", soft_wrap=True)
        if report.keyed:
            console.print(f"keyed chain (HMAC-SHA256, key id {keyed_by})", soft_wrap=True)
        else:
            console.print(
                "unkeyed chain: a chain re-hashed after an edit, or a cut-off tail, is caught "
                "only against an anchor kept outside the ledger (--anchor SEQ:HASH)"
                + (_UNKEYED_WITH_KEY if os.environ.get(KEY_ENV) else ""),
                soft_wrap=True,
            )
        return 0
    at = f" at seq {report.first_broken_seq}" if report.first_broken_seq is not None else ""
    console.print(f"[red]{path}: broken{at}[/]: {report.reason}", soft_wrap=True)
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
            predicted = prediction_rows(state)
            for row in predicted:
                measured = f"{row.measured:,.0f}" if row.measured else (row.status or "running")
                console.print(
                    f"{name}: {row.trial} predicted {row.prior:,.0f} (prior), "
                    f"{row.calibrated:,.0f} (calibrated), measured {measured} tokens/s/device",
                    soft_wrap=True,
                )
            summary = error_summary(predicted)
            if summary:
                console.print(f"{name}: {summary}", soft_wrap=True)
    return 0
